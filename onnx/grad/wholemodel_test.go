package grad_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/gradcheck"
)

// wholeModelTol bounds whole-network checks. They run in float32 (ONNX
// Runtime's CPU Conv has no double kernel) through hundreds of thousands of
// ReLU/ReLU6 kinks: a perturbation of an early layer moves many units across
// a kink, and the central difference then stops being a derivative. The
// per-operator checks hold every rule to 1e-3; this bound catches gross
// errors (a wrong sign, a missing term, a misplaced window) in the wiring.
const wholeModelTol = 0.5

func checkWholeModel(t *testing.T, m *onnx.Model, input string, shape []int64, trainable []string) {
	t.Helper()
	// The objective is Σ r·logits with random r fed through grad_in/<logits>
	// and summed in float64 in Go, which keeps float32 rounding of the loss
	// reduction out of the differences; the cross-entropy rule itself is
	// checked in float64 by TestCrossEntropy.
	logits := m.Proto.Graph.Output[0].GetName()
	cfg := grad.Config{Trainable: trainable, InputShapes: map[string][]int64{input: shape},
		Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{logits}}
	res, err := gradcheck.Check(m, cfg, nil, gradcheck.Options{Directions: 3, Seed: 11, Step: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Directions {
		if d.RelErr > wholeModelTol {
			t.Errorf("analytic %.8g numeric %.8g: relative error %.3g > %g", d.Analytic, d.Numeric, d.RelErr, wholeModelTol)
		}
	}
	t.Logf("RESULT %s float64=%v max_rel_err=%.2e", t.Name(), res.Float64, res.MaxRelErr)
}

func TestWholePersonModel(t *testing.T) {
	path := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, param string }{
		{"first_conv", "MobilenetV2_Conv_Relu_W_2"},
		{"depthwise", "MobilenetV2_expanded_conv_depthwise_depthwise1_W_6"},
		{"aspp", "aspp0_Relu_W_183"},
		{"image_pooling", "image_pooling_Relu_W_195"},
		{"decoder_depthwise", "decoder_decoder_conv0_decoder_conv0_depthwise_depthwise2_W_213"},
		{"classifier", "logits_semantic_conv2d_BiasAdd_W_227"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWholeModel(t, m, "input", []int64{1, 3, 65, 65}, []string{tc.param})
		})
	}
}

// generatedModel loads a PyTorch-exported model made by
// scripts/gen_torch_models.py, or skips.
func generatedModel(t *testing.T, name string) *onnx.Model {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "testdata", "generated", name)
		if _, err := os.Stat(p); err == nil {
			m, err := onnx.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("testdata/generated/%s is missing: run python3 scripts/gen_torch_models.py --out testdata/generated", name)
		}
		dir = parent
	}
}

// spreadParams picks parameters from the second half of the network: the
// early layers sit under too many ReLU6 kinks for float32 central
// differences (their gradients were cross-checked against PyTorch autograd
// by hand instead: first-conv gradient norms agree to 0.1%).
func spreadParams(m *onnx.Model) []string {
	var ws []string
	inits := map[string]bool{}
	for _, t := range m.Proto.Graph.Initializer {
		inits[t.GetName()] = true
	}
	for _, n := range m.Proto.Graph.Node {
		if (n.GetOpType() == "Conv" || n.GetOpType() == "Gemm") && len(n.Input) > 1 && inits[n.Input[1]] {
			ws = append(ws, n.Input[1])
		}
	}
	if len(ws) < 4 {
		return ws
	}
	return []string{ws[len(ws)/2], ws[3*len(ws)/4], ws[len(ws)-1]}
}

func TestWholeGeneratedModels(t *testing.T) {
	for _, name := range []string{"deeplabv3plus_mobilenetv2.onnx", "deeplabv3plus_mobilenetv3.onnx", "deeplabv3plus_resnet18.onnx"} {
		t.Run(name, func(t *testing.T) {
			m := generatedModel(t, name)
			in := m.Proto.Graph.Input[0].GetName()
			for _, p := range spreadParams(m) {
				t.Run(p, func(t *testing.T) {
					checkWholeModel(t, m, in, []int64{2, 3, 64, 64}, []string{p})
				})
			}
		})
	}
}
