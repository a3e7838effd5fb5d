package onnxgraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// gradModel is parameterModel at the tests' opset with τ = gamma, δ = delta.
func gradModel(t testing.TB, delta float64, gamma []float64) (m *onnx.Model, tauProj, thr string) {
	t.Helper()
	m, tauProj, thr, err := parameterModel(f32(gamma), float32(delta), opsetTest)
	if err != nil {
		t.Fatal(err)
	}
	return m, tauProj, thr
}

// kinkGap is the distance of (δ, γ) from the kinks of the projection: the
// smallest |γ_i − θ*| and |θ*| (the relu).
func kinkGap(delta float64, gamma []float64) float64 {
	theta := thetaOf(delta, gamma)
	gap := math.Abs(theta)
	for _, x := range gamma {
		gap = math.Min(gap, math.Abs(x-theta))
	}
	return gap
}

// gradPoints returns (δ, γ) pairs away from kinks, float32-representable,
// covering θ* > 0 and θ* < 0, k* = 0, several k* and n = 1.
func gradPoints() []fwdCase {
	r := rand.New(rand.NewPCG(11, 12))
	var out []fwdCase
	add := func(name string, delta float64, gamma []float64) {
		for range 100 {
			delta = float64(float32(delta))
			for i, x := range gamma {
				gamma[i] = float64(float32(x))
			}
			if kinkGap(delta, gamma) > 0.02 {
				out = append(out, fwdCase{name, delta, gamma})
				return
			}
			delta += 0.05 * r.NormFloat64()
			for i := range gamma {
				gamma[i] += 0.05 * r.NormFloat64()
			}
		}
		panic("no point away from kinks for " + name)
	}
	add("n1_active", 0.3, []float64{2})
	add("n1_inactive", 2, []float64{0.7})
	add("n1_theta_neg", -2, []float64{0.7})
	add("n8", 0.2, normals(r, 8, 0, 1))
	add("n8_kstar0", 3, normals(r, 8, 0, 1))
	add("n30_shifted", 1, normals(r, 30, 2, 1))
	add("n30_theta_neg", -20, normals(r, 30, -0.5, 1))
	add("n200", 0, normals(r, 200, 0, 1))
	return out
}

// TestGradCheck compares onnx/grad's gradient of Σ c_i τ*_i + d ō (c, d
// random: gradcheck's upstream gradients) w.r.t. τ and δ with central
// differences through ONNX Runtime.
func TestGradCheck(t *testing.T) {
	initRuntime(t)
	var worst float64
	for _, p := range gradPoints() {
		m, tp, thr := gradModel(t, p.delta, p.gamma)
		cfg := grad.Config{
			Prober:     ortprobe.Prober{},
			Trainable:  []string{"tau", "delta"},
			Loss:       grad.Loss{Kind: grad.LossNone},
			GradInputs: []string{tp, thr},
		}
		res, err := gradcheck.Check(m, cfg, nil, gradcheck.Options{Directions: 4, Seed: 5, Threads: 1})
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if !res.Float64 {
			t.Logf("%s: checked in float32 (no double kernels)", p.name)
		}
		for _, d := range res.Directions {
			if d.RelErr > 1e-3 {
				t.Errorf("%s: analytic %.10g numeric %.10g: rel err %.3g", p.name, d.Analytic, d.Numeric, d.RelErr)
			}
		}
		worst = math.Max(worst, res.MaxRelErr)
	}
	t.Logf("RESULT gradcheck max rel err %.3g", worst)
}

// trainGrad builds the training graph of F = Σ c_i τ*_i + d ō with
// onnx/grad and runs it in float64: ∂F/∂τ and ∂F/∂δ.
func trainGrad(t *testing.T, delta float64, gamma, c []float64, d float64) ([]float64, float64) {
	t.Helper()
	n := len(gamma)
	m, tp, thr := gradModel(t, delta, gamma)
	gs, err := grad.Build(m, grad.Config{
		Prober:     ortprobe.Prober{},
		Trainable:  []string{"tau", "delta"},
		Loss:       grad.Loss{Kind: grad.LossNone},
		GradInputs: []string{tp, thr},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := onnx.ToFloat64(gs.Training).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feeds := map[string]*runtime.Tensor{
		"tau":                   runtime.NewFloat64([]int64{int64(n)}, gamma),
		"delta":                 runtime.NewFloat64([]int64{1}, []float64{delta}),
		grad.GradInPrefix + tp:  runtime.NewFloat64([]int64{int64(n)}, c),
		grad.GradInPrefix + thr: runtime.NewFloat64([]int64{1}, []float64{d}),
	}
	in := make([]*runtime.Tensor, len(s.Inputs))
	for i, x := range s.Inputs {
		if in[i] = feeds[x.Name]; in[i] == nil {
			t.Fatalf("no feed for %q", x.Name)
		}
	}
	outs, err := s.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	return outs[s.OutputIndex(grad.GradPrefix+"tau")].Float64, outs[s.OutputIndex(grad.GradPrefix+"delta")].Float64[0]
}

// closedForm is the gradient of F = Σ c_i τ*_i + d ō in closed form:
// dual.ExactProjector's vector–Jacobian product (checked against finite
// differences in package dual). With the active set A = {i : γ_i > θ*}
// (strict: a coordinate tied with θ* counts as inactive, as in the graph):
//
//	θ* > 0:  ∂F/∂γ_i = c_i (i ∉ A), ∂F/∂γ_i = ∂F/∂δ = (d + Σ_{j∈A} c_j)/(k*+1) (i ∈ A);
//	θ* ≤ 0:  ō = 0: ∂F/∂γ_i = c_i where γ_i ≤ 0, 0 elsewhere; ∂F/∂δ = 0.
func closedForm(delta float64, gamma, c []float64, d float64) ([]float64, float64) {
	var p dual.ExactProjector
	g := make([]float64, len(gamma))
	_, gd, err := p.Apply(gamma, delta, c, d, make([]float64, len(gamma)), g)
	if err != nil {
		panic(err)
	}
	return g, gd
}

func maxDiff(gTau []float64, gDelta float64, wTau []float64, wDelta float64) float64 {
	e := math.Abs(gDelta - wDelta)
	for i := range gTau {
		e = math.Max(e, math.Abs(gTau[i]-wTau[i]))
	}
	return e
}

// TestGradAnalytic runs the compiled training graph (in float64) and
// compares its gradient with the closed form away from kinks.
func TestGradAnalytic(t *testing.T) {
	initRuntime(t)
	r := rand.New(rand.NewPCG(21, 22))
	var worst float64
	for _, p := range gradPoints() {
		c, d := normals(r, len(p.gamma), 0, 1), r.NormFloat64()
		gTau, gDelta := trainGrad(t, p.delta, p.gamma, c, d)
		wTau, wDelta := closedForm(p.delta, p.gamma, c, d)
		if e := maxDiff(gTau, gDelta, wTau, wDelta); e > 1e-12 {
			t.Errorf("%s: max |grad − closed form| = %.3g (∂/∂δ %v want %v)", p.name, e, gDelta, wDelta)
		} else {
			worst = math.Max(worst, e)
		}
	}
	t.Logf("RESULT analytic max abs err %.3g", worst)
}

// TestGradAtTies: at kinks the graph returns the gradient of one of the
// smooth pieces meeting there (an element of the Clarke subdifferential),
// the one where tied coordinates are inactive, and never NaN.
func TestGradAtTies(t *testing.T) {
	initRuntime(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, p := range []fwdCase{
		{"boundary_tie", 0, []float64{2, 1, 1, 0}},        // θ* = 1 = γ_2 = γ_3
		{"tied_active", 1, []float64{3, 3, 1, 1, 1, 0}},   // θ* = 7/3, γ_1 = γ_2 active
		{"theta_zero", -1, []float64{1, -2}},              // θ* = 0: relu kink
		{"theta_neg_tie_zero", -5, []float64{0, -1, 2}},   // ō = 0 = γ_1
		{"all_equal", 1.5, []float64{1.5, 1.5, 1.5, 1.5}}, // θ* = every γ_i
	} {
		c, d := normals(r, len(p.gamma), 0, 1), r.NormFloat64()
		gTau, gDelta := trainGrad(t, p.delta, p.gamma, c, d)
		wTau, wDelta := closedForm(p.delta, p.gamma, c, d)
		if e := maxDiff(gTau, gDelta, wTau, wDelta); !(e <= 1e-12) {
			t.Errorf("%s: grad τ %v δ %v, want %v %v", p.name, gTau, gDelta, wTau, wDelta)
		}
	}
}

// thetaOf is θ* (unclipped) by the sorted scan.
func thetaOf(delta float64, gamma []float64) float64 {
	s := slices.Clone(gamma)
	slices.Sort(s)
	sum, k, theta := delta, 0.0, delta
	for j := len(s) - 1; j >= 0 && s[j] > theta; j-- {
		sum += s[j]
		k++
		theta = sum / (k + 1)
	}
	return theta
}

// TestGradOfThreshold checks ∂ō/∂γ_i = 1/(k*+1) on the k* top coordinates
// (0 elsewhere) and ∂ō/∂δ = 1/(k*+1) directly: c = 0, d = 1.
func TestGradOfThreshold(t *testing.T) {
	initRuntime(t)
	for _, p := range gradPoints() {
		theta := thetaOf(p.delta, p.gamma)
		if theta <= 0 {
			continue
		}
		n := len(p.gamma)
		m, tp, thr := gradModel(t, p.delta, p.gamma)
		gs, err := grad.Build(m, grad.Config{
			Prober:    ortprobe.Prober{},
			Trainable: []string{"tau", "delta"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{thr},
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = tp
		data, _ := onnx.ToFloat64(gs.Training).Marshal()
		s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		feeds := map[string]*runtime.Tensor{
			"tau":                   runtime.NewFloat64([]int64{int64(n)}, p.gamma),
			"delta":                 runtime.NewFloat64([]int64{1}, []float64{p.delta}),
			grad.GradInPrefix + thr: runtime.NewFloat64([]int64{1}, []float64{1}),
		}
		in := make([]*runtime.Tensor, len(s.Inputs))
		for i, x := range s.Inputs {
			in[i] = feeds[x.Name]
		}
		outs, err := s.Run(in...)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, x := range p.gamma {
			if x > theta {
				k++
			}
		}
		w := 1 / float64(k+1)
		gTau := outs[s.OutputIndex(grad.GradPrefix+"tau")].Float64
		if g := outs[s.OutputIndex(grad.GradPrefix+"delta")].Float64[0]; math.Abs(g-w) > 1e-15 {
			t.Errorf("%s: ∂ō/∂δ = %v, want 1/(k*+1) = %v", p.name, g, w)
		}
		for i, x := range p.gamma {
			want := 0.0
			if x > theta {
				want = w
			}
			if math.Abs(gTau[i]-want) > 1e-15 {
				t.Errorf("%s: ∂ō/∂γ_%d = %v, want %v", p.name, i, gTau[i], want)
			}
		}
		t.Logf("%s: n=%d k*=%d ∂ō/∂δ=%s", p.name, n, k, fmt.Sprint(w))
	}
}

// TestGradCheckBatch differentiates a batched projection (τ [B, n], δ [B, 1]).
func TestGradCheckBatch(t *testing.T) {
	initRuntime(t)
	const B, n = 3, 12
	r := rand.New(rand.NewPCG(31, 32))
	var tau, delta []float32
	for len(delta) < B {
		d := r.NormFloat64()
		g := normals(r, n, 0.5, 1)
		for i := range g {
			g[i] = float64(float32(g[i]))
		}
		d = float64(float32(d))
		if kinkGap(d, g) > 0.02 {
			delta = append(delta, float32(d))
			tau = append(tau, f32(g)...)
		}
	}
	g := &onnx.GraphProto{Name: proto.String("batch"), Initializer: []*onnx.TensorProto{
		onnx.NewFloat32Tensor("tau", []int64{B, n}, tau),
		onnx.NewFloat32Tensor("delta", []int64{B, 1}, delta),
	}}
	tp, thr, err := Append(g, opsetTest, "tau", "delta", "proj")
	if err != nil {
		t.Fatal(err)
	}
	g.Output = []*onnx.ValueInfoProto{{Name: proto.String(tp)}, {Name: proto.String(thr)}}
	m := onnx.NewModel(g, opsetTest)
	res, err := gradcheck.Check(m, grad.Config{
		Trainable: []string{"tau", "delta"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{tp, thr},
	}, nil, gradcheck.Options{Directions: 4, Seed: 9, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.MaxRelErr > 1e-3 {
		t.Errorf("batched gradient: max rel err %.3g", res.MaxRelErr)
	}
	t.Logf("RESULT batched gradcheck float64=%v max rel err %.3g", res.Float64, res.MaxRelErr)
}
