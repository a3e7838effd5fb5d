package grad

import (
	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// targetOpset is the lowest default-domain opset the compiler emits: 18 has
// every input-form operator the backward rules use (ReduceSum axes input,
// Split split input, ScatterElements reduction="add" from 16) and Col2Im
// (the CPU form of one-channel strided input gradients, convInputGrad), and
// ONNX Runtime 1.30 supports it on CPU and CUDA. Models with a higher opset
// keep it.
const targetOpset = 18

// upgrade rewrites forward nodes written for an older opset into their
// targetOpset form so the whole graph can be stamped with one opset. It only
// touches the operators whose registered upgrade starts after the model's
// opset; everything else is already valid.
func upgrade(g *onnx.GraphProto, from int64, b *builder) error {
	if from >= targetOpset {
		return nil
	}
	var out []*onnx.NodeProto
	for _, n := range g.Node {
		if n.GetDomain() != "" && n.GetDomain() != "ai.onnx" {
			out = append(out, n)
			continue
		}
		b.nodes = nil
		if u := registry[n.GetOpType()].upgrade; u.apply != nil && from < u.since {
			if err := u.apply(n, b); err != nil {
				return atNode(n, err)
			}
		}
		out = append(out, b.nodes...) // helper nodes first, they feed n
		out = append(out, n)
		out = append(out, b.tail...) // helper nodes that consume n's output
		b.tail = nil
	}
	b.nodes = nil
	g.Node = out
	g.Initializer = append(g.Initializer, b.inits...)
	b.inits = nil
	return nil
}

// attrToInput moves an INTS attribute into input slot idx as an INT64 constant.
func attrToInput(n *onnx.NodeProto, name string, idx int, b *builder) {
	a := attr(n, name)
	if a == nil {
		return
	}
	v := a.GetInts()
	delAttr(n, name)
	for len(n.Input) < idx {
		n.Input = append(n.Input, "")
	}
	n.Input = append(n.Input[:idx], b.ints(v...))
}

// The rewrites below are the registered upgrades (opSpec.upgrade); each
// names the opset from which its operator needs none.

// moveAttrToInput makes the rewrite of an operator whose INTS attribute
// became input idx (Split's split, Squeeze's axes... at 13; the other
// reductions' axes at 18).
func moveAttrToInput(name string, idx int) func(*onnx.NodeProto, *builder) error {
	return func(n *onnx.NodeProto, b *builder) error {
		attrToInput(n, name, idx, b)
		return nil
	}
}

// upgradeSplit moves Split's split attribute (before 13) to its input; a
// Split without sizes names its output count, which opset 18 requires.
func upgradeSplit(n *onnx.NodeProto, b *builder) error {
	attrToInput(n, "split", 1, b)
	if input(n, 1) == "" && attr(n, "num_outputs") == nil {
		setAttr(n, onnx.IntAttr("num_outputs", int64(len(n.Output))))
	}
	return nil
}

// upgradeSoftmax keeps the pre-13 meaning of Softmax, LogSoftmax and
// Hardmax, which flattened their input to 2-D at axis.
func upgradeSoftmax(n *onnx.NodeProto, b *builder) error {
	axis := attrInt(n, "axis", 1)
	x, y := n.Input[0], n.Output[0]
	flat := b.op1("Flatten", []string{x}, onnx.IntAttr("axis", axis))
	shape := b.op1("Shape", []string{x})
	sm := b.fresh(n.GetOpType())
	n.Input = []string{flat}
	n.Output = []string{sm}
	setAttr(n, onnx.IntAttr("axis", 1))
	// The Reshape consumes n's output, so it goes after n.
	b.opToTail("Reshape", []string{sm, shape}, []string{y})
	return nil
}

// upgradeToResize turns Upsample (7, 9) and Resize-10 into the Resize they
// meant: asymmetric coordinates, floor rounding.
func upgradeToResize(n *onnx.NodeProto, b *builder) error {
	mode := attrString(n, "mode", "nearest")
	if mode == "bilinear" {
		mode = "linear"
	}
	var scales string
	if s := attrFloats(n, "scales"); s != nil { // Upsample-7
		v := make([]float64, len(s))
		for i, x := range s {
			v[i] = float64(x)
		}
		scales = b.constFloat(v, []int64{int64(len(v))})
	} else {
		scales = input(n, 1)
	}
	n.OpType = proto.String("Resize")
	n.Input = []string{n.Input[0], "", scales}
	n.Attribute = nil
	setAttr(n, onnx.StringAttr("mode", mode))
	setAttr(n, onnx.StringAttr("coordinate_transformation_mode", "asymmetric"))
	setAttr(n, onnx.StringAttr("nearest_mode", "floor"))
	return nil
}

// upgradeClip moves Clip's min and max attributes (before 11) to inputs.
func upgradeClip(n *onnx.NodeProto, b *builder) error {
	lo, hi := attr(n, "min"), attr(n, "max")
	ins := []string{n.Input[0], "", ""}
	if lo != nil {
		ins[1] = b.scalar(float64(lo.GetF()))
	}
	if hi != nil {
		ins[2] = b.scalar(float64(hi.GetF()))
	}
	n.Input, n.Attribute = ins, nil
	return nil
}

// upgradePad moves Pad's pads and value attributes (before 11) to inputs.
func upgradePad(n *onnx.NodeProto, b *builder) error {
	pads := attrInts(n, "pads")
	if pads == nil {
		pads = attrInts(n, "paddings") // Pad-1
	}
	value := attrFloat(n, "value", 0)
	mode := attrString(n, "mode", "constant")
	n.Input = []string{n.Input[0], b.ints(pads...), b.scalar(float64(value))}
	n.Attribute = []*onnx.AttributeProto{onnx.StringAttr("mode", mode)}
	return nil
}

// upgradeDropout turns Dropout into its inference form: the training graph
// is deterministic.
func upgradeDropout(n *onnx.NodeProto, b *builder) error {
	if len(n.Output) > 1 && n.Output[1] != "" {
		return unsupportedf("the Dropout mask output is not supported")
	}
	n.OpType = proto.String("Identity")
	n.Input, n.Output, n.Attribute = n.Input[:1], n.Output[:1], nil
	return nil
}

// upgradeSlice moves Slice's starts, ends and axes attributes (before 10)
// to inputs.
func upgradeSlice(n *onnx.NodeProto, b *builder) error {
	starts, ends, axes := attrInts(n, "starts"), attrInts(n, "ends"), attrInts(n, "axes")
	ins := []string{n.Input[0], b.ints(starts...), b.ints(ends...)}
	if axes != nil {
		ins = append(ins, b.ints(axes...))
	}
	n.Input, n.Attribute = ins, nil
	return nil
}

// upgradeTopK moves TopK's k attribute (before 10) to an input.
func upgradeTopK(n *onnx.NodeProto, b *builder) error {
	k := attrInt(n, "k", 1)
	delAttr(n, "k")
	n.Input = []string{n.Input[0], b.ints(k)}
	return nil
}

// upgradeBatchNorm drops BatchNormalization's pre-9 attributes and its
// training outputs, which are not part of the inference form.
func upgradeBatchNorm(n *onnx.NodeProto, b *builder) error {
	delAttr(n, "spatial")
	delAttr(n, "is_test")
	delAttr(n, "consumed_inputs")
	if len(n.Output) > 1 {
		n.Output = n.Output[:1]
	}
	return nil
}
