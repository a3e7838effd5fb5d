package upgrade

import (
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// adapter rewrites a node written for the opsets before at into its form
// at opset at. An adapter that replaces the operator writes the form the
// new operator's later adapters expect.
type adapter struct {
	at int64
	fn func(e *editor, n *onnxpb.NodeProto) error
}

// adapters lists, per operator, the changes since opset 7 that a node
// written for an older opset must be rewritten for (ONNX Changelog).
var adapters = map[string][]adapter{
	"Upsample":           {{10, upsampleToResize}},
	"Resize":             {{11, resize10To11}},
	"Clip":               {{11, clipBoundsToInputs}},
	"Pad":                {{11, padAttrsToInputs}},
	"Slice":              {{10, sliceAttrsToInputs}},
	"TopK":               {{10, topKToInput}},
	"Squeeze":            {{13, axesToInput}},
	"Unsqueeze":          {{13, axesToInput}},
	"ReduceSum":          {{13, axesToInput}},
	"Split":              {{13, splitToInput}, {18, splitNumOutputs}},
	"BatchNormalization": {{9, batchNormSpatial}, {14, batchNormInferenceOutputs}},
	"Dropout":            {{12, dropoutRatioToInput}},
	"Softmax":            {{13, softmaxAxis}},
	"LogSoftmax":         {{13, softmaxAxis}},
	"Hardmax":            {{13, softmaxAxis}},
	"ReduceMean":         {{18, axesToInput}},
	"ReduceMax":          {{18, axesToInput}},
	"ReduceMin":          {{18, axesToInput}},
	"ReduceProd":         {{18, axesToInput}},
	"ReduceL1":           {{18, axesToInput}},
	"ReduceL2":           {{18, axesToInput}},
	"ReduceLogSum":       {{18, axesToInput}},
	"ReduceLogSumExp":    {{18, axesToInput}},
	"ReduceSumSquare":    {{18, axesToInput}},
}

// compatible are the operators whose nodes, as written for any opset from
// 7, mean the same at every later opset up to MaxOpset: their later
// versions only add types, optional inputs or attributes whose defaults
// are the old behaviour, or allow what was an error (negative axes,
// broadcasting).
var compatible = map[string]bool{
	"Abs": true, "Add": true, "And": true, "ArgMax": true, "ArgMin": true, "AveragePool": true,
	"Cast": true, "Ceil": true, "Concat": true, "Constant": true, "ConstantOfShape": true, "Conv": true,
	"ConvInteger": true, "ConvTranspose": true, "Cos": true, "DepthToSpace": true, "DequantizeLinear": true,
	"Div": true, "Einsum": true, "Elu": true, "Equal": true, "Erf": true, "Exp": true, "Expand": true,
	"Flatten": true, "Floor": true, "Gather": true, "GatherElements": true, "GatherND": true, "Gemm": true,
	"GlobalAveragePool": true, "GlobalMaxPool": true, "Greater": true, "HardSigmoid": true, "HardSwish": true,
	"Identity": true, "InstanceNormalization": true, "LayerNormalization": true, "LeakyRelu": true, "Less": true,
	"Log": true, "LRN": true, "MatMul": true, "MatMulInteger": true, "Max": true, "MaxPool": true, "Mean": true,
	"Min": true, "Mul": true, "Neg": true, "Not": true, "Or": true, "Pow": true, "PRelu": true,
	"QLinearConv": true, "QLinearMatMul": true, "QuantizeLinear": true, "Range": true, "Reciprocal": true,
	"Relu": true, "Reshape": true, "Round": true, "Selu": true, "Shape": true, "Sigmoid": true, "Sign": true,
	"Sin": true, "Softplus": true, "Softsign": true, "SpaceToDepth": true, "Sqrt": true, "Sub": true,
	"Sum": true, "Tanh": true, "Tile": true, "Transpose": true, "Where": true, "DynamicQuantizeLinear": true,
	"Mish": true, "Celu": true, "Gelu": true, "Xor": true, "Size": true, "NonZero": true, "CumSum": true,
}

// upsampleToResize: Upsample is deprecated at opset 10 in favour of
// Resize. Upsample (7: scales attribute; 9: scales input) samples with
// asymmetric coordinates (x_in = x_out / scale), nearest taking the floor:
// Resize-10's behaviour, which resize10To11 carries on.
func upsampleToResize(e *editor, n *onnxpb.NodeProto) error {
	mode := onnx.AttrString(n, "mode", "nearest")
	switch mode {
	case "nearest", "linear":
	case "bilinear":
		mode = "linear"
	default:
		return errorf("mode %q", mode)
	}
	scales := input(n, 1)
	if a := takeAttr(n, "scales"); a != nil {
		scales = e.floats(a.GetFloats())
	}
	if scales == "" {
		return errorf("no scales")
	}
	n.OpType = strPtr("Resize")
	n.Input = []string{n.Input[0], scales}
	setAttr(n, onnx.StringAttr("mode", mode))
	return nil
}

// resize10To11: Resize-11 adds the roi input before scales and the
// coordinate_transformation_mode and nearest_mode attributes, whose
// defaults (half_pixel, round_prefer_floor) differ from Resize-10's
// asymmetric sampling, which takes the floor when upsampling and the
// ceiling when downsampling (ONNX Runtime's "simple" nearest mode).
func resize10To11(e *editor, n *onnxpb.NodeProto) error {
	mode := onnx.AttrString(n, "mode", "nearest")
	scales := input(n, 1)
	setAttr(n, onnx.StringAttr("coordinate_transformation_mode", "asymmetric"))
	if mode == "nearest" {
		nearest := "floor"
		if s := e.constFloats(scales); s != nil {
			up, down := false, false
			for _, v := range s {
				up = up || v > 1
				down = down || v < 1
			}
			if up && down {
				return errorf("scales %v both up- and downsample, which Resize-10 rounds in one way and Resize-11 cannot", s)
			}
			if down {
				nearest = "ceil"
			}
		}
		setAttr(n, onnx.StringAttr("nearest_mode", nearest))
	}
	n.Input = []string{n.Input[0], e.floats(nil), scales}
	return nil
}

// clipBoundsToInputs: Clip-11 takes min and max as optional inputs, not
// attributes.
func clipBoundsToInputs(e *editor, n *onnxpb.NodeProto) error {
	lo, hi := takeAttr(n, "min"), takeAttr(n, "max")
	if lo != nil {
		setInput(n, 1, e.scalar(lo.GetF()))
	}
	if hi != nil {
		setInput(n, 2, e.scalar(hi.GetF()))
	}
	return nil
}

// padAttrsToInputs: Pad-11 takes pads (int64) and the constant value as
// inputs; mode stays an attribute.
func padAttrsToInputs(e *editor, n *onnxpb.NodeProto) error {
	pads := takeAttr(n, "pads")
	if pads == nil {
		return errorf("no pads")
	}
	setInput(n, 1, e.int64s(pads.GetInts()))
	if v := takeAttr(n, "value"); v != nil && v.GetF() != 0 {
		setInput(n, 2, e.scalar(v.GetF()))
	}
	return nil
}

// sliceAttrsToInputs: Slice-10 takes starts, ends and axes as inputs (and
// adds steps, which Slice-1 did not have: all 1).
func sliceAttrsToInputs(e *editor, n *onnxpb.NodeProto) error {
	starts, ends, axes := takeAttr(n, "starts"), takeAttr(n, "ends"), takeAttr(n, "axes")
	if starts == nil || ends == nil {
		return errorf("no starts or ends")
	}
	setInput(n, 1, e.int64s(starts.GetInts()))
	setInput(n, 2, e.int64s(ends.GetInts()))
	if axes != nil {
		setInput(n, 3, e.int64s(axes.GetInts()))
	}
	return nil
}

// topKToInput: TopK-10 takes k as a 1-element input.
func topKToInput(e *editor, n *onnxpb.NodeProto) error {
	k := takeAttr(n, "k")
	if k == nil {
		return errorf("no k")
	}
	setInput(n, 1, e.int64s([]int64{k.GetI()}))
	return nil
}

// axesToInput: Squeeze, Unsqueeze and ReduceSum at 13, the other Reduce
// operators at 18, take axes as an optional input. Without axes the node
// stays as it is (every axis: reduce all, squeeze all ones).
func axesToInput(e *editor, n *onnxpb.NodeProto) error {
	if axes := takeAttr(n, "axes"); axes != nil {
		setInput(n, 1, e.int64s(axes.GetInts()))
	}
	return nil
}

// splitToInput: Split-13 takes the sizes as an optional input.
func splitToInput(e *editor, n *onnxpb.NodeProto) error {
	if split := takeAttr(n, "split"); split != nil {
		setInput(n, 1, e.int64s(split.GetInts()))
	}
	return nil
}

// splitNumOutputs: Split-18 wants either the sizes input or the
// num_outputs attribute. An equal split (which the older opsets require
// to divide evenly) is num_outputs outputs.
func splitNumOutputs(_ *editor, n *onnxpb.NodeProto) error {
	if input(n, 1) == "" && onnx.Attr(n, "num_outputs") == nil {
		setAttr(n, onnx.IntAttr("num_outputs", int64(len(n.GetOutput()))))
	}
	return nil
}

// batchNormSpatial: BatchNormalization-9 drops the spatial attribute,
// keeping spatial=1 (one statistic per channel); is_test (dropped at 7)
// and consumed_inputs (dropped at 6) are dropped with it, where an
// exporter left them.
func batchNormSpatial(_ *editor, n *onnxpb.NodeProto) error {
	if onnx.AttrInt(n, "spatial", 1) != 1 {
		return errorf("spatial=0 (a statistic per element), which opset 9 dropped")
	}
	for _, a := range []string{"spatial", "is_test", "consumed_inputs"} {
		takeAttr(n, a)
	}
	return nil
}

// batchNormInferenceOutputs: from BatchNormalization-14 the running
// statistics are outputs in training mode only; an inference node written
// for older opsets may list them (unused), which newer opsets refuse.
func batchNormInferenceOutputs(e *editor, n *onnxpb.NodeProto) error {
	if len(n.GetOutput()) <= 1 {
		return nil
	}
	for _, o := range n.Output[1:] {
		if e.used(o) {
			return errorf("output %q (a running statistic) is read, which newer opsets give in training mode only", o)
		}
	}
	n.Output = n.Output[:1]
	return nil
}

// dropoutRatioToInput: Dropout-12 takes ratio as an optional input (and
// training_mode, default false: inference, as before).
func dropoutRatioToInput(e *editor, n *onnxpb.NodeProto) error {
	takeAttr(n, "is_test")
	if r := takeAttr(n, "ratio"); r != nil {
		setInput(n, 1, e.scalar(r.GetF()))
	}
	return nil
}

// softmaxAxis: before opset 13 Softmax, LogSoftmax and Hardmax flatten
// their input to 2-D at axis (default 1) and normalise each row; from 13
// they normalise along axis alone (default -1). An old node on the last
// axis means the same; any other becomes Flatten, the operator along the
// last axis, and a Reshape back to the input's shape.
func softmaxAxis(e *editor, n *onnxpb.NodeProto) error {
	axis := onnx.AttrInt(n, "axis", 1)
	if axis == -1 {
		setAttr(n, onnx.IntAttr("axis", -1))
		return nil
	}
	x, y := n.Input[0], n.Output[0]
	flat := e.b.Op1("Flatten", []string{x}, onnx.IntAttr("axis", axis))
	shape := e.b.Op1("Shape", []string{x})
	rows := e.b.Fresh(n.GetOpType())
	n.Input = []string{flat}
	n.Output = []string{rows}
	setAttr(n, onnx.IntAttr("axis", -1))
	// The Reshape must follow n: upgradeNode's caller places helper nodes
	// before n, so the Reshape is queued as n's successor.
	e.after = append(e.after, reshapeNode(e, rows, shape, y))
	return nil
}

func reshapeNode(e *editor, data, shape, out string) *onnxpb.NodeProto {
	name := e.b.Fresh("node_Reshape")
	op := "Reshape"
	return &onnxpb.NodeProto{Name: &name, OpType: &op, Input: []string{data, shape}, Output: []string{out}}
}

func strPtr(s string) *string { return &s }
