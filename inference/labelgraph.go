package inference

import (
	"errors"
	"fmt"

	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// The outputs of a label graph (labelGraph), in this order.
const (
	// graphLabels is the arg-max label map, uint8 [N,H,W].
	graphLabels = "segtune_labels"
	// graphNonFinite is, per image, the sum of its scores times zero,
	// float [N]: 0, or NaN where a score is NaN or ±Inf (CheckFinite's
	// check, without the scores leaving the device).
	graphNonFinite = "segtune_nonfinite"
	// graphScoreShape is the scores' shape, int64 [4], so that the
	// contract checks the run as it checks a scores output (CheckRun).
	graphScoreShape = "segtune_score_shape"
)

// errNoLabelGraph is why a model keeps its scores output: its graph's
// arg-max would not give the labels the host's does, or could not be
// built for it.
var errNoLabelGraph = errors.New("no label graph")

// labelGraph returns model with the arg-max of the contract's scores output
// appended, as the only outputs: graphLabels, graphNonFinite and
// graphScoreShape. The labels are the arg-max ClassScores' planes give, in
// the same terms (the lower class on a tie, ONNX ArgMax's first index):
// over the class axis (1, or 3 for NHWC) of logits and probabilities; for
// sigmoid and binary heads class 0 where no channel is above
// ScoreThreshold, else 1 + the arg-max channel. The uint8 Cast runs where
// the model does, so that one byte a pixel crosses back to the host
// instead of 4·C. errNoLabelGraph (wrapped) when the contract does not say
// enough (labels, an unknown channel count), or the opset lacks an
// operator's form.
func labelGraph(model []byte, ct *contract.Contract) ([]byte, error) {
	classes := ct.Channels
	if ct.Thresholded() {
		classes++ // the threshold plane
	}
	if ct.Kind == contract.Labels || ct.Channels < 1 || classes > contract.MaxClasses {
		return nil, fmt.Errorf("%w: output %q (%s, %d channels)", errNoLabelGraph, ct.Output, ct.Kind, ct.Channels)
	}
	m, err := onnx.Parse(model, "")
	if err != nil {
		return nil, err
	}
	g := m.Graph()
	opset := m.Opset("")
	if opset < 7 || (ct.Thresholded() && opset < 9) { // Where is opset 9's
		return nil, fmt.Errorf("%w: opset %d", errNoLabelGraph, opset)
	}
	var scores *onnxpb.ValueInfoProto
	for _, o := range g.Output {
		if o.GetName() == ct.Output {
			scores = o
		}
	}
	if scores == nil {
		return nil, fmt.Errorf("the graph has no output %q", ct.Output)
	}
	taken := map[string]bool{}
	for _, n := range g.Node {
		for _, o := range n.Output {
			taken[o] = true
		}
	}
	for _, v := range append(append([]*onnxpb.ValueInfoProto{}, g.Input...), g.Output...) {
		taken[v.GetName()] = true
	}
	for _, name := range []string{graphLabels, graphNonFinite, graphScoreShape} {
		if taken[name] {
			return nil, fmt.Errorf("%w: the graph already has a tensor %q", errNoLabelGraph, name)
		}
	}
	b := onnx.Builder{Prefix: "segtune_argmax/", Nodes: &g.Node, Inits: &g.Initializer,
		Taken: func(s string) bool { return taken[s] }}
	x := ct.Output
	axis := int64(1)
	if ct.OutputLayout == contract.NHWC {
		axis = 3
	}
	// reduce is a Reduce* node over axes, keepdims 0: axes an attribute
	// before the opset that made them an input (13 for ReduceSum, 18 for
	// ReduceMax).
	reduce := func(op string, inputSince int64, in string, axes ...int64) string {
		if opset >= inputSince {
			return b.Op1(op, []string{in, b.ConstInt64("", []int64{int64(len(axes))}, axes...)}, onnx.IntAttr("keepdims", 0))
		}
		return b.Op1(op, []string{in}, onnx.IntsAttr("axes", axes...), onnx.IntAttr("keepdims", 0))
	}
	label := b.Op1("ArgMax", []string{x}, onnx.IntAttr("axis", axis), onnx.IntAttr("keepdims", 0))
	if ct.Thresholded() {
		// Class 0 where the best channel is not above the threshold
		// plane, which ClassScores puts first and so wins ties.
		best := reduce("ReduceMax", 18, x, axis)
		above := b.Op1("Greater", []string{best, b.ConstFloat("", onnxpb.TensorProto_FLOAT, nil, float64(ct.ScoreThreshold()))})
		next := b.Op1("Add", []string{label, b.ConstInt64("", nil, 1)})
		label = b.Op1("Where", []string{above, next, b.ConstInt64("", nil, 0)})
	}
	b.OpTo("Cast", []string{label}, []string{graphLabels}, onnx.IntAttr("to", int64(onnxpb.TensorProto_UINT8)))
	zeroed := b.Op1("Mul", []string{x, b.ConstFloat("", onnxpb.TensorProto_FLOAT, nil, 0)})
	sum := reduce("ReduceSum", 13, zeroed, 1, 2, 3)
	b.OpTo("Identity", []string{sum}, []string{graphNonFinite})
	b.OpTo("Shape", []string{x}, []string{graphScoreShape})
	g.Output = []*onnxpb.ValueInfoProto{
		onnx.SymbolicValueInfo(graphLabels, onnxpb.TensorProto_UINT8, nil, nil, nil),
		onnx.SymbolicValueInfo(graphNonFinite, onnxpb.TensorProto_FLOAT, nil),
		onnx.TensorValueInfo(graphScoreShape, onnxpb.TensorProto_INT64, 4),
	}
	return m.Marshal()
}
