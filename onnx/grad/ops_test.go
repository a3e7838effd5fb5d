package grad_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/segtune/segtune/onnx/grad"
)

// opCase builds a small model around one operator.
type opCase struct {
	name  string
	opset int64
	build func(m *opModel)
}

// opTables are the single-operator finite-difference checks, one table per
// operator family. TestOps runs them all; TestEveryOperatorHasACase reads
// them to find the operators they check.
var opTables = []struct {
	name  string
	cases func() []opCase
}{
	{"Elementwise", elementwiseCases},
	{"Activations", activationCases},
	{"Shape", shapeCases},
	{"Index", indexCases},
	{"Linear", linearCases},
	{"Norm", normCases},
	{"Conv", convCases},
	{"ConvTranspose", convTransposeCases},
	{"Pools", poolCases},
	{"Resize", resizeCases},
}

func TestOps(t *testing.T) {
	for _, tb := range opTables {
		t.Run(tb.name, func(t *testing.T) { runCases(t, tb.cases()) })
	}
}

// model builds the case's model.
func (tc opCase) model() *opModel {
	opset := tc.opset
	if opset == 0 {
		opset = 13
	}
	m := newOpModel(opset)
	tc.build(m)
	if m.outs == nil {
		m.outs = []string{"y"}
	}
	return m
}

func runCases(t *testing.T, cases []opCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.model().check(t) })
	}
}

// registry is the compiler's operator registry.
var registry = grad.Registry()

// gradPathOps returns the operators of the nodes m.check differentiates:
// those on a path from a rand parameter to an output along which gradient
// flows, as the compiler decides it (no flow through stepwise or shape-only
// operators, nor through index outputs).
func (m *opModel) gradPathOps() []string {
	dep := map[string]bool{}
	for _, p := range m.params {
		dep[p] = true
	}
	onDep := make([]bool, len(m.nodes))
	for i, n := range m.nodes {
		f := registry[n.GetOpType()]
		if f.Nature == grad.Stepwise || f.Nature == grad.ShapeOnly || !slices.ContainsFunc(n.Input, func(x string) bool { return dep[x] }) {
			continue
		}
		onDep[i] = true
		for j, o := range n.Output {
			if !slices.Contains(f.IndexOutputs, j) {
				dep[o] = true
			}
		}
	}
	reach := map[string]bool{}
	for _, o := range m.outs {
		reach[o] = true
	}
	var ops []string
	for i := len(m.nodes) - 1; i >= 0; i-- {
		n := m.nodes[i]
		if !slices.ContainsFunc(n.Output, func(o string) bool { return dep[o] && reach[o] }) {
			continue
		}
		for _, x := range n.Input {
			reach[x] = true
		}
		if onDep[i] {
			ops = append(ops, n.GetOpType())
		}
	}
	return ops
}

// TestEveryOperatorHasACase fails when an operator with a backward rule has
// no case in opTables that differentiates it, or, when the operator is
// upgraded from older opsets, no such case at an opset it is upgraded from.
func TestEveryOperatorHasACase(t *testing.T) {
	checked, upgraded := map[string]bool{}, map[string]bool{}
	cases := map[string]opCase{}
	for _, tb := range opTables {
		for _, tc := range tb.cases() {
			cases[tb.name+"/"+tc.name] = tc
			m := tc.model()
			for _, op := range m.gradPathOps() {
				checked[op] = true
				if m.opset < registry[op].UpgradeSince {
					upgraded[op] = true
				}
			}
		}
	}
	var ops []string
	for op, f := range registry {
		if f.Rule {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	if len(ops) < 40 {
		t.Fatalf("the registry lists only %d operators with a rule: %v", len(ops), ops)
	}
	for _, op := range ops {
		if !checked[op] {
			t.Errorf("%s has a backward rule but no finite-difference case: add one to its family's table in opTables", op)
		}
		if since := registry[op].UpgradeSince; since != 0 && !upgraded[op] {
			t.Errorf("%s is upgraded from opsets older than %d but no case has such an opset: add one", op, since)
		}
	}

	// The path is the gradient's: neither the integer Shape → Gather →
	// Concat chain feeding Reshape's shape nor the Greater feeding Where's
	// condition is on it, so they cannot stand in for a case of their own.
	for name, want := range map[string][]string{"Shape/Reshape/from_shape": {"Reshape"}, "Elementwise/Where": {"Where"}} {
		tc, ok := cases[name]
		if !ok {
			t.Fatalf("no case %s", name)
		}
		if got := tc.model().gradPathOps(); !slices.Equal(got, want) {
			t.Errorf("%s: operators on the gradient path %v, want %v", name, got, want)
		}
	}
}

func elementwiseCases() []opCase {
	bin := func(op string, a, b []int64) func(m *opModel) {
		return func(m *opModel) { m.node(op, []string{m.rand("a", a...), m.rand("b", b...)}, []string{"y"}) }
	}
	return []opCase{
		{"Add/same", 0, bin("Add", []int64{2, 3, 4}, []int64{2, 3, 4})},
		{"Add/bcast", 0, bin("Add", []int64{2, 3, 4, 5}, []int64{3, 1, 1})},
		{"Add/bcast_both", 0, bin("Add", []int64{2, 1, 4}, []int64{3, 1})},
		{"Sub/bcast", 0, bin("Sub", []int64{2, 3, 4}, []int64{4})},
		{"Mul/bcast", 0, bin("Mul", []int64{2, 3, 4}, []int64{1, 3, 1})},
		{"Mul/one", 0, bin("Mul", []int64{2, 3}, []int64{1})},
		{"Div/bcast", 0, bin("Div", []int64{2, 3, 4}, []int64{3, 1})},
		{"Div/same", 0, bin("Div", []int64{3, 4}, []int64{3, 4})},
		{"Sum/3", 0, func(m *opModel) {
			m.node("Sum", []string{m.rand("a", 2, 3), m.rand("b", 3), m.rand("c", 2, 1)}, []string{"y"})
		}},
		{"Neg", 0, func(m *opModel) { m.node("Neg", []string{m.rand("a", 2, 3)}, []string{"y"}) }},
		{"Expand", 0, func(m *opModel) {
			m.node("Expand", []string{m.rand("a", 3, 1), m.ints("s", []int64{3}, 2, 3, 4)}, []string{"y"})
		}},
		{"Where", 0, func(m *opModel) {
			m.node("Greater", []string{m.rand("c", 2, 3, 4), m.floats("z", nil, 0)}, []string{"cond"})
			m.node("Where", []string{"cond", m.rand("a", 2, 3, 4), m.rand("b", 3, 1)}, []string{"y"})
		}},
		{"Min/2", 0, bin("Min", []int64{3, 4}, []int64{3, 4})},
		{"Max/bcast", 0, bin("Max", []int64{3, 4}, []int64{4})},
		{"Max/3", 0, func(m *opModel) {
			m.node("Max", []string{m.rand("a", 3, 4), m.rand("b", 3, 4), m.rand("c", 3, 4)}, []string{"y"})
		}},
		{"Abs", 0, func(m *opModel) { m.node("Abs", []string{m.rand("x", 2, 3, 4)}, []string{"y"}) }},
		{"Sqrt", 0, positive("Sqrt")},
		{"Log", 0, positive("Log")},
		{"Reciprocal", 0, func(m *opModel) { m.node("Reciprocal", []string{m.rand("x", 2, 3, 4)}, []string{"y"}) }},
		{"Pow/const2", 0, powConst(2)},
		{"Pow/const3_int64", 0, func(m *opModel) {
			m.node("Pow", []string{m.rand("x", 2, 3, 4), m.ints("e", nil, 3)}, []string{"y"})
		}},
		{"Pow/const_half", 0, func(m *opModel) {
			m.node("Abs", []string{m.rand("x", 2, 3, 4)}, []string{"ax"})
			m.node("Pow", []string{"ax", m.floats("e", nil, 0.5)}, []string{"y"})
		}},
		{"Pow/const1.7", 0, func(m *opModel) {
			m.node("Abs", []string{m.rand("x", 2, 3, 4)}, []string{"ax"})
			m.node("Pow", []string{"ax", m.floats("e", nil, 1.7)}, []string{"y"})
		}},
		{"Pow/general_bcast", 0, func(m *opModel) {
			m.node("Abs", []string{m.rand("x", 2, 3, 4)}, []string{"ax"})
			m.node("Pow", []string{"ax", m.rand("e", 3, 1)}, []string{"y"})
		}},
	}
}

// positive applies op to |x|, x in ±[0.2, 1.2], away from 0.
func positive(op string) func(m *opModel) {
	return func(m *opModel) {
		m.node("Abs", []string{m.rand("x", 2, 3, 4)}, []string{"ax"})
		m.node(op, []string{"ax"}, []string{"y"})
	}
}

// powConst is x^e for a constant float exponent e.
func powConst(e float32) func(m *opModel) {
	return func(m *opModel) {
		m.node("Pow", []string{m.rand("x", 2, 3, 4), m.floats("e", nil, e)}, []string{"y"})
	}
}

func activationCases() []opCase {
	un := func(op string, attrs ...any) func(m *opModel) {
		return func(m *opModel) { m.node(op, []string{m.rand("x", 2, 3, 4)}, []string{"y"}) }
	}
	return []opCase{
		{"Relu", 0, un("Relu")},
		{"Sigmoid", 0, un("Sigmoid")},
		{"Tanh", 0, un("Tanh")},
		{"Exp", 0, un("Exp")},
		{"LeakyRelu", 0, func(m *opModel) { m.node("LeakyRelu", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, af("alpha", 0.2)) }},
		{"PRelu/channel", 0, func(m *opModel) {
			m.node("PRelu", []string{m.rand("x", 2, 3, 4, 4), m.rand("s", 3, 1, 1)}, []string{"y"})
		}},
		{"PRelu/scalar", 0, func(m *opModel) { m.node("PRelu", []string{m.rand("x", 2, 3), m.rand("s", 1)}, []string{"y"}) }},
		{"Clip/both", 0, func(m *opModel) {
			m.node("Clip", []string{m.rand("x", 3, 4, 5), m.floats("lo", nil, -0.5), m.floats("hi", nil, 0.7)}, []string{"y"})
		}},
		{"Clip/min_only", 0, func(m *opModel) {
			m.node("Clip", []string{m.rand("x", 3, 4), m.floats("lo", nil, -0.5)}, []string{"y"})
		}},
		{"Clip/opset10_attrs", 10, func(m *opModel) {
			m.node("Clip", []string{m.rand("x", 3, 4)}, []string{"y"}, af("min", -0.5), af("max", 0.5))
		}},
		{"HardSigmoid", 0, func(m *opModel) {
			m.step = 1e-3 // float32 only, and piecewise: keep the differences off the kinks
			m.node("Mul", []string{m.rand("x", 3, 4, 5), m.floats("k", nil, 4)}, []string{"xx"})
			m.node("HardSigmoid", []string{"xx"}, []string{"y"}, af("alpha", 0.3), af("beta", 0.4))
		}},
		{"HardSwish", 14, func(m *opModel) {
			m.step = 1e-3
			m.node("Mul", []string{m.rand("x", 3, 4, 5), m.floats("k", nil, 4)}, []string{"xx"})
			m.node("HardSwish", []string{"xx"}, []string{"y"})
		}},
		{"Softmax/axis1", 0, func(m *opModel) { m.node("Softmax", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ai("axis", 1)) }},
		{"Softmax/last", 0, func(m *opModel) { m.node("Softmax", []string{m.rand("x", 2, 5)}, []string{"y"}) }},
		{"Softmax/opset11_coerced", 11, func(m *opModel) {
			m.node("Softmax", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ai("axis", 1))
		}},
		{"LogSoftmax/axis1", 0, func(m *opModel) {
			m.node("LogSoftmax", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ai("axis", 1))
		}},
		{"LogSoftmax/opset11", 11, func(m *opModel) { m.node("LogSoftmax", []string{m.rand("x", 3, 4)}, []string{"y"}) }},
		{"Softmax/attention_last", 0, func(m *opModel) {
			m.node("Softmax", []string{m.rand("x", 2, 2, 5, 5)}, []string{"y"}, ai("axis", -1))
		}},
		{"Softmax/attention_opset11", 11, func(m *opModel) {
			// Before 13, Softmax normalises the input flattened from axis on.
			m.node("Softmax", []string{m.rand("x", 2, 2, 5, 5)}, []string{"y"}, ai("axis", 3))
		}},
		{"LogSoftmax/attention_last", 0, func(m *opModel) {
			m.node("LogSoftmax", []string{m.rand("x", 2, 2, 5, 5)}, []string{"y"}, ai("axis", -1))
		}},
		{"LogSoftmax/attention_opset11", 11, func(m *opModel) {
			m.node("LogSoftmax", []string{m.rand("x", 2, 2, 5, 5)}, []string{"y"}, ai("axis", -1))
		}},
		// Erf has no double kernel on ONNX Runtime's CPU: float32, small step.
		{"Erf", 0, func(m *opModel) {
			m.step = 1e-3
			m.node("Erf", []string{m.rand("x", 2, 3, 4)}, []string{"y"})
		}},
		{"Gelu/none", 20, func(m *opModel) {
			m.step = 1e-3
			m.node("Gelu", []string{m.rand("x", 2, 3, 4)}, []string{"y"})
		}},
		{"Gelu/tanh", 20, func(m *opModel) {
			m.node("Gelu", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, as("approximate", "tanh"))
		}},
	}
}

func shapeCases() []opCase {
	return []opCase{
		{"Identity", 0, func(m *opModel) { m.node("Identity", []string{m.rand("x", 2, 3)}, []string{"y"}) }},
		{"Dropout", 0, func(m *opModel) { m.node("Dropout", []string{m.rand("x", 2, 3)}, []string{"y"}) }},
		{"Dropout/opset7", 7, func(m *opModel) { m.node("Dropout", []string{m.rand("x", 2, 3)}, []string{"y"}, af("ratio", 0.3)) }},
		{"Reshape", 0, func(m *opModel) {
			m.node("Reshape", []string{m.rand("x", 2, 3, 4), m.ints("s", []int64{2}, 6, -1)}, []string{"y"})
		}},
		{"Reshape/from_shape", 0, func(m *opModel) {
			m.node("Shape", []string{m.rand("x", 2, 3, 4)}, []string{"s"})
			m.node("Gather", []string{"s", m.ints("i0", nil, 0)}, []string{"s0"}, ai("axis", 0))
			m.node("Unsqueeze", []string{"s0", m.ints("ax", []int64{1}, 0)}, []string{"s0u"})
			m.node("Concat", []string{"s0u", m.ints("m1", []int64{1}, -1)}, []string{"ns"}, ai("axis", 0))
			m.node("Reshape", []string{"x", "ns"}, []string{"y"})
		}},
		{"Flatten", 0, func(m *opModel) { m.node("Flatten", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ai("axis", 2)) }},
		{"Transpose", 0, func(m *opModel) {
			m.node("Transpose", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ais("perm", 1, 2, 0))
		}},
		{"Squeeze/opset13", 0, func(m *opModel) {
			m.node("Squeeze", []string{m.rand("x", 2, 1, 4), m.ints("ax", []int64{1}, 1)}, []string{"y"})
		}},
		{"Squeeze/opset11", 11, func(m *opModel) { m.node("Squeeze", []string{m.rand("x", 2, 1, 4)}, []string{"y"}, ais("axes", 1)) }},
		{"Unsqueeze/opset13", 0, func(m *opModel) {
			m.node("Unsqueeze", []string{m.rand("x", 2, 4), m.ints("ax", []int64{2}, 0, 3)}, []string{"y"})
		}},
		{"Unsqueeze/opset11", 11, func(m *opModel) {
			m.node("Unsqueeze", []string{m.rand("x", 2, 4)}, []string{"y"}, ais("axes", -1))
		}},
		{"Concat/3", 0, func(m *opModel) {
			m.node("Concat", []string{m.rand("a", 2, 3, 4), m.rand("b", 2, 1, 4), m.rand("c", 2, 2, 4)}, []string{"y"}, ai("axis", 1))
		}},
		{"Concat/repeated", 0, func(m *opModel) {
			m.node("Concat", []string{m.rand("a", 2, 3), "a"}, []string{"y"}, ai("axis", -1))
		}},
		{"Split/opset13", 0, func(m *opModel) {
			m.node("Split", []string{m.rand("x", 2, 6, 3), m.ints("sp", []int64{3}, 1, 2, 3)}, []string{"y0", "y1", "y2"}, ai("axis", 1))
			m.outs = []string{"y0", "y2"}
		}},
		{"Split/opset11_equal", 11, func(m *opModel) {
			m.node("Split", []string{m.rand("x", 4, 3)}, []string{"y0", "y1"})
			m.outs = []string{"y0", "y1"}
		}},
		{"Split/opset11_attr", 11, func(m *opModel) {
			m.node("Split", []string{m.rand("x", 5, 3)}, []string{"y0", "y1"}, ais("split", 2, 3))
			m.outs = []string{"y1"}
		}},
		{"Slice/unit", 0, func(m *opModel) {
			m.node("Slice", []string{m.rand("x", 4, 6, 5), m.ints("st", []int64{2}, 1, -4), m.ints("en", []int64{2}, 3, 100), m.ints("ax", []int64{2}, 0, 2)}, []string{"y"})
		}},
		{"Slice/steps", 0, func(m *opModel) {
			m.node("Slice", []string{m.rand("x", 4, 7), m.ints("st", []int64{2}, -1, 0), m.ints("en", []int64{2}, -100, 7), m.ints("ax", []int64{2}, 0, 1), m.ints("sp", []int64{2}, -2, 3)}, []string{"y"})
		}},
		{"Slice/opset9_attrs", 9, func(m *opModel) {
			m.node("Slice", []string{m.rand("x", 4, 6)}, []string{"y"}, ais("starts", 1), ais("ends", 3), ais("axes", 1))
		}},
		{"Pad/constant", 0, func(m *opModel) {
			m.node("Pad", []string{m.rand("x", 1, 2, 3, 4), m.ints("p", []int64{8}, 0, 0, 1, 2, 0, 0, 2, 1)}, []string{"y"})
		}},
		{"Pad/negative", 0, func(m *opModel) {
			m.node("Pad", []string{m.rand("x", 2, 5, 4), m.ints("p", []int64{6}, 0, -1, 2, 0, 1, -2)}, []string{"y"})
		}},
		{"Pad/reflect", 0, func(m *opModel) {
			m.node("Pad", []string{m.rand("x", 1, 2, 4, 5), m.ints("p", []int64{8}, 0, 0, 2, 1, 0, 0, 3, 2)}, []string{"y"}, as("mode", "reflect"))
		}},
		{"Pad/edge", 0, func(m *opModel) {
			m.node("Pad", []string{m.rand("x", 1, 2, 3, 4), m.ints("p", []int64{8}, 0, 0, 2, 1, 0, 0, 1, 3)}, []string{"y"}, as("mode", "edge"))
		}},
		{"Pad/opset7_attrs", 7, func(m *opModel) {
			m.node("Pad", []string{m.rand("x", 2, 3)}, []string{"y"}, ais("pads", 1, 0, 0, 2))
		}},
		{"Cast/float", 0, func(m *opModel) { m.node("Cast", []string{m.rand("x", 2, 3)}, []string{"y"}, ai("to", 1)) }},
	}
}

func indexCases() []opCase {
	return []opCase{
		{"Gather/axis0_repeats", 0, func(m *opModel) {
			m.node("Gather", []string{m.rand("x", 5, 3), m.ints("i", []int64{2, 3}, 0, 4, 0, -1, 2, 2)}, []string{"y"})
		}},
		{"Gather/axis1", 0, func(m *opModel) {
			m.node("Gather", []string{m.rand("x", 2, 5, 3), m.ints("i", []int64{4}, 1, 3, 3, 0)}, []string{"y"}, ai("axis", 1))
		}},
		{"Gather/scalar_index", 0, func(m *opModel) {
			m.node("Gather", []string{m.rand("x", 2, 5), m.ints("i", nil, 3)}, []string{"y"}, ai("axis", 1))
		}},
		{"GatherElements", 0, func(m *opModel) {
			m.node("GatherElements", []string{m.rand("x", 3, 4), m.ints("i", []int64{3, 2}, 0, 0, 3, 1, 2, 2)}, []string{"y"}, ai("axis", 1))
		}},
		{"TopK/largest", 0, func(m *opModel) {
			m.node("TopK", []string{m.rand("x", 3, 6), m.ints("k", []int64{1}, 3)}, []string{"y", "idx"})
		}},
		{"TopK/smallest_axis0", 0, func(m *opModel) {
			m.node("TopK", []string{m.rand("x", 5, 3), m.ints("k", []int64{1}, 2)}, []string{"y", "idx"}, ai("axis", 0), ai("largest", 0))
		}},
		{"TopK/opset9_attr", 9, func(m *opModel) {
			m.node("TopK", []string{m.rand("x", 3, 6)}, []string{"y", "idx"}, ai("k", 2))
		}},
		{"CumSum", 0, func(m *opModel) {
			m.node("CumSum", []string{m.rand("x", 3, 5), m.ints("ax", nil, 1)}, []string{"y"})
		}},
		{"CumSum/reverse_exclusive", 0, func(m *opModel) {
			m.node("CumSum", []string{m.rand("x", 4, 3), m.ints("ax", nil, 0)}, []string{"y"}, ai("reverse", 1), ai("exclusive", 1))
		}},
	}
}

func linearCases() []opCase {
	gemm := func(ta, tb int64, as, bs, cs []int64) func(m *opModel) {
		return func(m *opModel) {
			ins := []string{m.rand("a", as...), m.rand("b", bs...)}
			if cs != nil {
				ins = append(ins, m.rand("c", cs...))
			}
			m.node("Gemm", ins, []string{"y"}, ai("transA", ta), ai("transB", tb), af("alpha", 0.7), af("beta", 1.3))
		}
	}
	mm := func(as, bs []int64) func(m *opModel) {
		return func(m *opModel) { m.node("MatMul", []string{m.rand("a", as...), m.rand("b", bs...)}, []string{"y"}) }
	}
	return []opCase{
		{"Gemm/nn", 0, gemm(0, 0, []int64{3, 4}, []int64{4, 5}, []int64{5})},
		{"Gemm/nt", 0, gemm(0, 1, []int64{3, 4}, []int64{5, 4}, []int64{3, 5})},
		{"Gemm/tn", 0, gemm(1, 0, []int64{4, 3}, []int64{4, 5}, []int64{3, 1})},
		{"Gemm/tt_noC", 0, gemm(1, 1, []int64{4, 3}, []int64{5, 4}, nil)},
		{"MatMul/2d", 0, mm([]int64{3, 4}, []int64{4, 5})},
		{"MatMul/batched_weight", 0, mm([]int64{2, 3, 4}, []int64{4, 5})},
		{"MatMul/bcast_batch", 0, mm([]int64{2, 1, 3, 4}, []int64{3, 4, 2})},
		{"MatMul/vec_left", 0, mm([]int64{4}, []int64{2, 4, 3})},
		{"MatMul/vec_right", 0, mm([]int64{2, 3, 4}, []int64{4})},
		{"MatMul/heads_weight", 0, mm([]int64{2, 2, 3, 4}, []int64{4, 5})},
		{"MatMul/left_2d_batched_right", 0, mm([]int64{3, 4}, []int64{2, 4, 5})},
		{"MatMul/attention_scores", 0, mm([]int64{2, 2, 3, 4}, []int64{2, 2, 4, 3})},
		{"MatMul/bcast_heads", 0, mm([]int64{2, 1, 3, 4}, []int64{1, 2, 4, 3})},
		{"Einsum/attention_scores", 0, einsum("bhid,bhjd->bhij", []int64{2, 2, 3, 4}, []int64{2, 2, 5, 4})},
		{"Einsum/attention_values", 0, einsum("bhij,bhjd->bhid", []int64{2, 2, 3, 5}, []int64{2, 2, 5, 4})},
		{"Einsum/bid_bjd", 0, einsum("bid,bjd->bij", []int64{2, 3, 4}, []int64{2, 5, 4})},
		{"Einsum/bnqd_bnkd", 0, einsum("bnqd,bnkd->bnqk", []int64{2, 2, 3, 4}, []int64{2, 2, 5, 4})},
		{"Einsum/summed_only_in_one", 0, einsum("ij,jk->i", []int64{3, 4}, []int64{4, 5})},
		{"Einsum/implicit", 0, einsum("ij,jk", []int64{3, 4}, []int64{4, 5})},
		{"Einsum/one_operand", 0, func(m *opModel) {
			m.node("Einsum", []string{m.rand("a", 2, 3, 4)}, []string{"y"}, as("equation", "bij -> jb"))
		}},
		{"Einsum/three_operands", 0, func(m *opModel) {
			m.node("Einsum", []string{m.rand("a", 2, 3), m.rand("b", 3, 4), m.rand("c", 4, 2)}, []string{"y"}, as("equation", "ij,jk,kl->il"))
		}},
		{"BatchNormalization", 0, func(m *opModel) {
			x := m.rand("x", 2, 3, 4, 4)
			m.node("BatchNormalization", []string{x, m.rand("s", 3), m.rand("b", 3), m.rand("mu", 3), m.floats("var", []int64{3}, 0.5, 1.5, 0.8)}, []string{"y"}, af("epsilon", 1e-3))
		}},
		{"BatchNormalization/opset7_spatial", 7, func(m *opModel) {
			x := m.rand("x", 2, 3, 4, 4)
			m.node("BatchNormalization", []string{x, m.rand("s", 3), m.rand("b", 3), m.rand("mu", 3), m.floats("var", []int64{3}, 0.5, 1.5, 0.8)}, []string{"y"}, af("epsilon", 1e-3), ai("spatial", 1))
		}},
		{"ReduceSum/axes_input", 0, func(m *opModel) {
			m.node("ReduceSum", []string{m.rand("x", 2, 3, 4), m.ints("ax", []int64{2}, 0, -1)}, []string{"y"}, ai("keepdims", 0))
		}},
		{"ReduceSum/opset11_attr", 11, func(m *opModel) {
			m.node("ReduceSum", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ais("axes", 1))
		}},
		{"ReduceSum/all", 0, func(m *opModel) { m.node("ReduceSum", []string{m.rand("x", 2, 3)}, []string{"y"}) }},
		{"ReduceMean/keepdims", 0, func(m *opModel) {
			m.node("ReduceMean", []string{m.rand("x", 2, 3, 4, 5)}, []string{"y"}, ais("axes", 2, 3))
		}},
		{"ReduceMean/opset18_input", 18, func(m *opModel) {
			m.node("ReduceMean", []string{m.rand("x", 2, 3, 4), m.ints("ax", []int64{1}, 1)}, []string{"y"}, ai("keepdims", 0))
		}},
		{"ReduceMean/opset18_two_axes", 18, func(m *opModel) {
			m.node("ReduceMean", []string{m.rand("x", 2, 3, 4, 5), m.ints("ax", []int64{2}, -1, 1)}, []string{"y"})
		}},
		{"ReduceMax/axis", 0, func(m *opModel) {
			m.node("ReduceMax", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ais("axes", -1), ai("keepdims", 0))
		}},
		{"ReduceMax/opset18_input", 18, func(m *opModel) {
			m.node("ReduceMax", []string{m.rand("x", 2, 3, 4), m.ints("ax", []int64{2}, 0, 2)}, []string{"y"})
		}},
		{"ReduceMax/all", 0, func(m *opModel) { m.node("ReduceMax", []string{m.rand("x", 3, 4)}, []string{"y"}) }},
		{"ReduceL2/axis", 0, func(m *opModel) {
			m.node("ReduceL2", []string{m.rand("x", 2, 3, 4)}, []string{"y"}, ais("axes", 1), ai("keepdims", 0))
		}},
		{"ReduceL2/opset18_input", 18, func(m *opModel) {
			m.node("ReduceL2", []string{m.rand("x", 2, 3, 4), m.ints("ax", []int64{1}, -1)}, []string{"y"})
		}},
	}
}

// einsum is a two-operand Einsum case.
func einsum(eq string, aShape, bShape []int64) func(m *opModel) {
	return func(m *opModel) {
		m.node("Einsum", []string{m.rand("a", aShape...), m.rand("b", bShape...)}, []string{"y"}, as("equation", eq))
	}
}

func normCases() []opCase {
	layerNorm := func(xs []int64, axis int64, bias bool) func(m *opModel) {
		return func(m *opModel) {
			ns := xs[(axis+int64(len(xs)))%int64(len(xs)):]
			ins := []string{m.rand("x", xs...), m.rand("s", ns...)}
			if bias {
				ins = append(ins, m.rand("b", ns...))
			}
			m.node("LayerNormalization", ins, []string{"y"}, ai("axis", axis), af("epsilon", 1e-3))
		}
	}
	return []opCase{
		{"LayerNormalization/last_bias", 17, layerNorm([]int64{2, 5, 8}, -1, true)},
		{"LayerNormalization/axis1_no_bias", 17, layerNorm([]int64{2, 3, 4}, 1, false)},
		{"LayerNormalization/axis-2_bias", 17, layerNorm([]int64{2, 3, 4, 5}, -2, true)},
		{"LayerNormalization/axis0", 17, layerNorm([]int64{3, 4}, 0, true)},
		{"LayerNormalization/scale_broadcast", 17, func(m *opModel) {
			m.node("LayerNormalization", []string{m.rand("x", 2, 3, 4), m.rand("s", 1, 4), m.rand("b", 4)}, []string{"y"}, ai("axis", 1))
		}},
		{"LayerNormalization/statistics_requested", 17, func(m *opModel) {
			m.node("LayerNormalization", []string{m.rand("x", 2, 3, 4), m.rand("s", 4), m.rand("b", 4)}, []string{"y", "mean", "invstd"})
		}},
		{"LayerNormalization/opset13_decomposed", 13, func(m *opModel) {
			// torch.onnx's LayerNorm below opset 17, with GELU as Erf after it.
			x := m.rand("x", 2, 5, 8)
			m.node("ReduceMean", []string{x}, []string{"mu"}, ais("axes", -1))
			m.node("Sub", []string{x, "mu"}, []string{"xc"})
			m.node("Pow", []string{"xc", m.floats("two", nil, 2)}, []string{"sq"})
			m.node("ReduceMean", []string{"sq"}, []string{"var"}, ais("axes", -1))
			m.node("Add", []string{"var", m.floats("eps", nil, 1e-5)}, []string{"ve"})
			m.node("Sqrt", []string{"ve"}, []string{"sd"})
			m.node("Div", []string{"xc", "sd"}, []string{"xn"})
			m.node("Mul", []string{"xn", m.rand("s", 8)}, []string{"xs"})
			m.node("Add", []string{"xs", m.rand("b", 8)}, []string{"y"})
		}},
		{"InstanceNormalization", 0, func(m *opModel) {
			m.step = 3e-3 // no double kernel on ONNX Runtime's CPU: float32
			m.node("InstanceNormalization", []string{m.rand("x", 2, 3, 4, 5), m.rand("s", 3), m.rand("b", 3)}, []string{"y"}, af("epsilon", 1e-3))
		}},
		{"GroupNormalization/opset18_per_group", 18, func(m *opModel) {
			m.node("GroupNormalization", []string{m.rand("x", 2, 6, 3, 3), m.rand("s", 3), m.rand("b", 3)}, []string{"y"}, ai("num_groups", 3), af("epsilon", 1e-3))
		}},
		{"GroupNormalization/opset21_per_channel", 21, func(m *opModel) {
			m.step = 1e-3 // its statistics are computed in float (stash_type) even in float64
			m.node("GroupNormalization", []string{m.rand("x", 2, 6, 3, 3), m.rand("s", 6), m.rand("b", 6)}, []string{"y"}, ai("num_groups", 2), af("epsilon", 1e-3))
		}},
	}
}
