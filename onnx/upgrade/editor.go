package upgrade

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// editor is what an adapter rewrites a node with: constants (which become
// initializers), helper nodes placed before the node, and what the graph
// knows (constant values, consumers).
type editor struct {
	b     onnx.Builder
	inits []*onnxpb.TensorProto
	// out collects the helper nodes placed before the node being
	// rewritten, after those placed after it.
	out, after []*onnxpb.NodeProto
	consts     map[string]*onnxpb.TensorProto
	consumers  map[string][]*onnxpb.NodeProto
	outputs    map[string]bool
}

func newEditor(g *onnxpb.GraphProto) *editor {
	taken := map[string]bool{}
	e := &editor{inits: g.GetInitializer(), consts: map[string]*onnxpb.TensorProto{},
		consumers: onnx.Consumers(g), outputs: map[string]bool{}}
	for _, t := range g.GetInitializer() {
		taken[t.GetName()] = true
		e.consts[t.GetName()] = t
	}
	for _, v := range g.GetInput() {
		taken[v.GetName()] = true
	}
	for _, v := range g.GetOutput() {
		taken[v.GetName()] = true
		e.outputs[v.GetName()] = true
	}
	for _, n := range g.GetNode() {
		taken[n.GetName()] = true
		for _, o := range n.GetOutput() {
			taken[o] = true
		}
		if n.GetOpType() == "Constant" && defaultDomain(n) && len(n.GetOutput()) == 1 {
			if t := onnx.Attr(n, "value").GetT(); t != nil {
				e.consts[n.GetOutput()[0]] = t
			}
		}
	}
	e.b = onnx.Builder{Prefix: "upgrade/", Taken: func(s string) bool { return taken[s] }, Nodes: &e.out, Inits: &e.inits}
	return e
}

// upgradeNode applies n's adapters for every opset after from up to to,
// in order (an adapter may change the operator, as Upsample becomes
// Resize, whose own adapters then follow). It reports whether any did.
func (e *editor) upgradeNode(n *onnxpb.NodeProto, from, to int64) (bool, error) {
	if !defaultDomain(n) {
		return false, nil
	}
	changed := false
	for at := from + 1; at <= to; at++ {
		for _, a := range adapters[n.GetOpType()] {
			if a.at != at {
				continue
			}
			if err := a.fn(e, n); err != nil {
				return false, err
			}
			changed = true
		}
	}
	return changed, nil
}

// int64s adds an INT64 initializer of the values (1-D) and returns its name.
func (e *editor) int64s(v []int64) string {
	return e.b.ConstInt64("", []int64{int64(len(v))}, v...)
}

// floats adds a FLOAT initializer of the values (1-D).
func (e *editor) floats(v []float32) string {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return e.b.ConstFloat("", onnxpb.TensorProto_FLOAT, []int64{int64(len(v))}, f...)
}

// scalar adds a FLOAT scalar initializer.
func (e *editor) scalar(v float32) string {
	return e.b.ConstFloat("", onnxpb.TensorProto_FLOAT, nil, float64(v))
}

// constFloats returns the values of the constant tensor name (an
// initializer or a Constant node's output), or nil when it is not one.
func (e *editor) constFloats(name string) []float32 {
	t := e.consts[name]
	if t == nil {
		return nil
	}
	v, err := onnx.Float32s(t)
	if err != nil {
		return nil
	}
	return v
}

// used reports whether a tensor is read by a node or is a graph output.
func (e *editor) used(name string) bool {
	return name != "" && (len(e.consumers[name]) > 0 || e.outputs[name])
}

// takeAttr removes n's attribute called name and returns it (nil if absent).
func takeAttr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for i, a := range n.GetAttribute() {
		if a.GetName() == name {
			n.Attribute = append(n.Attribute[:i], n.Attribute[i+1:]...)
			return a
		}
	}
	return nil
}

// setAttr replaces or adds an attribute.
func setAttr(n *onnxpb.NodeProto, a *onnxpb.AttributeProto) {
	takeAttr(n, a.GetName())
	n.Attribute = append(n.Attribute, a)
}

// setInput sets n's input i, padding the inputs before it with "" (an
// optional input left out).
func setInput(n *onnxpb.NodeProto, i int, name string) {
	for len(n.Input) <= i {
		n.Input = append(n.Input, "")
	}
	n.Input[i] = name
}

// input returns n's input i, "" when absent.
func input(n *onnxpb.NodeProto, i int) string {
	if i < len(n.GetInput()) {
		return n.Input[i]
	}
	return ""
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
