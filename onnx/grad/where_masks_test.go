package grad_test

import (
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// convRelu6 is Conv → Clip(0, 6) (MobileNetV2's ReLU6) with trainable
// input, weight and bias.
func convRelu6() (*onnx.Model, []string) {
	m := newOpModel(13)
	x := m.rand("x", 1, 2, 5, 5)
	w := m.rand("w", 3, 2, 3, 3)
	b := m.rand("b", 3)
	m.node("Conv", []string{x, w, b}, []string{"c"}, ais("pads", 1, 1, 1, 1))
	m.node("Clip", []string{"c", m.floats("lo", nil, 0), m.floats("hi", nil, 6)}, []string{"y"})
	m.outs = []string{"y"}
	return m.model(), m.params
}

// maskForms counts, among the backward nodes, the Where nodes and the Mul
// nodes that read a Cast's output (the Cast+Mul mask form).
func maskForms(gs *grad.Graphs) (wheres, castMuls int) {
	castOut := map[string]bool{}
	for _, n := range gs.Training.Proto.Graph.Node {
		if n.GetOpType() == "Cast" {
			castOut[n.Output[0]] = true
		}
	}
	for _, n := range gs.Training.Proto.Graph.Node {
		if !strings.HasPrefix(n.GetName(), "bwd/") {
			continue
		}
		switch n.GetOpType() {
		case "Where":
			wheres++
		case "Mul":
			for _, x := range n.Input {
				if castOut[x] {
					castMuls++
				}
			}
		}
	}
	return wheres, castMuls
}

// TestWhereMasks: with Config.WhereMasks the ReLU6 backward of a
// Conv → Clip model is one Where (no Cast feeding a Mul), without it the
// Cast+Mul pair, and both forms' gradients match finite differences, in
// float32 and in a float16 autocast graph (the Clip stays float32 there,
// behind the Conv's Cast back).
func TestWhereMasks(t *testing.T) {
	runtimetest.Require(t)
	for _, half := range []bool{false, true} {
		for _, where := range []bool{false, true} {
			name := map[bool]string{false: "float32", true: "float16"}[half] + map[bool]string{false: "/castmul", true: "/where"}[where]
			t.Run(name, func(t *testing.T) {
				m, params := convRelu6()
				if half {
					if _, err := autocast.Apply(m, autocast.Float16); err != nil {
						t.Fatal(err)
					}
				}
				cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: params, Loss: grad.Loss{Kind: grad.LossNone},
					GradInputs: []string{"y"}, ExtraOutputs: []string{"y"}, WhereMasks: where}
				gs, err := grad.Build(m, cfg)
				if err != nil {
					t.Fatal(err)
				}
				wheres, castMuls := maskForms(gs)
				if where && (wheres != 1 || castMuls != 0) {
					t.Errorf("WhereMasks: %d Where and %d Cast→Mul backward nodes, want 1 and 0", wheres, castMuls)
				}
				if !where && (wheres != 0 || castMuls != 1) {
					t.Errorf("Cast+Mul form: %d Where and %d Cast→Mul backward nodes, want 0 and 1", wheres, castMuls)
				}
				// Frozen kinks make the objective affine in each parameter, so
				// the large step keeps float16 rounding small against it.
				res, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Directions: 3, Seed: 3, Float32: true, FreezeKinks: true, Step: 0.5})
				if err != nil {
					t.Fatal(err)
				}
				bound := map[bool]float64{false: 1e-3, true: 1e-2}[half]
				if res.MaxRelErr > bound {
					t.Errorf("max relative error %.3g > %g: %+v", res.MaxRelErr, bound, res.Directions)
				}
				t.Logf("RESULT %s max_rel_err=%.2e", t.Name(), res.MaxRelErr)
			})
		}
	}
}
