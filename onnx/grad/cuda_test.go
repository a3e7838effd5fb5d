package grad_test

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/internal/testassets/skip"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// cudaTol bounds ‖g_cuda − g_cpu‖ / ‖g_cpu‖ for every gradient, in fp32
// with TF32 off.
const cudaTol = 1e-3

// requireCUDA skips (fails under SEGTUNE_REQUIRE_GPU) unless ONNX Runtime's
// CUDA provider, its libraries and a GPU are there.
func requireCUDA(t *testing.T) {
	t.Helper()
	if err := runtime.Init(""); err != nil {
		skip.GPU(t, err.Error())
		return
	}
	if _, err := runtime.CUDADevices(); err != nil {
		skip.GPU(t, err.Error())
	}
}

// TestTrainingStepCUDAMatchesCPU compiles the training graph of the shared
// person model and of a generated PyTorch model, runs one step on the CPU
// and on the CUDA execution provider with the same inputs, and compares the
// loss and every gradient. It also profiles the CUDA session and reports the
// nodes ONNX Runtime placed on the CPU.
func TestTrainingStepCUDAMatchesCPU(t *testing.T) {
	requireCUDA(t)
	cases := []struct {
		name  string
		path  func(t *testing.T) string
		batch int64
		size  int64
	}{
		{"person", func(t *testing.T) string {
			return testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
		}, 1, 513}, // its batch dimension is fixed at 1
		{"mobilenetv2", func(t *testing.T) string {
			p := testassets.FindUp("testdata/generated/deeplabv3plus_mobilenetv2.onnx")
			if p == "" {
				testassets.SkipOrFail(t, "testdata/generated/deeplabv3plus_mobilenetv2.onnx is missing: run make torch-models")
			}
			return p
		}, 2, 128},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := onnx.Load(tc.path(t))
			if err != nil {
				t.Fatal(err)
			}
			in := m.Proto.Graph.Input[0].GetName()
			// The graph finetune runs on a GPU: direct convolutions, no
			// Winograd or Col2Im forms (the CPU session runs it too).
			gs, err := grad.Build(m, grad.Config{
				Prober:      ortprobe.Prober{},
				Trainable:   []string{"*"},
				InputShapes: map[string][]int64{in: {tc.batch, 3, tc.size, tc.size}},
				DirectConvs: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			data, err := gs.Training.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			cpu, err := runtime.NewSession(data, runtime.Options{Device: runtime.DeviceCPU})
			if err != nil {
				t.Fatal(err)
			}
			defer cpu.Close()
			prof := filepath.Join(t.TempDir(), "cuda")
			if d := os.Getenv("SEGTUNE_PROFILE_DIR"); d != "" {
				prof = filepath.Join(d, "cuda_"+tc.name)
			}
			var log strings.Builder
			copts := map[string]string{"use_tf32": "0"}
			// SEGTUNE_TEST_CUDA_OPTS=k=v,... adds CUDA provider options (e.g.
			// cudnn_conv_algo_search=DEFAULT, to compare cuDNN's algorithms).
			for _, kv := range strings.Split(os.Getenv("SEGTUNE_TEST_CUDA_OPTS"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					copts[k] = v
				}
			}
			gpu, err := runtime.NewSession(data, runtime.Options{Device: runtime.DeviceCUDA, Log: &log,
				CUDAOptions: copts,
				Tuning:      runtime.Tuning{ProfilePrefix: prof}})
			if err != nil {
				t.Fatal(err)
			}
			if gpu.Device != runtime.DeviceCUDA {
				// Retry with the provider's default options, in case it
				// refused use_tf32 (its default, TF32 on, is then in force).
				gpu.Close()
				t.Logf("CUDA with use_tf32=0 fell back: %s", log.String())
				log.Reset()
				gpu, err = runtime.NewSession(data, runtime.Options{Device: runtime.DeviceCUDA, Log: &log,
					Tuning: runtime.Tuning{ProfilePrefix: prof}})
				if err != nil {
					t.Fatal(err)
				}
				if gpu.Device != runtime.DeviceCUDA {
					gpu.Close()
					t.Fatalf("CUDA session fell back to the CPU: %s", log.String())
				}
			}
			feeds := trainingFeeds(t, cpu, gs, tc.batch, tc.size)
			t0 := time.Now()
			want, err := cpu.Run(feeds...)
			if err != nil {
				t.Fatal(err)
			}
			cpuT := time.Since(t0)
			var got []*runtime.Tensor
			var gpuT []time.Duration
			for i := 0; i < 3; i++ { // the first run includes cuDNN's algorithm search
				t0 = time.Now()
				if got, err = gpu.Run(feeds...); err != nil {
					t.Fatal(err)
				}
				gpuT = append(gpuT, time.Since(t0))
			}
			gpu.Close() // writes the profile
			ref := torchReference(t, m, cpu, feeds)
			worst, worstName := 0.0, ""
			worstC64, worstG64 := 0.0, 0.0
			grads := 0
			for i, o := range cpu.Outputs {
				if want[i] == nil || want[i].Float32 == nil {
					continue
				}
				if o.Name != grad.LossName {
					grads++
				}
				if r64 := ref[o.Name]; r64 != nil {
					worstC64 = max(worstC64, relErr64(want[i].Float32, r64))
					worstG64 = max(worstG64, relErr64(got[i].Float32, r64))
				}
				r := relErr(got[i].Float32, want[i].Float32)
				if math.IsNaN(r) || r > worst {
					worst, worstName = r, o.Name
				}
				if r > cudaTol || math.IsNaN(r) {
					// fp32 on the CPU is no exact reference either: where
					// PyTorch's float64 gradients are at hand, CUDA passes
					// when it is about as close to them as the CPU is.
					if r64 := ref[o.Name]; r64 != nil {
						ec, eg := relErr64(want[i].Float32, r64), relErr64(got[i].Float32, r64)
						if eg <= max(cudaTol, 1.5*ec) {
							t.Logf("%s: CUDA vs CPU %.3g, but vs float64: CPU %.3g, CUDA %.3g", o.Name, r, ec, eg)
							continue
						}
						t.Errorf("%s: relative error %.3g > %g (vs float64: CPU %.3g, CUDA %.3g)", o.Name, r, cudaTol, ec, eg)
						continue
					}
					t.Errorf("%s: relative error %.3g > %g", o.Name, r, cudaTol)
				}
			}
			if ref != nil {
				t.Logf("RESULT vs PyTorch float64 (%d gradients): max relative error CPU fp32 %.3g, CUDA fp32 %.3g", len(ref)-1, worstC64, worstG64)
			}
			li := cpu.OutputIndex(grad.LossName)
			t.Logf("RESULT cuda-vs-cpu %s batch %d %dx%d: %d outputs (%d gradients), loss cpu %.7g cuda %.7g, max relative error %.3g (%s); step cpu %v, cuda %v",
				tc.name, tc.batch, tc.size, tc.size, len(cpu.Outputs), grads, want[li].Float32[0], got[li].Float32[0], worst, worstName, cpuT.Round(time.Millisecond), roundAll(gpuT))
			reportPlacement(t, prof)
		})
	}
}

// trainingFeeds makes the inputs of one step: the parameters' own values, a
// seeded random image batch, seeded random targets.
func trainingFeeds(t *testing.T, s *runtime.Session, gs *grad.Graphs, batch, size int64) []*runtime.Tensor {
	t.Helper()
	params := map[string]*runtime.Tensor{}
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		params[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
	}
	classes := int64(2)
	for _, o := range gs.Manifest.Training.Outputs {
		if len(gs.Manifest.ModelOutputs) > 0 && o.Name == gs.Manifest.ModelOutputs[0] {
			classes = o.Shape[1]
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var feeds []*runtime.Tensor
	for _, x := range s.Inputs {
		switch {
		case x.Name == grad.TargetName:
			v := make([]int64, batch*size*size)
			for i := range v {
				v[i] = rng.Int64N(classes)
			}
			feeds = append(feeds, runtime.NewInt64([]int64{batch, size, size}, v))
		case params[x.Name] != nil:
			feeds = append(feeds, params[x.Name])
		case x.Name == grad.LossScaleName:
			feeds = append(feeds, runtime.NewFloat32([]int64{1}, []float32{1}))
		default:
			v := make([]float32, batch*3*size*size)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			feeds = append(feeds, runtime.NewFloat32([]int64{batch, 3, size, size}, v))
		}
	}
	return feeds
}

// torchReference returns PyTorch's float64 loss and gradients of every
// parameter (scripts/torch_grads.py interprets the ONNX graph in float64),
// keyed by the training graph's output names, or nil where torch is not at
// hand ($SEGTUNE_TORCH_PYTHON names a Python with torch and onnx).
func torchReference(t *testing.T, m *onnx.Model, s *runtime.Session, feeds []*runtime.Tensor) map[string][]float64 {
	t.Helper()
	script := testassets.FindUp(filepath.Join("scripts", "torch_grads.py"))
	if script == "" || m.Path == "" {
		return nil
	}
	if out, err := exec.Command(torchPython, "-c", "import torch, onnx").CombinedOutput(); err != nil {
		t.Logf("no PyTorch reference: %s cannot import torch and onnx: %s", torchPython, lastLine(out))
		return nil
	}
	image := onnx.DataInputs(m.Proto.Graph)[0].GetName()
	var x []float32
	var shape []int64
	var target []int64
	var params []string
	for i, in := range s.Inputs {
		switch in.Name {
		case grad.TargetName:
			target = feeds[i].Int64
		case grad.LossScaleName:
		case image:
			x, shape = feeds[i].Float32, feeds[i].Shape
		default:
			params = append(params, in.Name)
		}
	}
	if x == nil {
		return nil
	}
	res := runTorch(t, script, m.Path, x, shape, target, params)
	out := map[string][]float64{grad.LossName: {res.Loss}}
	for _, p := range params {
		if g := res.Tensors[grad.GradPrefix+p]; g != nil {
			out[grad.GradPrefix+p] = g
		}
	}
	return out
}

// relErr64 is ‖a − b‖ / ‖b‖ for a float32 result against a float64 one.
func relErr64(a []float32, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, n float64
	for i := range a {
		e := float64(a[i]) - b[i]
		d += e * e
		n += b[i] * b[i]
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// relErr is ‖a − b‖ / ‖b‖ in float64 (‖a − b‖ when b is zero).
func relErr(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, n float64
	for i := range a {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// reportPlacement logs how many nodes of the profiled session (profile
// under prefix) ran on each execution provider and which ran on the CPU.
func reportPlacement(t *testing.T, prefix string) {
	t.Helper()
	p, err := runtime.ProfilePlacement(prefix)
	if err != nil {
		t.Logf("%v", err)
		return
	}
	names := p.CPUNodes
	if len(names) > 40 {
		names = append(names[:40:40], "…")
	}
	t.Logf("PLACEMENT %v; on the CPU by op %v: %v", p.PerEP, p.CPUOps, names)
}
