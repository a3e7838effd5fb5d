package grad_test

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/ortprobe"
)

// convGradNodes returns the training graph's ConvGrad nodes.
func convGradNodes(m *onnx.Model) []*onnx.NodeProto {
	var out []*onnx.NodeProto
	for _, n := range m.Proto.Graph.Node {
		if n.GetDomain() == grad.ConvGradDomain && n.GetOpType() == grad.ConvGradOp {
			out = append(out, n)
		}
	}
	return out
}

func intsOf(n *onnx.NodeProto, name string) []int64 {
	if a := onnx.Attr(n, name); a != nil && a.GetType() == onnx.AttributeInt {
		return []int64{a.GetI()}
	}
	return onnx.AttrInts(n, name)
}

// TestConvGradEmission: Config.ConvGrad hands exactly the convolutions of
// its classes to ConvGrad nodes, with the forward's attributes, the
// outputs wanted (the first conv's input is no parameter: no dX), and the
// domain imported by the training graph only; a convolution cuDNN's
// symmetric padding cannot reproduce (SAME_UPPER with stride 2) keeps the
// standard forms.
func TestConvGradEmission(t *testing.T) {
	m := newOpModel(13)
	x := m.floats("x", []int64{2, 3, 9, 8}, make([]float32, 2*3*9*8)...)
	m.node("Conv", []string{x, m.rand("w1", 4, 3, 3, 3), m.rand("b1", 4)}, []string{"h1"}, ais("pads", 1, 1, 1, 1))
	m.node("Conv", []string{"h1", m.rand("w2", 4, 1, 3, 3)}, []string{"h2"}, ais("strides", 2, 2), ais("pads", 1, 1, 1, 1), ai("group", 4))
	m.node("Conv", []string{"h2", m.rand("w3", 6, 4, 1, 1)}, []string{"h3"})
	m.node("Conv", []string{"h3", m.rand("w4", 6, 3, 3, 3)}, []string{"h4"}, ai("group", 2), ais("dilations", 2, 2), ais("pads", 2, 2, 2, 2))
	m.node("Conv", []string{"h4", m.rand("w5", 2, 6, 3, 3)}, []string{"y"}, as("auto_pad", "SAME_UPPER"), ais("strides", 2, 2))
	m.outs = []string{"y"}
	build := func(classes grad.ConvClasses) *grad.Graphs {
		gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone},
			GradInputs: m.outs, DirectConvs: true, ConvGrad: classes})
		if err != nil {
			t.Fatal(err)
		}
		return gs
	}
	weights := func(ns []*onnx.NodeProto) []string {
		var ws []string
		for _, n := range ns {
			ws = append(ws, n.Input[2])
		}
		return ws
	}
	if n := convGradNodes(build(0).Training); len(n) != 0 {
		t.Fatalf("no classes chosen, %d ConvGrad nodes", len(n))
	}
	for _, c := range []struct {
		classes grad.ConvClasses
		want    []string
	}{
		{grad.ConvDense, []string{"w1"}},
		{grad.ConvDepthwise, []string{"w2"}},
		{grad.ConvPointwise, []string{"w3"}},
		{grad.ConvGrouped, []string{"w4"}},
		{grad.AllConvClasses, []string{"w1", "w2", "w3", "w4"}},
	} {
		gs := build(c.classes)
		ns := convGradNodes(gs.Training)
		got := weights(ns)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: ConvGrad for %v, want %v", c.classes, got, c.want)
		}
		imports := func(m *onnx.Model) bool {
			return slices.ContainsFunc(m.Proto.OpsetImport, func(o *onnx.OperatorSetIdProto) bool {
				return o.GetDomain() == grad.ConvGradDomain && o.GetVersion() == grad.ConvGradVersion
			})
		}
		if !imports(gs.Training) || imports(gs.Eval) {
			t.Errorf("%v: domain imported by training %v, eval %v; want true, false", c.classes, imports(gs.Training), imports(gs.Eval))
		}
	}
	byW := map[string]*onnx.NodeProto{}
	for _, n := range convGradNodes(build(grad.AllConvClasses).Training) {
		byW[n.Input[2]] = n
	}
	first := byW["w1"]
	if len(first.Output) != 3 || first.Output[0] != "" || first.Output[1] == "" || first.Output[2] == "" {
		t.Errorf("first conv: outputs %q, want no dX, dW and dB", first.Output)
	}
	if dw := byW["w2"]; len(dw.Output) != 2 || dw.Output[0] == "" || dw.Output[1] == "" {
		t.Errorf("depthwise conv without bias: outputs %q, want dX and dW", dw.Output)
	}
	for _, a := range []struct {
		w, attr string
		want    []int64
	}{
		{"w2", "strides", []int64{2, 2}}, {"w2", "group", []int64{4}}, {"w2", "pads", []int64{1, 1, 1, 0}},
		{"w4", "dilations", []int64{2, 2}}, {"w4", "group", []int64{2}}, {"w4", "kernel_shape", []int64{3, 3}},
		{"w4", "pads", []int64{2, 2, 2, 2}}, {"w3", "pads", []int64{0, 0, 0, 0}},
	} {
		if got := intsOf(byW[a.w], a.attr); !slices.Equal(got, a.want) {
			t.Errorf("%s: %s %v, want %v", a.w, a.attr, got, a.want)
		}
	}
	if byW["w5"] != nil {
		t.Error("SAME_UPPER with stride 2 (pads 0 and 1) went to ConvGrad, whose cuDNN padding is symmetric")
	}
}
