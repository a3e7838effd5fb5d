package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
)

// Unsupported lists, sorted and once each, the operators of m that gradient
// would have to cross and that have no gradient rule: the types of the
// nodes that read a float tensor computed from a float initializer, with no
// rule and no opset upgrade into an operator that has one. Other domains
// are written "domain.Op". Nodes that only compute shapes or masks (after
// Shape, Size, comparisons, a Cast to an integer type) are left out, as
// Build leaves them out. It looks at the graph alone, so it answers at
// once, without ONNX Runtime; nil means that every operator on a gradient
// path has a rule (Build may still refuse an attribute value a rule does
// not handle).
func Unsupported(m *onnx.Model) []string {
	g := m.Proto.GetGraph()
	reaches := map[string]bool{} // tensors that depend on a float initializer
	for _, t := range g.GetInitializer() {
		switch onnx.DataType(t.GetDataType()) {
		case onnx.Float32, onnx.Float64, onnx.Float16, onnx.BFloat16:
			reaches[t.GetName()] = true
		}
	}
	var out []string
	for _, n := range g.GetNode() {
		if !slices.ContainsFunc(n.GetInput(), func(x string) bool { return x != "" && reaches[x] }) {
			continue
		}
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			out = append(out, d+"."+n.GetOpType())
			continue
		}
		spec, known := registry[n.GetOpType()]
		if known && spec.nature.noGrad() || nonFloatOutputs[n.GetOpType()] || castsToNonFloat(n) {
			continue
		}
		if !known || spec.rule == nil && spec.upgrade.apply == nil {
			out = append(out, n.GetOpType())
		}
		for j, o := range n.GetOutput() {
			if o != "" && !spec.isIndexOutput(j) {
				reaches[o] = true
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nonFloatOutputs are the operators, registered or not, whose outputs are
// never float: no gradient reaches them, so they need no rule.
var nonFloatOutputs = map[string]bool{
	"Shape": true, "Size": true, "Equal": true, "Less": true, "LessOrEqual": true,
	"Greater": true, "GreaterOrEqual": true, "Not": true, "And": true, "Or": true,
	"Xor": true, "IsNaN": true, "IsInf": true, "NonZero": true, "ArgMax": true, "ArgMin": true,
}

// castsToNonFloat reports a Cast to a type that carries no gradient.
func castsToNonFloat(n *onnx.NodeProto) bool {
	if n.GetOpType() != "Cast" {
		return false
	}
	switch onnx.DataType(attr(n, "to").GetI()) {
	case onnx.Float32, onnx.Float64, onnx.Float16, onnx.BFloat16:
		return false
	}
	return true
}
