package grad_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// lossGradient is ∂loss/∂z in float64 for logits z of shape s (class axis
// axis) and targets tg, written from the loss definitions in config.go.
func lossGradient(t *testing.T, l grad.Loss, axis int, s []int64, z []float32, tg []int64) []float32 {
	t.Helper()
	outer, C, inner := 1, int(s[axis]), 1
	for _, d := range s[:axis] {
		outer *= int(d)
	}
	for _, d := range s[axis+1:] {
		inner *= int(d)
	}
	ign := int64(grad.DefaultIgnoreIndex)
	if l.IgnoreIndex != nil {
		ign = *l.IgnoreIndex
	}
	valid := func(k int64) bool { return l.NoIgnore || k != ign }
	at := func(o, c, i int) int { return (o*C+c)*inner + i }
	var den float64
	for _, k := range tg {
		if valid(k) {
			den++
		}
	}
	if l.Kind == grad.LossSigmoidBCE {
		den *= float64(C)
	}
	if l.ClassWeights != nil {
		t.Fatal("lossGradient: class weights are not implemented")
	}
	r := make([]float32, len(z))
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			k := tg[o*inner+i]
			if !valid(k) {
				continue
			}
			if l.Kind == grad.LossSigmoidBCE {
				for c := 0; c < C; c++ {
					y := 0.0
					if k == int64(c+1) {
						y = 1
					}
					r[at(o, c, i)] = float32((1/(1+math.Exp(-float64(z[at(o, c, i)]))) - y) / den)
				}
				continue
			}
			mx := math.Inf(-1)
			for c := 0; c < C; c++ {
				mx = math.Max(mx, float64(z[at(o, c, i)]))
			}
			var sum float64
			for c := 0; c < C; c++ {
				sum += math.Exp(float64(z[at(o, c, i)]) - mx)
			}
			for c := 0; c < C; c++ {
				p := math.Exp(float64(z[at(o, c, i)])-mx) / sum
				if k == int64(c) {
					p--
				}
				r[at(o, c, i)] = float32(p / den)
			}
		}
	}
	return r
}

// pruneTo makes out m's only output and drops the nodes it does not need
// (so that affineIn judges the objective, not a final Softmax after it).
func pruneTo(m *onnx.Model, out string) *onnx.Model {
	g := m.Proto.Graph
	need := map[string]bool{out: true}
	var keep []*onnx.NodeProto
	for i := len(g.Node) - 1; i >= 0; i-- {
		n := g.Node[i]
		used := false
		for _, o := range n.Output {
			used = used || need[o]
		}
		if used {
			keep = append([]*onnx.NodeProto{n}, keep...)
			for _, x := range n.Input {
				need[x] = true
			}
		}
	}
	g.Node = keep
	g.Output = []*onnx.ValueInfoProto{{Name: proto.String(out)}}
	return m
}

// segHead builds a small segmenter: input → [Transpose NHWC→NCHW] → Conv →
// Relu → Conv (stride 2) → Relu → Resize ×2 (linear) → Conv 1×1 → logits →
// [Transpose NCHW→NHWC] → [final activation], C classes.
func segHead(nhwc bool, final string, C int64) (*onnx.Model, []int64, []roleParam) {
	m := newOpModel(13)
	x := "input"
	shape := []int64{2, 3, 8, 8}
	if nhwc {
		shape = []int64{2, 8, 8, 3}
		m.node("Transpose", []string{x}, []string{"nchw"}, ais("perm", 0, 3, 1, 2))
		x = "nchw"
	}
	m.node("Conv", []string{x, m.rand("c1.w", 4, 3, 3, 3), m.rand("c1.b", 4)}, []string{"c1"}, ais("pads", 1, 1, 1, 1))
	m.node("Relu", []string{"c1"}, []string{"r1"})
	m.node("Conv", []string{"r1", m.rand("c2.w", 4, 4, 3, 3), m.rand("c2.b", 4)}, []string{"c2"}, ais("pads", 1, 1, 1, 1), ais("strides", 2, 2))
	m.node("Relu", []string{"c2"}, []string{"r2"})
	m.node("Resize", []string{"r2", "", m.floats("scales", []int64{4}, 1, 1, 2, 2)}, []string{"up"}, as("mode", "linear"))
	m.node("Conv", []string{"up", m.rand("cls.w", C, 4, 1, 1), m.rand("cls.b", C)}, []string{"logits"})
	out := "logits"
	if nhwc {
		m.node("Transpose", []string{out}, []string{"logits_nhwc"}, ais("perm", 0, 2, 3, 1))
		out = "logits_nhwc"
	}
	if final != "" {
		m.node(final, []string{out}, []string{"prob"})
		if final == "Softmax" {
			m.nodes[len(m.nodes)-1].Attribute = []*onnx.AttributeProto{ai("axis", 1)}
		}
		out = "prob"
	}
	m.outs = []string{out}
	var ps []roleParam
	for _, p := range m.params {
		ps = append(ps, roleParam{p, p})
	}
	return withInput(m.model(), "input", shape...), shape, ps
}

// segTargets draws classes in [0, C) with about 15% ignored.
func segTargets(n int, C int64, seed uint64) []int64 {
	rng := rand.New(rand.NewPCG(seed, 0x7a6))
	tg := make([]int64, n)
	for i := range tg {
		tg[i] = rng.Int64N(C)
		if rng.IntN(100) < 15 {
			tg[i] = grad.DefaultIgnoreIndex
		}
	}
	return tg
}

// TestWholeModelLossShapes: frozen-kink checks of whole models trained
// through the loss: an NHWC (tf2onnx-style) segmenter with ClassAxis −1,
// and heads ending in Softmax / Sigmoid with the loss on the activation's
// input.
func TestWholeModelLossShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nhwc  bool
		final string
		loss  grad.Loss
	}{
		{"nhwc_ce", true, "", grad.Loss{ClassAxis: -1}},
		{"nhwc_bce", true, "", grad.Loss{Kind: grad.LossSigmoidBCE, ClassAxis: -1}},
		{"softmax_ce", false, "Softmax", grad.Loss{Output: "logits"}},
		{"sigmoid_bce", false, "Sigmoid", grad.Loss{Kind: grad.LossSigmoidBCE, Output: "logits"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const C = 3
			m, shape, params := segHead(tc.nhwc, tc.final, C)
			classes := int64(C)
			if tc.loss.Kind == grad.LossSigmoidBCE {
				classes = C + 1 // 0 is background
			}
			tg := segTargets(int(shape[0]*8*8), classes, 9)
			if tc.loss.Output == "" && tc.nhwc {
				tc.loss.Output = "logits_nhwc"
			}
			for _, e := range frozenCheck(t, m, "input", shape, params, frozenSpec{loss: &tc.loss, target: tg}) {
				t.Error(e)
			}
		})
	}
}

// TestFrozenCheckCatchesScaledGradient: the frozen-kink check is tight
// enough to reject a convolution weight gradient scaled by 1.6 (the loose
// whole-model bound, 0.5, let it through) or with the wrong sign.
func TestFrozenCheckCatchesScaledGradient(t *testing.T) {
	m, shape, _ := segHead(false, "", 3)
	params := []roleParam{{"first conv", "c1.w"}, {"classifier", "cls.w"}}
	if fails := frozenCheck(t, m, "input", shape, params, frozenSpec{}); len(fails) > 0 {
		t.Fatalf("the true gradient fails: %v", fails)
	}
	for _, scale := range []float64{1.6, -1} {
		fails := frozenCheck(t, m, "input", shape, params, frozenSpec{gradScale: scale})
		// Two parameters × two directions: every comparison must fail.
		if len(fails) != 4 {
			t.Errorf("gradient × %g: %d of 4 comparisons failed, want all: %v", scale, len(fails), fails)
		}
	}
}
