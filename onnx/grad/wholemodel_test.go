package grad_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// TestWholePersonModel checks one parameter per role of the person model
// with frozen kinks (see frozenKinks).
func TestWholePersonModel(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model checks take about 15 s")
	}
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
			checkFrozen(t, m, "input", []int64{1, 3, 65, 65}, []roleParam{{tc.name, tc.param}})
		})
	}
	// Negative control: the loose float32 bound (0.5) this test used before
	// accepted a first-conv gradient scaled by 1.6; the frozen check must not.
	t.Run("scaled_gradient_caught", func(t *testing.T) {
		fails := frozenCheck(t, m, "input", []int64{1, 3, 65, 65}, []roleParam{{"first_conv", "MobilenetV2_Conv_Relu_W_2"}}, frozenSpec{gradScale: 1.6})
		if len(fails) != 2 {
			t.Errorf("gradient × 1.6: %d of 2 comparisons failed, want both", len(fails))
		}
	})
}

// generatedModel loads a PyTorch-exported model made by
// scripts/gen_torch_models.py, or skips (fails under SEGTUNE_REQUIRE_ASSETS).
func generatedModel(t *testing.T, name string) *onnx.Model {
	t.Helper()
	m, err := onnx.Load(testassets.Generated(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spreadParams picks parameters from the second half of the network
// (TestWholeModelsFrozenKinks and TestWholeModelsAgainstPyTorch check the
// early layers).
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
					checkFrozen(t, m, in, []int64{2, 3, 64, 64}, []roleParam{{p, p}})
				})
			}
		})
	}
}

// Finite differences with frozen kinks.
//
// A whole DeepLabV3+ is piecewise smooth: every Relu, Clip (ReLU6),
// HardSigmoid and MaxPool is a kink, and a float32 central difference with a
// step large enough to beat rounding crosses thousands of them, so it
// measures something else than the derivative at θ. frozenKinks rewrites the
// model with gradcheck.FreezeKinks so that each kink keeps, at every
// element, the linear piece it is on at θ.
//
// The frozen network has the same value and the same gradient as the
// original at θ (the kinks' derivatives are the slopes at θ), and it is
// smooth everywhere: with no squeeze-and-excitation gating (MobileNetV2,
// ResNet, the person model) the logits are even affine in any single weight
// tensor, so its central differences are exact up to float32 rounding for
// steps as large as the weights themselves. With SE blocks (MobileNetV3)
// the logits are polynomial in the weights; Richardson extrapolation of two
// steps removes the h² term. The analytic gradient still comes from the
// training graph of the original model, so every backward rule, the kinks'
// included, is checked.

// frozenKinks returns a copy of m whose kinks are frozen at input x (shape
// shape) and whose params are graph inputs instead of initializers.
func frozenKinks(t *testing.T, m *onnx.Model, input string, shape []int64, x []float32, params []string) *onnx.Model {
	t.Helper()
	feeds := map[string]*runtime.Tensor{input: runtime.NewFloat32(shape, x)}
	fz, err := gradcheck.FreezeKinks(m, false, func(pm *onnx.Model) (map[string]*runtime.Tensor, error) {
		return runModel(t, pm, feeds), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g := fz.Proto.Graph
	// The parameters become inputs, so one session evaluates every step.
	var keep []*onnx.TensorProto
	isParam := map[string]bool{}
	for _, p := range params {
		isParam[p] = true
	}
	for _, init := range g.Initializer {
		if !isParam[init.GetName()] {
			keep = append(keep, init)
			continue
		}
		g.Input = append(g.Input, onnx.TensorValueInfo(init.GetName(), onnx.Float32, init.GetDims()...))
	}
	g.Initializer = keep
	return fz
}

// runModel runs m once and returns its outputs by name.
func runModel(t *testing.T, m *onnx.Model, feeds map[string]*runtime.Tensor) map[string]*runtime.Tensor {
	t.Helper()
	s := openModel(t, m)
	defer s.Close()
	return runSession(t, s, feeds)
}

func openModel(t *testing.T, m *onnx.Model) *runtime.Session {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runSession(t *testing.T, s *runtime.Session, feeds map[string]*runtime.Tensor) map[string]*runtime.Tensor {
	t.Helper()
	in := make([]*runtime.Tensor, len(s.Inputs))
	for i, x := range s.Inputs {
		if in[i] = feeds[x.Name]; in[i] == nil {
			t.Fatalf("no feed for input %q", x.Name)
		}
	}
	outs, err := s.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*runtime.Tensor{}
	for i, o := range s.Outputs {
		res[o.Name] = outs[i]
	}
	return res
}

// linearOps are linear in each float input when the others are constant
// (Mul, MatMul, Gemm, Conv: bilinear; Div: linear in its numerator).
var linearOps = map[string]bool{
	"Conv": true, "ConvTranspose": true, "MatMul": true, "Gemm": true, "Mul": true, "Div": true,
	"Add": true, "Sub": true, "Neg": true, "Sum": true, "Concat": true, "Split": true, "Resize": true,
	"GlobalAveragePool": true, "AveragePool": true, "ReduceMean": true, "ReduceSum": true,
	"Reshape": true, "Flatten": true, "Transpose": true, "Squeeze": true, "Unsqueeze": true,
	"Identity": true, "Slice": true, "Gather": true, "Pad": true,
}

// affineIn reports whether m's outputs are affine functions of initializer
// p: every node on a path from p is linear in the one input that depends
// on p (Shape reads no values).
func affineIn(m *onnx.Model, p string) bool {
	dep := map[string]bool{p: true}
	for _, n := range m.Proto.Graph.Node {
		var k int
		for j, in := range n.Input {
			if dep[in] {
				k++
				if n.GetOpType() == "Div" && j == 1 {
					return false
				}
			}
		}
		if k == 0 || n.GetOpType() == "Shape" {
			continue
		}
		if !linearOps[n.GetOpType()] || (k > 1 && !slices.Contains([]string{"Add", "Sub", "Sum", "Concat"}, n.GetOpType())) {
			return false
		}
		for _, o := range n.Output {
			dep[o] = true
		}
	}
	return true
}

// Frozen-kink tolerances: where the frozen network is affine in the
// parameter the central difference is exact but for float32 rounding, at a
// step as large as the parameter itself; where it is not (MobileNetV3's
// squeeze-and-excitation gates multiply activations by functions of the
// same activations, nested through the backbone), the step must be small,
// rounding dominates, and the bound is looser.
const (
	frozenAffineTol = 1e-3
	frozenCurvedTol = 1e-2
)

// frozenSpec says what a frozen-kink check differentiates.
type frozenSpec struct {
	// loss, when set, is compiled into the training graph (with target as
	// its target); the objective is then the loss linearised at θ,
	// Σ r·z with r = ∂loss/∂z computed here in float64 from z(θ), z being
	// the tensor the loss reads. The training graph's gradient must equal
	// the gradient of that linearisation, which is affine in a parameter
	// whenever z is (see affineIn). nil: r is random and reaches the
	// training graph through grad_in/<first output>.
	loss   *grad.Loss
	target []int64
	// gradScale multiplies the analytic gradients (0: 1), for negative
	// controls: a wrong gradient must fail the check.
	gradScale float64
	// convGrad is the training graph's Config.ConvGrad (with direct
	// convolutions, the form a GPU runs).
	convGrad grad.ConvClasses
}

func checkFrozen(t *testing.T, m *onnx.Model, input string, shape []int64, params []roleParam) {
	t.Helper()
	for _, e := range frozenCheck(t, m, input, shape, params, frozenSpec{}) {
		t.Error(e)
	}
}

// frozenCheck runs the frozen-kink check and returns its failures.
func frozenCheck(t *testing.T, m *onnx.Model, input string, shape []int64, params []roleParam, spec frozenSpec) []string {
	t.Helper()
	names := paramNames(params)
	logits := m.Proto.Graph.Output[0].GetName()
	cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: names, InputShapes: map[string][]int64{input: shape},
		Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{logits}}
	if spec.loss != nil {
		if spec.loss.Output != "" {
			logits = spec.loss.Output
		}
		cfg.Loss, cfg.GradInputs, cfg.ExtraOutputs = *spec.loss, nil, []string{logits}
	}
	if spec.convGrad != 0 {
		cfg.ConvGrad, cfg.DirectConvs = spec.convGrad, true
	}
	gs, err := grad.Build(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 0xf002e))
	x := make([]float32, numel(shape))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	// The objective is Σ r·logits, summed in float64 here; the training
	// graph gets its gradient r through grad_in/<logits>.
	var lshape []int64
	for _, o := range gs.Manifest.Training.Outputs {
		if o.Name == logits {
			lshape = o.Shape
		}
	}
	r := make([]float32, numel(lshape))
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	xt := runtime.NewFloat32(shape, x)
	feeds := map[string]*runtime.Tensor{input: xt, grad.GradInPrefix + logits: runtime.NewFloat32(lshape, r)}
	if spec.loss != nil {
		feeds = map[string]*runtime.Tensor{input: xt, grad.TargetName: runtime.NewInt64(gs.Manifest.Training.Inputs[1].Shape, spec.target)}
	}
	base := map[string]*runtime.Tensor{}
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		base[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
		feeds[p.GetName()] = base[p.GetName()]
	}
	tOut := runTraining(t, gs, feeds)
	if spec.loss != nil {
		r = lossGradient(t, *spec.loss, gs.Manifest.ClassAxis, lshape, tOut[logits].Float32, spec.target)
	}

	fz := pruneTo(frozenKinks(t, m, input, shape, x, names), logits)
	s := openModel(t, fz)
	defer s.Close()
	evalLogits := func(p string, v []float32) []float32 {
		fd := map[string]*runtime.Tensor{input: xt}
		for _, q := range names {
			fd[q] = base[q]
		}
		if p != "" {
			fd[p] = runtime.NewFloat32(base[p].Shape, v)
		}
		return runSession(t, s, fd)[logits].Float32
	}
	objective := func(p string, v []float32) float64 {
		var f float64
		for i, l := range evalLogits(p, v) {
			f += float64(r[i]) * float64(l)
		}
		return f
	}
	// At θ the frozen network is the network.
	if d := relDiff(f32s(runtime.NewFloat32(lshape, evalLogits("", nil))), f32s(tOut[logits])); d > 1e-5 {
		t.Fatalf("the frozen model's logits differ from the model's at θ: relative %.2e", d)
	}
	var fails []string
	for _, p := range params {
		g := f32s(tOut[grad.GradPrefix+p.name])
		if spec.gradScale != 0 {
			for i := range g {
				g[i] *= spec.gradScale
			}
		}
		pv := base[p.name].Float32
		affine := affineIn(fz, p.name)
		// Steps relative to RMS(p): the direction v has RMS RMS(p).
		steps, tol := []float64{1}, frozenAffineTol
		if !affine {
			steps, tol = []float64{4e-3, 2e-3}, frozenCurvedTol
		}
		rmsP := math.Max(rmsOf(f32s(base[p.name])), 1e-2)
		// Two directions: a random one, and the gradient's own (whose
		// directional derivative ‖g‖·RMS(p)·√n cannot be small by chance).
		dirs := [][]float64{make([]float64, len(pv)), make([]float64, len(pv))}
		rmsG := math.Max(rmsOf(g), 1e-30)
		for i := range pv {
			dirs[0][i] = rng.NormFloat64() * rmsP
			dirs[1][i] = g[i] / rmsG * rmsP
		}
		for k, v := range dirs {
			var analytic float64
			for i := range v {
				analytic += g[i] * v[i]
			}
			var d []float64
			for _, h := range steps {
				plus, minus := make([]float32, len(pv)), make([]float32, len(pv))
				for i := range pv {
					plus[i] = pv[i] + float32(h*v[i])
					minus[i] = pv[i] - float32(h*v[i])
				}
				d = append(d, (objective(p.name, plus)-objective(p.name, minus))/(2*h))
			}
			numeric := d[0]
			if !affine {
				numeric = (4*d[1] - d[0]) / 3 // Richardson: removes the h² term
			}
			// The error is relative to ‖g‖·‖v‖, the largest directional
			// derivative a step along v can have (Cauchy–Schwarz; it is the
			// value itself for the gradient direction). A random direction's
			// derivative can be small by cancellation, and float32 rounding
			// of the objective scales with ‖g‖·‖v‖, not with that derivative:
			// with weights generated under OpenBLAS instead of reference
			// BLAS, MobileNetV2's random-direction value was 156 against
			// ‖g‖·‖v‖ = 9e4, with a float32 difference of 2.7.
			var gg, vv float64
			for i := range v {
				gg += g[i] * g[i]
				vv += v[i] * v[i]
			}
			scale := math.Max(math.Max(math.Abs(analytic), math.Abs(numeric)), math.Sqrt(gg*vv))
			rel := math.Abs(analytic-numeric) / math.Max(scale, 1e-30)
			kind := map[bool]string{true: "affine", false: "curved"}[affine]
			dir := []string{"random", "gradient"}[k]
			if rel > tol {
				fails = append(fails, fmt.Sprintf("%s %s (%s, %s direction): analytic %.9g, frozen-kink numeric %.9g (central differences %v): relative error %.2e > %g",
					p.role, p.name, kind, dir, analytic, numeric, d, rel, tol))
			}
			t.Logf("RESULT frozen %-22s %-50s %s %-8s analytic %+.8e numeric %+.8e rel_err=%.2e",
				p.role, p.name, kind, dir, analytic, numeric, rel)
		}
	}
	return fails
}

func rmsOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s / float64(max(len(v), 1)))
}

// TestWholeModelsFrozenKinks runs the frozen-kink finite-difference check
// on every whole model, for the parameters pickParams selects.
func TestWholeModelsFrozenKinks(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model checks take about 20 s")
	}
	for _, tc := range wholeModelCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t)
			checkFrozen(t, m, m.Proto.Graph.Input[0].GetName(), tc.shape, pickParams(t, m))
		})
	}
}
