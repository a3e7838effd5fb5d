package grad

import (
	"fmt"
	"strings"
)

// The ConvGrad operator: segtune's own domain, which ONNX Runtime knows only
// through the kernels runtime registers on a session.
//
// Inputs dY [N, Co, H', W'], X [N, Ci, H, W] and W [Co, Ci/group, kh, kw] of
// one element type (float, double on the CPU; float16, bfloat16 on CUDA);
// outputs dX (X's shape), dW (W's shape) and dB ([Co]), each optional (an
// output named "" is not computed). Attributes of the forward Conv with its
// padding resolved: kernel_shape, strides, dilations, pads (begins then
// ends) and group.
const (
	ConvGradDomain  = "com.segtune"
	ConvGradOp      = "ConvGrad"
	ConvGradVersion = 1
)

// ConvClasses is a set of convolution classes, each of which the gradient
// compiler may hand to the ConvGrad operator (Config.ConvGrad) or write in
// standard operators. The classes differ in how fast each provider runs
// them: PyTorch, for one, avoids cuDNN for float32 depthwise convolutions.
type ConvClasses uint8

const (
	// ConvDense is a convolution with one group and a kernel larger than 1×1.
	ConvDense ConvClasses = 1 << iota
	// ConvPointwise is a 1×1 convolution with one group.
	ConvPointwise
	// ConvDepthwise has one input channel per group (group = Ci > 1).
	ConvDepthwise
	// ConvGrouped has several groups of several input channels each.
	ConvGrouped

	// AllConvClasses is every class.
	AllConvClasses = ConvDense | ConvPointwise | ConvDepthwise | ConvGrouped
)

var convClassNames = []struct {
	class ConvClasses
	name  string
}{{ConvDense, "dense"}, {ConvPointwise, "pointwise"}, {ConvDepthwise, "depthwise"}, {ConvGrouped, "grouped"}}

// ClassOfConv returns the class of a 2-D or N-D convolution with the given
// weight shape [Co, Ci/group, k…] and group count.
func ClassOfConv(wShape []int64, group int64) ConvClasses {
	if group > 1 {
		if len(wShape) > 1 && wShape[1] == 1 {
			return ConvDepthwise
		}
		return ConvGrouped
	}
	for _, k := range wShape[min(2, len(wShape)):] {
		if k != 1 {
			return ConvDense
		}
	}
	return ConvPointwise
}

// String lists the classes in the set, comma-separated: "none" for the
// empty set and "all" for every class.
func (s ConvClasses) String() string {
	switch s {
	case 0:
		return "none"
	case AllConvClasses:
		return "all"
	}
	var names []string
	for _, c := range convClassNames {
		if s&c.class != 0 {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ",")
}

// ParseConvClasses reads a set written as String writes it: "all", "none"
// (or ""), or a comma-separated list of dense, pointwise, depthwise and
// grouped.
func ParseConvClasses(s string) (ConvClasses, error) {
	switch strings.TrimSpace(s) {
	case "", "none":
		return 0, nil
	case "all":
		return AllConvClasses, nil
	}
	var set ConvClasses
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		found := false
		for _, c := range convClassNames {
			if part == c.name {
				set |= c.class
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("convolution class %q: want all, none, or a list of dense, pointwise, depthwise and grouped", part)
		}
	}
	return set, nil
}
