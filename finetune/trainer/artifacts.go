package trainer

import (
	"fmt"
	"regexp"

	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// TrainablePatterns returns the parameters that the specs select
// (network.Trainable's presets and patterns), once each, as exact-name
// patterns for grad.Config.Trainable, whatever characters the names hold.
func TrainablePatterns(m *onnx.Model, specs ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, spec := range specs {
		names, err := network.Trainable(m, spec)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, "re:"+regexp.QuoteMeta(n))
			}
		}
	}
	return out, nil
}

// TrainInput is the image input a training graph is compiled for: its
// name, its shape, and the image size in it.
type TrainInput struct {
	Name          string
	Shape         []int64
	Height, Width int64
}

// NamedInput is the training input of a model that is not a one-input
// segmenter: input, at batch and h×w, NCHW or NHWC (the layout whose
// channel axis is static and at most 4; NCHW when both are).
func NamedInput(m *onnx.Model, input string, batch, h, w int64) (TrainInput, error) {
	for _, v := range m.Graph().GetInput() {
		if v.GetName() != input {
			continue
		}
		dims := v.GetType().GetTensorType().GetShape().GetDim()
		small := func(i int) bool { return len(dims) == 4 && dims[i].GetDimValue() > 0 && dims[i].GetDimValue() <= 4 }
		switch {
		case small(1) || len(dims) == 4 && dims[1].GetDimValue() > 0 && !small(3):
			return TrainInput{input, []int64{batch, dims[1].GetDimValue(), h, w}, h, w}, nil
		case small(3):
			return TrainInput{input, []int64{batch, h, w, dims[3].GetDimValue()}, h, w}, nil
		}
		return TrainInput{}, fmt.Errorf("input %q is not an NCHW or NHWC image tensor with a static channel count", input)
	}
	return TrainInput{}, fmt.Errorf("the model has no input %q", input)
}

// Given says which settings of a training graph the caller chose; the
// model's contract supplies the others.
type Given struct {
	// Size keeps h×w over a model's fixed input size.
	Size bool
	// Output, ClassAxis and Kind keep the loss's.
	Output, ClassAxis, Kind bool
}

// ContractInput is the training input of a segmentation model with
// contract ct, at batch and h×w (the model's fixed size, unless
// given.Size), and sets loss to train its scores (before a final Softmax
// or Sigmoid: their output, class axis, and a sigmoid loss for a
// thresholded head) where given does not fix them.
func ContractInput(ct *contract.Contract, batch int, h, w int64, given Given, loss *grad.Loss) TrainInput {
	if ct.Height > 0 && !given.Size {
		h, w = ct.Height, ct.Width
	}
	if !given.Output && ct.Kind != contract.Labels {
		loss.Output = ct.Scores
		if !given.ClassAxis {
			loss.ClassAxis = ct.ScoresClassAxis
		}
		if !given.Kind && ct.Thresholded() {
			loss.Kind = grad.LossSigmoidBCE
		}
	}
	return TrainInput{ct.Input, ct.InputLayout.Shape(batch, int(h), int(w)), h, w}
}
