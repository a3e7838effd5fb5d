package runtime

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets/skip"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	ort "github.com/yalue/onnxruntime_go"
)

// cgCase is one convolution the ConvGrad tests differentiate.
type cgCase struct {
	name                    string
	n, ci, h, w, co, kh, kw int64
	strides, dil, pads      []int64 // pads: top, left, bottom, right
	group                   int64
}

func (c cgCase) out() (oh, ow int64) {
	oh = (c.h+c.pads[0]+c.pads[2]-c.dil[0]*(c.kh-1)-1)/c.strides[0] + 1
	ow = (c.w+c.pads[1]+c.pads[3]-c.dil[1]*(c.kw-1)-1)/c.strides[1] + 1
	return
}

func (c cgCase) shapes() (dy, x, w, b []int64) {
	oh, ow := c.out()
	return []int64{c.n, c.co, oh, ow}, []int64{c.n, c.ci, c.h, c.w}, []int64{c.co, c.ci / c.group, c.kh, c.kw}, []int64{c.co}
}

func (c cgCase) attrs() []*onnxpb.AttributeProto {
	return []*onnxpb.AttributeProto{
		onnx.IntsAttr("kernel_shape", c.kh, c.kw), onnx.IntsAttr("strides", c.strides...),
		onnx.IntsAttr("dilations", c.dil...), onnx.IntsAttr("pads", c.pads...), onnx.IntAttr("group", c.group),
	}
}

var cgCases = []cgCase{
	{"dense3x3", 2, 3, 7, 6, 4, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, 1},
	{"dense3x3-stride2", 2, 3, 8, 7, 4, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, 1},
	{"pointwise", 2, 5, 5, 4, 3, 1, 1, []int64{1, 1}, []int64{1, 1}, []int64{0, 0, 0, 0}, 1},
	{"depthwise", 2, 4, 6, 6, 4, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, 4},
	{"grouped", 2, 8, 5, 5, 6, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, 2},
	{"dilated", 1, 2, 9, 8, 3, 3, 3, []int64{1, 1}, []int64{2, 2}, []int64{2, 2, 2, 2}, 1},
	{"asymmetric", 2, 3, 7, 8, 2, 3, 2, []int64{2, 3}, []int64{1, 2}, []int64{1, 0, 2, 1}, 1},
}

// convGradModel is one ConvGrad node over graph inputs dY, X and W of
// element type dt; outputs[i] false leaves output i unnamed (""). With
// anyShape the graph declares no shapes, so that runs may feed any.
func convGradModel(t testing.TB, c cgCase, dt onnxpb.TensorProto_DataType, outputs [3]bool, anyShape bool) []byte {
	t.Helper()
	dy, x, w, b := c.shapes()
	info := onnx.TensorValueInfo
	if anyShape {
		info = func(name string, dt onnxpb.TensorProto_DataType, _ ...int64) *onnxpb.ValueInfoProto {
			v := onnx.SymbolicValueInfo(name, dt)
			v.Type.GetTensorType().Shape = nil
			return v
		}
	}
	g := &onnx.Builder{}
	names := []string{"dX", "dW", "dB"}
	shapes := [][]int64{x, w, b}
	var outs []string
	var outInfo []*onnxpb.ValueInfoProto
	for i, on := range outputs {
		if !on {
			outs = append(outs, "")
			continue
		}
		outs = append(outs, names[i])
		outInfo = append(outInfo, info(names[i], dt, shapes[i]...))
	}
	n := g.Emit(ConvGradOp, "cg", []string{"dY", "X", "W"}, outs, c.attrs()...)
	domain := ConvGradDomain
	n.Domain = &domain
	m := onnx.NewModel(g.Graph("convgrad", []*onnxpb.ValueInfoProto{
		info("dY", dt, dy...), info("X", dt, x...), info("W", dt, w...),
	}, outInfo), 17)
	v := int64(1)
	m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: &domain, Version: &v})
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// convModel is the forward Conv the case differentiates: Y = Conv(X, W, B),
// in float32 (ONNX Runtime's CPU provider has no double Conv).
func convModel(t *testing.T, c cgCase) []byte {
	t.Helper()
	dy, x, w, b := c.shapes()
	g := &onnx.Builder{}
	g.Emit("Conv", "conv", []string{"X", "W", "B"}, []string{"Y"}, c.attrs()...)
	m := onnx.NewModel(g.Graph("conv", []*onnxpb.ValueInfoProto{
		onnx.TensorValueInfo("X", onnxpb.TensorProto_FLOAT, x...), onnx.TensorValueInfo("W", onnxpb.TensorProto_FLOAT, w...),
		onnx.TensorValueInfo("B", onnxpb.TensorProto_FLOAT, b...),
	}, []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("Y", onnxpb.TensorProto_FLOAT, dy...)}), 17)
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refConvGrad is the independent reference: for every forward product
// Y[n,co,oy,ox] += W[co,icg,ky,kx]·X[n,ci,iy,ix] it adds dY's share to dX
// and dW.
func refConvGrad(c cgCase, dy, x, w []float64) (dx, dw, db []float64) {
	oh, ow := c.out()
	cig, cog := c.ci/c.group, c.co/c.group
	dx = make([]float64, len(x))
	dw = make([]float64, len(w))
	db = make([]float64, c.co)
	for n := int64(0); n < c.n; n++ {
		for co := int64(0); co < c.co; co++ {
			g := co / cog
			for oy := int64(0); oy < oh; oy++ {
				for ox := int64(0); ox < ow; ox++ {
					gy := dy[((n*c.co+co)*oh+oy)*ow+ox]
					db[co] += gy
					for icg := int64(0); icg < cig; icg++ {
						ci := g*cig + icg
						for ky := int64(0); ky < c.kh; ky++ {
							iy := oy*c.strides[0] - c.pads[0] + ky*c.dil[0]
							if iy < 0 || iy >= c.h {
								continue
							}
							for kx := int64(0); kx < c.kw; kx++ {
								ix := ox*c.strides[1] - c.pads[1] + kx*c.dil[1]
								if ix < 0 || ix >= c.w {
									continue
								}
								xi := ((n*c.ci+ci)*c.h+iy)*c.w + ix
								wi := ((co*cig+icg)*c.kh+ky)*c.kw + kx
								dx[xi] += gy * w[wi]
								dw[wi] += gy * x[xi]
							}
						}
					}
				}
			}
		}
	}
	return dx, dw, db
}

func randn(rng *rand.Rand, shape []int64) []float64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func asF64(t *Tensor) []float64 {
	if t.Float64 != nil {
		return t.Float64
	}
	out := make([]float64, len(t.Float32))
	for i, x := range t.Float32 {
		out[i] = float64(x)
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// runConvGrad runs the case's ConvGrad node on the CPU kernel and returns
// its outputs by position (nil where omitted).
func runConvGrad(t *testing.T, c cgCase, dt onnxpb.TensorProto_DataType, outputs [3]bool, dy, x, w []float64) [3][]float64 {
	t.Helper()
	s, err := NewSession(convGradModel(t, c, dt, outputs, false), Options{Threads: 1, ConvGradCPU: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dys, xs, ws, _ := c.shapes()
	tensor := func(shape []int64, v []float64) *Tensor {
		if dt == onnxpb.TensorProto_DOUBLE {
			return NewFloat64(shape, v)
		}
		return NewFloat32(shape, toF32(v))
	}
	res, err := s.Run(tensor(dys, dy), tensor(xs, x), tensor(ws, w))
	if err != nil {
		t.Fatal(err)
	}
	var got [3][]float64
	k := 0
	for i, on := range outputs {
		if on {
			got[i] = asF64(res[k])
			k++
		}
	}
	return got
}

func TestConvGradCPUMatchesReference(t *testing.T) {
	requireORT(t)
	for _, c := range cgCases {
		for _, dt := range []onnxpb.TensorProto_DataType{onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(len(c.name))))
				dys, xs, ws, _ := c.shapes()
				dy, x, w := randn(rng, dys), randn(rng, xs), randn(rng, ws)
				if dt == onnxpb.TensorProto_FLOAT { // the reference sees the float32 inputs
					dy, x, w = asF64(NewFloat32(nil, toF32(dy))), asF64(NewFloat32(nil, toF32(x))), asF64(NewFloat32(nil, toF32(w)))
				}
				wdx, wdw, wdb := refConvGrad(c, dy, x, w)
				tol := 1e-12
				if dt == onnxpb.TensorProto_FLOAT {
					tol = 1e-5
				}
				got := runConvGrad(t, c, dt, [3]bool{true, true, true}, dy, x, w)
				closeTo(t, "dX", got[0], wdx, tol)
				closeTo(t, "dW", got[1], wdw, tol)
				closeTo(t, "dB", got[2], wdb, tol)
			})
		}
	}
}

// TestConvGradCPUOmittedOutputs leaves each output unnamed in turn (the
// middle one, dW, included): the others are still computed, and right.
func TestConvGradCPUOmittedOutputs(t *testing.T) {
	requireORT(t)
	c := cgCases[1]
	rng := rand.New(rand.NewPCG(2, 2))
	dys, xs, ws, _ := c.shapes()
	dy, x, w := randn(rng, dys), randn(rng, xs), randn(rng, ws)
	want := [3][]float64{}
	want[0], want[1], want[2] = refConvGrad(c, dy, x, w)
	for _, outs := range [][3]bool{{false, true, true}, {true, false, true}, {true, true, false}, {false, true, false}} {
		got := runConvGrad(t, c, onnxpb.TensorProto_DOUBLE, outs, dy, x, w)
		for i, on := range outs {
			if !on {
				continue
			}
			closeTo(t, []string{"dX", "dW", "dB"}[i], got[i], want[i], 1e-12)
		}
	}
}

// TestConvGradCPUFiniteDifferences checks the kernel against ONNX Runtime's
// own Conv: L = <Conv(X, W, B), dY> is linear in each of X, W and B, so a
// central difference along a random direction V gives <grad, V> up to
// float32 rounding.
func TestConvGradCPUFiniteDifferences(t *testing.T) {
	requireORT(t)
	for _, c := range cgCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(c.h)))
			dys, xs, ws, bs := c.shapes()
			round := func(v []float64) []float64 { return asF64(NewFloat32(nil, toF32(v))) }
			dy, x, w, b := round(randn(rng, dys)), round(randn(rng, xs)), round(randn(rng, ws)), round(randn(rng, bs))
			grads := runConvGrad(t, c, onnxpb.TensorProto_DOUBLE, [3]bool{true, true, true}, dy, x, w)
			s, err := NewSession(convModel(t, c), Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			loss := func(x, w, b []float64) (l, scale float64) {
				out, err := s.Run(NewFloat32(xs, toF32(x)), NewFloat32(ws, toF32(w)), NewFloat32(bs, toF32(b)))
				if err != nil {
					t.Fatal(err)
				}
				for i, y := range out[0].Float32 {
					l += float64(y) * dy[i]
					scale += math.Abs(float64(y) * dy[i])
				}
				return l, scale
			}
			vars := [][]float64{x, w, b}
			for k, name := range []string{"dX", "dW", "dB"} {
				for trial := 0; trial < 3; trial++ {
					v := round(randn(rng, []int64{int64(len(vars[k]))}))
					shift := func(sign float64) [3][]float64 {
						var in [3][]float64
						copy(in[:], vars)
						in[k] = make([]float64, len(vars[k]))
						for i := range in[k] {
							in[k][i] = vars[k][i] + sign*v[i]
						}
						return in
					}
					p, m := shift(1), shift(-1)
					lp, sp := loss(p[0], p[1], p[2])
					lm, sm := loss(m[0], m[1], m[2])
					fd := (lp - lm) / 2
					var ana float64
					for i := range v {
						ana += grads[k][i] * v[i]
					}
					if tol := 1e-5 * (sp + sm + 1); math.Abs(fd-ana) > tol {
						t.Errorf("%s along direction %d: finite difference %v, ConvGrad %v (tolerance %v)", name, trial, fd, ana, tol)
					}
				}
			}
		})
	}
}

// TestConvGradNeedsRegistration: without ConvGradCPU, ONNX Runtime knows
// no ConvGrad, and the error names it.
func TestConvGradNeedsRegistration(t *testing.T) {
	requireORT(t)
	_, err := NewSession(convGradModel(t, cgCases[0], onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false), Options{Threads: 1})
	if err == nil || !strings.Contains(err.Error(), ConvGradOp) {
		t.Fatalf("session without the ConvGrad kernels: err = %v, want one naming %s", err, ConvGradOp)
	}
}

func TestConvGradBadAttributes(t *testing.T) {
	requireORT(t)
	c := cgCases[0]
	threeD := c
	threeD.strides = []int64{1, 1, 1}
	_, err := NewSession(convGradModel(t, threeD, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false), Options{Threads: 1, ConvGradCPU: true})
	if err == nil || !strings.Contains(err.Error(), "strides has 3 values") || !strings.Contains(err.Error(), "ConvGrad node cg") {
		t.Errorf("3 strides: err = %v, want the node named and strides rejected", err)
	}
}

// TestConvGradBadShapes: inputs that contradict the attributes fail the
// run with a clear error, and the session stays usable.
func TestConvGradBadShapes(t *testing.T) {
	requireORT(t)
	c := cgCases[4] // grouped: group 2
	s, err := NewSession(convGradModel(t, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, true), Options{Threads: 1, ConvGradCPU: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dys, xs, ws, _ := c.shapes()
	zeros := func(shape ...int64) *Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		return NewFloat32(shape, make([]float32, n))
	}
	for _, tc := range []struct {
		name      string
		dy, x, w  []int64
		wantError string
	}{
		{"group does not divide channels", dys, []int64{xs[0], 7, xs[2], xs[3]}, ws, "group 2 does not divide"},
		{"3-D input", dys, []int64{xs[0], xs[1], xs[2]}, ws, "input X has rank 3"},
		{"wrong output size", []int64{dys[0], dys[1], dys[2] + 1, dys[3]}, xs, ws, "does not match"},
	} {
		_, err := s.Run(zeros(tc.dy...), zeros(tc.x...), zeros(tc.w...))
		if err == nil || !strings.Contains(err.Error(), tc.wantError) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantError)
		}
	}
	if _, err := s.Run(zeros(dys...), zeros(xs...), zeros(ws...)); err != nil {
		t.Errorf("good shapes after bad ones: %v", err)
	}
}

// TestConvGradCUDAFallsBackToCPUKernel: a ConvGradCUDA session that falls
// back to the CPU registers the CPU kernel, so its ConvGrad graph still runs.
func TestConvGradCUDAFallsBackToCPUKernel(t *testing.T) {
	requireORT(t)
	if _, err := CUDADevices(); err == nil {
		t.Skip("CUDA is available here")
	}
	c := cgCases[3]
	var log bytes.Buffer
	s, err := NewSession(convGradModel(t, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false),
		Options{Device: DeviceCUDA, Threads: 1, Log: &log, ConvGradCUDA: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Device != DeviceCPU || !strings.Contains(log.String(), "CUDA unavailable") {
		t.Fatalf("device %s, log %q: want the CPU after the fallback line", s.Device, log.String())
	}
	rng := rand.New(rand.NewPCG(4, 4))
	dys, xs, ws, _ := c.shapes()
	dy, x, w := randn(rng, dys), randn(rng, xs), randn(rng, ws)
	out, err := s.Run(NewFloat32(dys, toF32(dy)), NewFloat32(xs, toF32(x)), NewFloat32(ws, toF32(w)))
	if err != nil {
		t.Fatal(err)
	}
	_, _, wdb := refConvGrad(c, dy, x, w)
	closeTo(t, "dB", asF64(out[2]), wdb, 1e-5)
}

// TestConvGradCUDANeedsCuDNN: registering the cuDNN kernel where cuDNN 9
// cannot be loaded fails with one line naming it (the session's CUDA
// fallback line then carries it).
func TestConvGradCUDANeedsCuDNN(t *testing.T) {
	requireORT(t)
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	reg, err := registerConvGrad(so, false, true, cudaLegacyEP, nil)
	if err == nil {
		reg.release()
		t.Skip("cuDNN 9 loads here")
	}
	if msg := err.Error(); !strings.Contains(msg, "libcudnn.so.9") || strings.Contains(msg, "\n") {
		t.Errorf("err = %q, want one line naming libcudnn.so.9", msg)
	}
}

// TestConvGradCUDAMatchesCPU runs every case's ConvGrad on the cuDNN
// kernel (float32, TF32 off, both algorithm searches) and on the CPU
// kernel, and compares. It needs a GPU (skipped without one, failed under
// SEGTUNE_REQUIRE_GPU).
func TestConvGradCUDAMatchesCPU(t *testing.T) {
	requireORT(t)
	if _, err := CUDADevices(); err != nil {
		skip.GPU(t, err.Error())
		return
	}
	for _, search := range []string{"HEURISTIC", "EXHAUSTIVE"} {
		for _, c := range cgCases {
			if c.name == "asymmetric" { // pads cuDNN cannot express: an error, checked below
				continue
			}
			t.Run(search+"/"+c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(c.h)))
				dys, xs, ws, _ := c.shapes()
				dy, x, w := randn(rng, dys), randn(rng, xs), randn(rng, ws)
				model := convGradModel(t, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false)
				var log bytes.Buffer
				s, err := NewSession(model, Options{Device: DeviceCUDA, Log: &log, ConvGradCUDA: true,
					CUDAOptions: map[string]string{"use_tf32": "0", "cudnn_conv_algo_search": search}})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if s.Device != DeviceCUDA {
					t.Fatalf("ran on %s: %s", s.Device, log.String())
				}
				out, err := s.Run(NewFloat32(dys, toF32(dy)), NewFloat32(xs, toF32(x)), NewFloat32(ws, toF32(w)))
				if err != nil {
					t.Fatal(err)
				}
				want := runConvGrad(t, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, dy, x, w)
				for i, name := range []string{"dX", "dW", "dB"} {
					closeTo(t, name, asF64(out[i]), want[i], 1e-4)
				}
			})
		}
	}
	c := cgCases[6]
	s, err := NewSession(convGradModel(t, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false),
		Options{Device: DeviceCUDA, ConvGradCUDA: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dys, xs, ws, _ := c.shapes()
	rng := rand.New(rand.NewPCG(6, 6))
	_, err = s.Run(NewFloat32(dys, toF32(randn(rng, dys))), NewFloat32(xs, toF32(randn(rng, xs))), NewFloat32(ws, toF32(randn(rng, ws))))
	if err == nil || !strings.Contains(err.Error(), "cuDNN pads symmetrically") {
		t.Errorf("asymmetric pads on CUDA: err = %v", err)
	}
}

// BenchmarkConvGradCPU times the CPU kernel (one thread) on layers of
// MobileNetV2 at a 64×64 input, batch 2, the size the tests train at.
func BenchmarkConvGradCPU(b *testing.B) {
	requireORT(b)
	one, two := []int64{1, 1}, []int64{2, 2}
	for _, c := range []cgCase{
		{"stem-3x3-s2", 2, 3, 64, 64, 32, 3, 3, two, one, []int64{1, 1, 1, 1}, 1},
		{"depthwise-3x3-144@16", 2, 144, 16, 16, 144, 3, 3, one, one, []int64{1, 1, 1, 1}, 144},
		{"pointwise-144to24@16", 2, 144, 16, 16, 24, 1, 1, one, one, []int64{0, 0, 0, 0}, 1},
		{"dense-3x3-256@16", 2, 256, 16, 16, 256, 3, 3, one, one, []int64{1, 1, 1, 1}, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := NewSession(convGradModel(b, c, onnxpb.TensorProto_FLOAT, [3]bool{true, true, true}, false),
				Options{Threads: 1, ConvGradCPU: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rng := rand.New(rand.NewPCG(7, 7))
			dys, xs, ws, _ := c.shapes()
			in := []*Tensor{NewFloat32(dys, toF32(randn(rng, dys))), NewFloat32(xs, toF32(randn(rng, xs))), NewFloat32(ws, toF32(randn(rng, ws)))}
			oh, ow := c.out()
			macs := float64(c.n * c.co * oh * ow * (c.ci / c.group) * c.kh * c.kw)
			b.ResetTimer()
			for range b.N {
				if _, err := s.Run(in...); err != nil {
					b.Fatal(err)
				}
			}
			// dX and dW each take as many multiply-adds as the forward.
			b.ReportMetric(2*macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// TestConvGradInfersShapes: ONNX Runtime learns ConvGrad's output shapes at
// session creation, dB's [Co] included: its constant folding replaces the
// Shape of each output with a constant, which it can only do for a shape
// known before the run.
func TestConvGradInfersShapes(t *testing.T) {
	requireORT(t)
	c := cgCases[4]
	dy, x, w, _ := c.shapes()
	dt := onnxpb.TensorProto_FLOAT
	g := &onnx.Builder{}
	n := g.Emit(ConvGradOp, "cg", []string{"dY", "X", "W"}, []string{"", "dW", "dB"}, c.attrs()...)
	domain := ConvGradDomain
	n.Domain = &domain
	g.Emit("Shape", "shape_w", []string{"dW"}, []string{"dW_shape"})
	g.Emit("Shape", "shape_b", []string{"dB"}, []string{"dB_shape"})
	m := onnx.NewModel(g.Graph("convgrad", []*onnxpb.ValueInfoProto{
		onnx.TensorValueInfo("dY", dt, dy...), onnx.TensorValueInfo("X", dt, x...), onnx.TensorValueInfo("W", dt, w...),
	}, []*onnxpb.ValueInfoProto{ // dW and dB themselves untyped: only inference gives their shapes
		onnx.TensorValueInfo("dW_shape", onnxpb.TensorProto_INT64, 4), onnx.TensorValueInfo("dB_shape", onnxpb.TensorProto_INT64, 1),
	}), 17)
	v := int64(1)
	m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: &domain, Version: &v})
	model, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "optimized.onnx")
	s, err := NewSession(model, Options{Threads: 1, ConvGradCPU: true, Tuning: Tuning{OptimizedModelPath: path}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	opt, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range opt.Graph().GetNode() {
		if n.GetOpType() == "Shape" {
			t.Errorf("node %s (Shape of %v) was not folded: ConvGrad's output shape unknown before the run", n.GetName(), n.GetInput())
		}
	}
}
