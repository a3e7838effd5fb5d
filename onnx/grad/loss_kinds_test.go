package grad_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// lossCase is one loss configuration checked by finite differences.
type lossCase struct {
	name   string
	logits []int64 // the logits' shape
	target []int64 // shape: logits without the class axis
	loss   grad.Loss
}

func checkLoss(t *testing.T, tc lossCase) {
	t.Helper()
	m := newOpModel(13)
	m.node("Mul", []string{m.rand("z", tc.logits...), m.floats("k", []int64{1}, 2)}, []string{"logits"})
	m.outs = []string{"logits"}
	axis := tc.loss.ClassAxis
	if axis == 0 {
		axis = 1
	}
	if axis < 0 {
		axis += len(tc.logits)
	}
	var tshape []int64
	for i, d := range tc.logits {
		if i != axis {
			tshape = append(tshape, d)
		}
	}
	feeds := map[string]*runtime.Tensor{grad.TargetName: runtime.NewInt64(tshape, tc.target)}
	scale := 1.0
	if tc.loss.Scale {
		scale = 1.7
		feeds[grad.LossScaleName] = runtime.NewFloat64([]int64{1}, []float64{scale})
	}
	res, err := gradcheck.Check(m.model(), grad.Config{Trainable: []string{"z"}, Loss: tc.loss}, feeds, gradcheck.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Directions {
		// With a loss scale s the analytic gradient is s·∇loss.
		if math.Abs(d.Analytic-scale*d.Numeric) > tol*math.Abs(d.Analytic) {
			t.Errorf("analytic %g, want %g × numeric %g", d.Analytic, scale, d.Numeric)
		}
	}
	t.Logf("RESULT %s float64=%v max_rel_err=%.2e", t.Name(), res.Float64, res.MaxRelErr)
}

func TestLossClassAxis(t *testing.T) {
	for _, tc := range []lossCase{
		{"ce_nhwc", []int64{2, 2, 2, 3}, []int64{0, 1, 255, 2, 2, 2, 0, 255}, grad.Loss{ClassAxis: -1}},
		{"ce_nhwc_rank", []int64{2, 2, 2, 3}, []int64{0, 1, 255, 2, 2, 2, 0, 1}, grad.Loss{ClassAxis: 3, ClassWeights: []float64{0.5, 2, 1.5}}},
		{"ce_axis2", []int64{2, 2, 3, 2}, []int64{0, 1, 1, 0, 2, 2, 0, 1}, grad.Loss{ClassAxis: 2, NoIgnore: true}},
		{"ce_classifier_last", []int64{4, 5}, []int64{0, 4, 2, 2}, grad.Loss{ClassAxis: -1}},
		{"bce_nchw", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 3, 3, 0, 255}, grad.Loss{Kind: grad.LossSigmoidBCE}},
		{"bce_nhwc_weights", []int64{2, 2, 2, 3}, []int64{0, 1, 255, 2, 3, 3, 0, 1}, grad.Loss{Kind: grad.LossSigmoidBCE, ClassAxis: -1, ClassWeights: []float64{0.5, 2, 1.5}}},
		{"bce_noignore_scale", []int64{1, 2, 3, 2}, []int64{0, 1, 2, 0, 1, 2}, grad.Loss{Kind: grad.LossSigmoidBCE, NoIgnore: true, Scale: true}},
		{"bce_all_ignored", []int64{1, 2, 2}, []int64{255, 255}, grad.Loss{Kind: grad.LossSigmoidBCE}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLoss(t, tc) })
	}
}

// evalLoss runs the evaluation graph of a one-node model (logits = z) and
// returns the loss.
func evalLoss(t *testing.T, shape []int64, z []float32, tshape, target []int64, loss grad.Loss) float64 {
	t.Helper()
	m := newOpModel(13)
	m.node("Identity", []string{m.floats("z", shape, z...)}, []string{"logits"})
	m.outs = []string{"logits"}
	gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, Loss: loss})
	if err != nil {
		t.Fatal(err)
	}
	out := runModel(t, gs.Eval, map[string]*runtime.Tensor{"z": runtime.NewFloat32(shape, z), grad.TargetName: runtime.NewInt64(tshape, target)})
	return float64(out[grad.LossName].Float32[0])
}

// TestSigmoidBCEValue compares the loss with PyTorch's
// BCEWithLogitsLoss(weight=w.view(1,C,1), reduction="none"), written out
// here, averaged over the non-ignored elements and the channels.
func TestSigmoidBCEValue(t *testing.T) {
	// [N=2, C=3, P=2], logits large enough to test the stable form.
	z := []float32{0.1, -0.3, 0.5, 1.2, -2, 0.7, 30, -40, 0, 1, 2, -3}
	target := []int64{2, 255, 0, 3}
	w := []float64{1, 2, 0.5}
	for _, weighted := range []bool{false, true} {
		loss := grad.Loss{Kind: grad.LossSigmoidBCE}
		if weighted {
			loss.ClassWeights = w
		}
		var num float64
		var count int
		for n := 0; n < 2; n++ {
			for p := 0; p < 2; p++ {
				tg := target[n*2+p]
				if tg == 255 {
					continue
				}
				count++
				for c := 0; c < 3; c++ {
					x := float64(z[n*6+c*2+p])
					y := 0.0
					if tg == int64(c+1) {
						y = 1
					}
					// PyTorch's binary_cross_entropy_with_logits:
					// (1−y)·x + m + log(exp(−m) + exp(−x−m)), m = max(−x, 0).
					mv := math.Max(-x, 0)
					l := (1-y)*x + mv + math.Log(math.Exp(-mv)+math.Exp(-x-mv))
					if weighted {
						l *= w[c]
					}
					num += l
				}
			}
		}
		want := num / float64(count*3)
		// The same numbers from PyTorch 1.13 (float64, on the decimal values,
		// hence the float32-rounding tolerance):
		// (F.binary_cross_entropy_with_logits(z, y, weight=w.view(1,3,1),
		// reduction="none") * valid).sum() / (valid.sum() * 3).
		torch := map[bool]float64{false: 4.280813987332404, true: 4.261843339046673}[weighted]
		if math.Abs(want-torch) > 1e-7 {
			t.Fatalf("weighted=%v: the Go reference %.15g differs from PyTorch's %.15g", weighted, want, torch)
		}
		got := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, loss)
		if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Errorf("weighted=%v: loss %.8g, want %.8g", weighted, got, want)
		}
	}
	// No valid element: 0, not NaN.
	if got := evalLoss(t, []int64{1, 3, 2}, z[:6], []int64{1, 2}, []int64{255, 255}, grad.Loss{Kind: grad.LossSigmoidBCE}); got != 0 {
		t.Errorf("all ignored: loss %g, want 0", got)
	}
}

// TestCrossEntropyNHWCValue: an NHWC head with ClassAxis −1 has the loss
// of the same logits laid out NCHW.
func TestCrossEntropyNHWCValue(t *testing.T) {
	// NCHW [1, 3, 2, 2] and its NHWC transpose [1, 2, 2, 3].
	nchw := []float32{0.1, -0.3, 0.5, 1.2, -2, 0.7, 0.3, 0.3, 0, 1, 2, 3}
	nhwc := make([]float32, 12)
	for c := 0; c < 3; c++ {
		for p := 0; p < 4; p++ {
			nhwc[p*3+c] = nchw[c*4+p]
		}
	}
	target := []int64{2, 255, 0, 1}
	for _, kind := range []grad.LossKind{grad.LossCrossEntropy, grad.LossSigmoidBCE} {
		a := evalLoss(t, []int64{1, 3, 2, 2}, nchw, []int64{1, 2, 2}, target, grad.Loss{Kind: kind})
		b := evalLoss(t, []int64{1, 2, 2, 3}, nhwc, []int64{1, 2, 2}, target, grad.Loss{Kind: kind, ClassAxis: -1})
		if math.Abs(a-b) > 1e-6 || a == 0 {
			t.Errorf("loss kind %d: NHWC %g, NCHW %g", kind, b, a)
		}
	}
}

// TestLossOnIntermediate puts the loss on the input of a final Softmax /
// Sigmoid: the model's output stays an output, and only the loss sends
// gradient (the checker's objective is the loss alone, so any gradient
// through the final activation would show as a mismatch).
func TestLossOnIntermediate(t *testing.T) {
	for _, tc := range []struct {
		act  string
		kind grad.LossKind
	}{{"Softmax", grad.LossCrossEntropy}, {"Sigmoid", grad.LossSigmoidBCE}} {
		t.Run(tc.act, func(t *testing.T) {
			m := newOpModel(13)
			m.node("Mul", []string{m.rand("z", 2, 3, 2, 2), m.floats("k", []int64{1}, 2)}, []string{"logits"})
			m.node(tc.act, []string{"logits"}, []string{"prob"}, ai("axis", 1))
			if tc.act == "Sigmoid" {
				m.nodes[1].Attribute = nil
			}
			m.outs = []string{"prob"}
			target := runtime.NewInt64([]int64{2, 2, 2}, []int64{0, 1, 255, 2, 2, 2, 0, 1})
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, Loss: grad.Loss{Kind: tc.kind, Output: "logits"}}
			res, err := gradcheck.Check(m.model(), cfg, map[string]*runtime.Tensor{grad.TargetName: target}, gradcheck.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxRelErr > tol {
				t.Errorf("max relative error %.3g > %g", res.MaxRelErr, tol)
			}
			var outs []string
			for _, o := range res.Graphs.Manifest.Training.Outputs {
				outs = append(outs, o.Name)
			}
			if len(outs) < 2 || outs[0] != grad.LossName || outs[1] != "prob" {
				t.Errorf("training outputs %v, want loss, prob, ...", outs)
			}
			for _, n := range res.Graphs.Training.Proto.Graph.Node {
				for _, x := range n.Input {
					if x == "prob" {
						t.Errorf("node %s (%s) reads the final %s output: gradient flows through it", n.GetName(), n.GetOpType(), tc.act)
					}
				}
			}
		})
	}
}

// TestFocalAndDiceGradients checks the focal and Dice terms, alone and with
// the pixel loss, by finite differences: ignored elements, class weights,
// NHWC heads and a loss scale included.
func TestFocalAndDiceGradients(t *testing.T) {
	target := []int64{0, 1, 255, 2, 2, 2, 0, 255}
	for _, tc := range []lossCase{
		{"focal_ce", []int64{2, 3, 2, 2}, target, grad.Loss{Focal: 2}},
		{"focal_ce_half_gamma_weights", []int64{2, 3, 2, 2}, target, grad.Loss{Focal: 0.5, ClassWeights: []float64{0.5, 2, 1.5}}},
		{"focal_bce", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 3, 3, 0, 255}, grad.Loss{Kind: grad.LossSigmoidBCE, Focal: 2}},
		{"dice_only", []int64{2, 3, 2, 2}, target, grad.Loss{NoPixel: true, Dice: 1}},
		{"ce_dice_nhwc_scale", []int64{2, 2, 2, 3}, target, grad.Loss{Dice: 1, ClassAxis: -1, Scale: true}},
		{"ce_dice_weights", []int64{2, 3, 2, 2}, target, grad.Loss{Dice: 0.5, ClassWeights: []float64{0.5, 2, 1.5}}},
		{"bce_dice", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 3, 3, 0, 255}, grad.Loss{Kind: grad.LossSigmoidBCE, Dice: 1}},
		{"dice_noignore", []int64{1, 2, 3, 2}, []int64{0, 1, 1, 0, 1, 1}, grad.Loss{NoPixel: true, Dice: 1, NoIgnore: true}},
		{"focal_dice", []int64{2, 3, 2, 2}, target, grad.Loss{Focal: 2, Dice: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLoss(t, tc) })
	}
}

// TestFocalAndDiceValues compares the losses with their definitions
// written out here (and focal with γ = 0 with cross entropy).
func TestFocalAndDiceValues(t *testing.T) {
	// [N=2, C=3, P=2]
	z := []float32{0.1, -0.3, 0.5, 1.2, -2, 0.7, 3, -4, 0, 1, 2, -3}
	target := []int64{2, 255, 0, 1}
	w := []float64{1, 2, 0.5}
	softmax := func(n, p int) []float64 {
		var e [3]float64
		var s float64
		for c := range 3 {
			e[c] = math.Exp(float64(z[n*6+c*2+p]))
			s += e[c]
		}
		for c := range 3 {
			e[c] /= s
		}
		return e[:]
	}
	for _, weighted := range []bool{false, true} {
		cw := []float64{1, 1, 1}
		loss := grad.Loss{Focal: 2}
		if weighted {
			cw, loss.ClassWeights = w, w
		}
		// Focal: Σ w_t·(1−p_t)²·(−log p_t) / Σ w_t over valid elements.
		var num, den float64
		// Dice: per class over valid elements.
		var inter, psum, ysum [3]float64
		for n := range 2 {
			for p := range 2 {
				tg := target[n*2+p]
				if tg == 255 {
					continue
				}
				pr := softmax(n, p)
				pt := pr[tg]
				num += cw[tg] * (1 - pt) * (1 - pt) * -math.Log(pt)
				den += cw[tg]
				for c := range 3 {
					y := 0.0
					if int64(c) == tg {
						y = 1
					}
					inter[c] += pr[c] * y
					psum[c] += pr[c]
					ysum[c] += y
				}
			}
		}
		if got, want := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, loss), num/den; math.Abs(got-want) > 1e-5*want {
			t.Errorf("weighted=%v: focal loss %.8g, want %.8g", weighted, got, want)
		}
		var dl, ws float64
		for c := range 3 {
			dl += cw[c] * (1 - (2*inter[c]+1)/(psum[c]+ysum[c]+1))
			ws += cw[c]
		}
		diceOnly := grad.Loss{NoPixel: true, Dice: 1, ClassWeights: loss.ClassWeights}
		if got, want := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, diceOnly), dl/ws; math.Abs(got-want) > 1e-5*want {
			t.Errorf("weighted=%v: Dice loss %.8g, want %.8g", weighted, got, want)
		}
	}
	ce := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, grad.Loss{})
	both := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, grad.Loss{Dice: 1})
	dice := evalLoss(t, []int64{2, 3, 2}, z, []int64{2, 2}, target, grad.Loss{NoPixel: true, Dice: 1})
	if math.Abs(both-(ce+dice)) > 1e-5*both {
		t.Errorf("ce+dice %.8g, want ce %.8g + dice %.8g", both, ce, dice)
	}
}

// TestLovaszGradients checks the Lovász-softmax term alone and beside
// cross entropy by finite differences (the logits are drawn so that the
// errors' sort order does not change within the steps).
func TestLovaszGradients(t *testing.T) {
	target := []int64{0, 1, 255, 2, 2, 2, 0, 255}
	for _, tc := range []lossCase{
		{"lovasz", []int64{2, 3, 2, 2}, target, grad.Loss{NoPixel: true, Lovasz: 1}},
		{"ce_lovasz_nhwc_scale", []int64{2, 2, 2, 3}, target, grad.Loss{Lovasz: 0.5, ClassAxis: -1, Scale: true}},
		{"lovasz_noignore_absent_class", []int64{1, 3, 3, 2}, []int64{0, 1, 1, 0, 1, 1}, grad.Loss{NoPixel: true, Lovasz: 1, NoIgnore: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLoss(t, tc) })
	}
}

// lovaszReference is Berman et al.'s lovasz_softmax (classes="present",
// ignore 255, per_image=False) from their published PyTorch code, in
// float64: the loss, and its gradient with respect to the logits by
// PyTorch's autograd.
const lovaszReference = `
import json, sys, torch
d = json.load(sys.stdin)
z = torch.tensor(d["z"], dtype=torch.float64).reshape(d["shape"]).requires_grad_(True)
labels = torch.tensor(d["target"]).reshape([d["shape"][0]] + d["shape"][2:])
def lovasz_grad(gt_sorted):
    p = len(gt_sorted)
    gts = gt_sorted.sum()
    intersection = gts - gt_sorted.double().cumsum(0)  # .float() in the original: float64 here
    union = gts + (1 - gt_sorted).double().cumsum(0)
    jaccard = 1. - intersection / union
    if p > 1:
        jaccard[1:p] = jaccard[1:p] - jaccard[0:-1]
    return jaccard
probas = torch.softmax(z, 1)
C = probas.size(1)
probas = probas.permute(0, 2, 3, 1).contiguous().view(-1, C)
labels = labels.view(-1)
valid = labels != 255
probas, labels = probas[valid], labels[valid]
losses = []
for c in range(C):
    fg = (labels == c).double()
    if fg.sum() == 0:
        continue
    errors = (fg - probas[:, c]).abs()
    errors_sorted, perm = torch.sort(errors, 0, descending=True)
    losses.append(torch.dot(errors_sorted, lovasz_grad(fg[perm])))
loss = sum(losses) / len(losses)
loss.backward()
print(json.dumps({"loss": loss.item(), "grad": z.grad.reshape(-1).tolist()}))
`

// TestLovaszMatchesReference compares the loss and its gradient with the
// reference implementation's, run by PyTorch in float64.
func TestLovaszMatchesReference(t *testing.T) {
	py := testassets.RequirePython(t, "torch")
	shape := []int64{2, 3, 3, 4}
	rng := rand.New(rand.NewPCG(5, 6))
	z := make([]float32, 2*3*3*4)
	for i := range z {
		z[i] = float32(rng.NormFloat64() * 2)
	}
	target := make([]int64, 2*3*4)
	for i := range target {
		target[i] = []int64{0, 1, 1, 255, 0}[rng.IntN(5)] // class 2 absent
	}
	in, _ := json.Marshal(map[string]any{"z": z, "shape": shape, "target": target})
	cmd := exec.Command(py, "-c", lovaszReference)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the PyTorch reference: %v", err)
	}
	var ref struct {
		Loss float64
		Grad []float64
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatal(err)
	}
	loss := grad.Loss{NoPixel: true, Lovasz: 1}
	got := evalLoss(t, shape, z, []int64{2, 3, 4}, target, loss)
	if math.Abs(got-ref.Loss) > 1e-5 {
		t.Errorf("Lovász loss %.8g, reference %.8g", got, ref.Loss)
	}
	m := newOpModel(13)
	m.node("Identity", []string{m.floats("z", shape, z...)}, []string{"logits"})
	m.outs = []string{"logits"}
	gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, Loss: loss})
	if err != nil {
		t.Fatal(err)
	}
	outs := runModel(t, gs.Training, map[string]*runtime.Tensor{"z": runtime.NewFloat32(shape, z), grad.TargetName: runtime.NewInt64([]int64{2, 3, 4}, target)})
	g := outs[grad.GradPrefix+"z"].Float32
	worst := 0.0
	for i := range g {
		worst = max(worst, math.Abs(float64(g[i])-ref.Grad[i]))
	}
	if worst > 1e-6 {
		t.Errorf("Lovász gradient differs from the reference's autograd by up to %.3g", worst)
	}
	t.Logf("loss %.8g (reference %.8g), gradient max difference %.3g", got, ref.Loss, worst)
}
