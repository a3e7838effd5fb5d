package onnxgraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/projection"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

const opsetTest = 17

func initRuntime(t testing.TB) {
	t.Helper()
	runtimetest.Require(t)
}

var (
	sessMu sync.Mutex
	sess   = map[onnx.DataType]*runtime.Session{}
)

// session returns a cached session on the standalone model.
func session(t testing.TB, dt onnx.DataType) *runtime.Session {
	t.Helper()
	initRuntime(t)
	sessMu.Lock()
	defer sessMu.Unlock()
	if s, ok := sess[dt]; ok {
		return s
	}
	m, err := NewModel(dt, opsetTest)
	if err != nil {
		t.Fatal(err)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	sess[dt] = s
	return s
}

// runGraph projects (delta, gamma) with the ONNX graph: ε*, τ*, k*.
func runGraph(t testing.TB, dt onnx.DataType, delta float64, gamma []float64) (float64, []float64, int64) {
	t.Helper()
	s := session(t, dt)
	n := int64(len(gamma))
	var tau, d *runtime.Tensor
	if dt == onnx.Float64 {
		tau, d = runtime.NewFloat64([]int64{n}, gamma), runtime.NewFloat64([]int64{1}, []float64{delta})
	} else {
		tau, d = runtime.NewFloat32([]int64{n}, f32(gamma)), runtime.NewFloat32([]int64{1}, []float32{float32(delta)})
	}
	outs, err := s.Run(tau, d)
	if err != nil {
		t.Fatal(err)
	}
	return floats(outs[1])[0], floats(outs[0]), outs[2].Int64[0]
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func floats(t *runtime.Tensor) []float64 {
	if t.Float64 != nil {
		return t.Float64
	}
	out := make([]float64, len(t.Float32))
	for i, x := range t.Float32 {
		out[i] = float64(x)
	}
	return out
}

type fwdCase struct {
	name  string
	delta float64
	gamma []float64
}

func normals(r *rand.Rand, n int, mean, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean + sd*r.NormFloat64()
	}
	return v
}

func forwardCases() []fwdCase {
	r := rand.New(rand.NewPCG(1, 2))
	var cs []fwdCase
	for _, n := range []int{2, 5, 17, 100, 1000} {
		for j := range 3 {
			cs = append(cs, fwdCase{fmt.Sprintf("random_n%d_%d", n, j), r.NormFloat64(), normals(r, n, 0, 1)})
		}
		// Positive θ* with many active coordinates.
		cs = append(cs, fwdCase{fmt.Sprintf("shifted_n%d", n), 2, normals(r, n, 3, 1)})
	}
	tied := make([]float64, 60)
	for i := range tied {
		tied[i] = float64(r.IntN(4)) - 1 // values in {-1, 0, 1, 2}
	}
	cs = append(cs,
		fwdCase{"tied", 0.5, tied},
		fwdCase{"tied_delta_neg", -3, tied},
		fwdCase{"tied_at_theta", 1, []float64{3, 3, 1, 1, 1, 0}}, // θ* = (1+3+3)/3 = 7/3
		fwdCase{"tie_exact_boundary", 0, []float64{2, 1, 1, 0}},  // θ_1 = 1 = g_2: a kink
		fwdCase{"all_negative", -0.5, normals(r, 50, -5, 1)},
		fwdCase{"all_negative_delta_pos", 2, normals(r, 50, -5, 1)},
		fwdCase{"theta_negative", -10, normals(r, 50, -1, 0.1)},
		fwdCase{"all_equal", 0, slices.Repeat([]float64{1.5}, 40)},
		fwdCase{"all_equal_delta_eq", 1.5, slices.Repeat([]float64{1.5}, 40)},
		fwdCase{"all_equal_neg", -1, slices.Repeat([]float64{-2}, 40)},
		fwdCase{"n1_active", 0, []float64{3}},
		fwdCase{"n1_inactive", 4, []float64{3}},
		fwdCase{"n1_negative", -4, []float64{-3}},
		fwdCase{"n1_equal", 1, []float64{1}},
		fwdCase{"zeros", 0, make([]float64, 10)},
		fwdCase{"large_n1e5", 0, normals(r, 100000, 0, 1)},
		fwdCase{"large_n1e5_shifted", 5, normals(r, 100000, 1, 1)},
		fwdCase{"large_n1e5_half_active", 0, normals(r, 100000, 100, 1)},
		fwdCase{"large_n1e5_all_active", 1e7, normals(r, 100000, 100, 1)},
		fwdCase{"large_magnitude", 3e6, normals(r, 1000, 1e6, 3e6)},
		fwdCase{"tiny_magnitude", 1e-7, normals(r, 100, 0, 1e-6)},
	)
	return cs
}

// TestForward compares the graph with projection.Project and checks KKT.
func TestForward(t *testing.T) {
	for _, tc := range []struct {
		dt  onnx.DataType
		tol float64
	}{
		{onnx.Float32, 1e-6},
		{onnx.Float64, 1e-12},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			var maxEps, maxTau, maxKKT float64
			for _, c := range forwardCases() {
				delta, gamma := c.delta, c.gamma
				if tc.dt == onnx.Float32 {
					// Compare against the reference on the float32 inputs
					// the graph actually sees.
					delta = float64(float32(delta))
					gamma = slices.Clone(gamma)
					for i, x := range gamma {
						gamma[i] = float64(float32(x))
					}
				}
				eps, tau, _ := runGraph(t, tc.dt, delta, gamma)
				refEps, refTau, err := projection.Project(delta, gamma)
				if err != nil {
					t.Fatal(err)
				}
				// Errors relative to the input's magnitude (ε* itself may be 0).
				scale := math.Abs(delta)
				for _, x := range gamma {
					scale = math.Max(scale, math.Abs(x))
				}
				if scale == 0 {
					scale = 1
				}
				eEps := math.Abs(eps-refEps) / scale
				var eTau float64
				for i := range tau {
					eTau = math.Max(eTau, math.Abs(tau[i]-refTau[i])/scale)
				}
				rep, err := projection.KKT(delta, gamma, eps, tau)
				if err != nil {
					t.Fatal(err)
				}
				kktTol := 1e-5
				if tc.dt == onnx.Float64 {
					kktTol = 1e-12
				}
				kktTol = math.Max(kktTol, projectionTol(tc.dt, len(gamma)))
				if eEps > tc.tol || eTau > tc.tol {
					t.Errorf("%s: ε* %.17g want %.17g (rel err %.3g), max τ rel err %.3g", c.name, eps, refEps, eEps, eTau)
				}
				if !rep.OK(kktTol) {
					t.Errorf("%s: KKT %+v > %g", c.name, rep, kktTol)
				}
				maxEps, maxTau, maxKKT = math.Max(maxEps, eEps), math.Max(maxTau, eTau), math.Max(maxKKT, rep.Max())
			}
			t.Logf("RESULT max rel err ε* %.3g, τ* %.3g, KKT %.3g", maxEps, maxTau, maxKKT)
		})
	}
}

// projectionTol is projection.DefaultTol for the graph's precision.
func projectionTol(dt onnx.DataType, n int) float64 {
	if dt == onnx.Float64 {
		return projection.DefaultTol[float64](n)
	}
	return projection.DefaultTol[float32](n)
}

// TestKStar checks the counted k* against the definition on exact inputs.
func TestKStar(t *testing.T) {
	for _, c := range []struct {
		delta float64
		gamma []float64
		k     int64
		eps   float64
	}{
		{0, []float64{3}, 1, 1.5},
		{4, []float64{3}, 0, 4},
		{1, []float64{3, 3, 1, 1, 1, 0}, 2, 7.0 / 3},
		{-1, []float64{-2, -2, -2}, 0, 0},
		{1, []float64{1, 1, 1}, 0, 1},
		// θ_1 = 3 = g_2: a tie, where k = 1 and k = 2 give the same θ and ε*;
		// the strict comparison picks the smaller k.
		{0, []float64{6, 3, 0}, 1, 3},
		{0, []float64{6, 3.5, 0}, 2, 9.5 / 3},
	} {
		for _, dt := range []onnx.DataType{onnx.Float32, onnx.Float64} {
			eps, _, k := runGraph(t, dt, c.delta, c.gamma)
			if math.Abs(eps-c.eps) > 1e-6*math.Max(1, c.eps) {
				t.Errorf("%v δ=%v γ=%v: ε* = %v, want %v", dt, c.delta, c.gamma, eps, c.eps)
			}
			if k != c.k {
				t.Errorf("%v δ=%v γ=%v: k* = %d, want %d", dt, c.delta, c.gamma, k, c.k)
			}
		}
	}
}

// TestBatch runs a [B, n] τ with δ [B, 1] and compares each row.
func TestBatch(t *testing.T) {
	initRuntime(t)
	const B, n = 4, 33
	g := &onnx.GraphProto{Input: []*onnx.ValueInfoProto{
		onnx.SymbolicValueInfo("tau", onnx.Float64, B, "n"), onnx.SymbolicValueInfo("delta", onnx.Float64, B, 1),
	}}
	tp, thr, err := Append(g, opsetTest, "tau", "delta", "p")
	if err != nil {
		t.Fatal(err)
	}
	g.Output = []*onnx.ValueInfoProto{{Name: &tp}, {Name: &thr}}
	m := onnx.NewModel(g, opsetTest)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(3, 4))
	tau := normals(r, B*n, 0.5, 1)
	delta := normals(r, B, 0, 1)
	outs, err := s.Run(runtime.NewFloat64([]int64{B, n}, tau), runtime.NewFloat64([]int64{B, 1}, delta))
	if err != nil {
		t.Fatal(err)
	}
	for b := range B {
		eps, proj, err := projection.Project(delta[b], tau[b*n:(b+1)*n])
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(outs[1].Float64[b] - eps); d > 1e-12 {
			t.Errorf("row %d: ε* %v want %v", b, outs[1].Float64[b], eps)
		}
		for i := range n {
			if d := math.Abs(outs[0].Float64[b*n+i] - proj[i]); d > 1e-12 {
				t.Errorf("row %d: τ*[%d] %v want %v", b, i, outs[0].Float64[b*n+i], proj[i])
			}
		}
	}
}

func TestAppendErrors(t *testing.T) {
	mk := func() *onnx.GraphProto {
		return &onnx.GraphProto{Input: []*onnx.ValueInfoProto{
			onnx.SymbolicValueInfo("tau", onnx.Float32, "n"), onnx.SymbolicValueInfo("delta", onnx.Float32, 1),
		}}
	}
	if _, _, err := Append(mk(), 12, "tau", "delta", "p"); err == nil {
		t.Error("opset 12 accepted")
	}
	if _, _, err := Append(mk(), 17, "tau", "missing", "p"); err == nil {
		t.Error("missing delta accepted")
	}
	if _, _, err := Append(mk(), 17, "tau", "tau", "p"); err == nil {
		t.Error("tau == delta accepted")
	}
	g := mk()
	if _, _, err := Append(g, 17, "tau", "delta", "p"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Append(g, 17, "tau", "delta", "p"); err == nil {
		t.Error("prefix collision accepted")
	}
	if _, _, err := Append(g, 17, "tau", "delta", "q"); err != nil {
		t.Errorf("second prefix: %v", err)
	}
	g = mk()
	g.Input[0].Type.GetTensorType().ElemType = ptr(int32(onnx.Int64))
	if _, _, err := Append(g, 17, "tau", "delta", "p"); err == nil {
		t.Error("int64 tau accepted")
	}
}

func ptr[T any](v T) *T { return &v }

// TestOpsets runs the standalone model at every opset from 13 on that ONNX
// Runtime accepts, and compiles its gradient at opset 13.
func TestOpsets(t *testing.T) {
	initRuntime(t)
	gamma := []float64{0.5, 2, -1, 2, 3.25}
	const delta = 0.25
	refEps, _, _ := projection.Project(delta, gamma)
	for opset := int64(MinOpset); opset <= 21; opset++ {
		m, err := NewModel(onnx.Float32, opset)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := m.Marshal()
		s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
		if err != nil {
			t.Errorf("opset %d: %v", opset, err)
			continue
		}
		outs, err := s.Run(runtime.NewFloat32([]int64{5}, f32(gamma)), runtime.NewFloat32([]int64{1}, []float32{delta}))
		s.Close()
		if err != nil {
			t.Errorf("opset %d: %v", opset, err)
			continue
		}
		if e := float64(outs[1].Float32[0]); math.Abs(e-refEps) > 1e-6 {
			t.Errorf("opset %d: ε* %v want %v", opset, e, refEps)
		}
	}
	// The gradient compiler upgrades an opset-13 model and differentiates it.
	m, tp, thr := gradModel(t, delta, gamma[:3])
	m.Proto.OpsetImport[0].Version = proto.Int64(MinOpset)
	res, err := gradcheck.Check(m, grad.Config{
		Trainable: []string{"tau", "delta"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{tp, thr},
	}, nil, gradcheck.Options{Seed: 3, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.MaxRelErr > 1e-3 {
		t.Errorf("opset 13 gradient: rel err %.3g", res.MaxRelErr)
	}
}
