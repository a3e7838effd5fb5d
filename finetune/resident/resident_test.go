package resident

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

const (
	batch, size = 2, 32
	steps       = 20
)

// synthGraph compiles segtune's built-in DeepLabV3+ (0.9 M parameters) for
// training at batch×3×size×size, as finetune does for the CPU provider.
func synthGraph(t *testing.T) ([]byte, []Param, int64) {
	t.Helper()
	m, err := onnx.Parse(models.SynthModel, "segtune-synth.onnx")
	if err != nil {
		t.Fatal(err)
	}
	in := onnx.DataInputs(m.Proto.Graph)[0].GetName()
	gs, err := grad.Build(m, grad.Config{
		Prober:      ortprobe.Prober{Threads: 1},
		Trainable:   []string{"*"},
		InputShapes: map[string][]int64{in: {batch, 3, size, size}},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var params []Param
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		params = append(params, Param{Name: p.GetName(), Shape: p.GetDims(), Data: v})
	}
	classes := int64(2)
	for _, o := range gs.Manifest.Training.Outputs {
		if len(gs.Manifest.ModelOutputs) > 0 && o.Name == gs.Manifest.ModelOutputs[0] {
			classes = o.Shape[1]
		}
	}
	return data, params, classes
}

// batches makes seeded image batches and targets, one per step.
type batches struct {
	images  [][]float32
	targets [][]int64
}

func makeBatches(n int, classes int64) batches {
	rng := rand.New(rand.NewPCG(5, 6))
	var b batches
	for range n {
		x := make([]float32, batch*3*size*size)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]int64, batch*size*size)
		for i := range y {
			y[i] = rng.Int64N(classes)
		}
		b.images, b.targets = append(b.images, x), append(b.targets, y)
	}
	return b
}

// lrAt is a schedule that changes every step.
func lrAt(cfg optim.Config, step int) float64 {
	base := 0.05
	if cfg.Algorithm != optim.SGD {
		base = 1e-3
	}
	return base * (1 - float64(step)/(2*steps))
}

// hostLoop is today's loop: the training graph on host tensors, the
// gradients copied out, the Go optimiser.
func hostLoop(t *testing.T, data []byte, params []Param, cfg optim.Config, b batches) [][]float32 {
	t.Helper()
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ps := make([]*optim.Param, len(params))
	byName := map[string]*optim.Param{}
	for i, p := range params {
		ps[i] = &optim.Param{Name: p.Name, Shape: p.Shape, Data: append([]float32(nil), p.Data...)}
		byName[p.Name] = ps[i]
	}
	opt, err := optim.New(ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step := range steps {
		feeds := make([]*runtime.Tensor, len(s.Inputs))
		for i, in := range s.Inputs {
			switch {
			case byName[in.Name] != nil:
				p := byName[in.Name]
				feeds[i] = runtime.NewFloat32(p.Shape, p.Data)
			case in.Name == grad.TargetName:
				feeds[i] = runtime.NewInt64(in.Shape, b.targets[step])
			default:
				feeds[i] = runtime.NewFloat32(in.Shape, b.images[step])
			}
		}
		outs, err := s.Run(feeds...)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			p.Grad = outs[s.OutputIndex(grad.GradPrefix+p.Name)].Float32
		}
		if err := opt.Step(lrAt(cfg, step)); err != nil {
			t.Fatal(err)
		}
	}
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = p.Data
	}
	return out
}

func imageInput(tr *Trainer) string {
	for name := range tr.inputs {
		if name != grad.TargetName {
			return name
		}
	}
	return ""
}

// residentSteps runs steps [from, to) of the batches on tr.
func residentSteps(t *testing.T, tr *Trainer, cfg optim.Config, b batches, from, to int) {
	t.Helper()
	img := imageInput(tr)
	for step := from; step < to; step++ {
		if err := tr.SetInput(img, b.images[step]); err != nil {
			t.Fatal(err)
		}
		if err := tr.SetInput(grad.TargetName, b.targets[step]); err != nil {
			t.Fatal(err)
		}
		r, err := tr.Step(lrAt(cfg, step))
		if err != nil {
			t.Fatal(err)
		}
		if r.Skipped || math.IsNaN(r.Loss) {
			t.Fatalf("step %d: %+v", step, r)
		}
	}
}

// configs are the optimisers compared. Adam's and AdamW's eps is 1e-4, not
// PyTorch's 1e-8: Adam scales each element's step by 1/(√v + eps), so an
// element whose gradient is float rounding noise (~1e-10, here a weight of
// a dead unit) steps by ±lr in the direction of that noise, and two
// implementations that round differently part by O(lr) there after a few
// steps (3e-4 after 20 at eps 1e-8, measured). eps 1e-4 damps those
// elements and leaves the comparison to the update rule itself; the
// optimiser graph alone is checked at eps 1e-8 in optgraph.
func configs() map[string]optim.Config {
	sgd := optim.DefaultConfig(optim.SGD)
	sgd.WeightDecay = 1e-4
	adam := optim.DefaultConfig(optim.Adam)
	adam.Eps = 1e-4
	adamw := optim.DefaultConfig(optim.AdamW)
	adamw.NoDecay = optim.NoDecayVectors
	adamw.Eps = 1e-4
	adamw.MaxGradNorm = 1
	return map[string]optim.Config{"sgd": sgd, "adam": adam, "adamw": adamw}
}

// TestResidentMatchesHostLoop: 20 steps of the device-resident loop on the
// CPU provider give the weights of the host loop with the Go optimiser
// within 1e-6, for SGD, Adam and AdamW (decay groups, clipping).
func TestResidentMatchesHostLoop(t *testing.T) {
	runtimetest.Require(t)
	data, params, classes := synthGraph(t)
	b := makeBatches(steps, classes)
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			want := hostLoop(t, data, params, cfg, b)
			tr, err := New(data, params, cfg, Options{Session: runtime.Options{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			residentSteps(t, tr, cfg, b, 0, steps)
			got, err := tr.Params()
			if err != nil {
				t.Fatal(err)
			}
			worst, moved := 0.0, 0.0
			for i := range got {
				for j := range got[i] {
					worst = max(worst, math.Abs(float64(got[i][j]-want[i][j])))
					moved = max(moved, math.Abs(float64(want[i][j]-params[i].Data[j])))
				}
			}
			t.Logf("%s: max |resident − host| %.3g after %d steps (weights moved up to %.3g)", name, worst, steps, moved)
			if worst > 1e-6 || math.IsNaN(worst) {
				t.Errorf("%s: weights differ by %.3g after %d steps", name, worst, steps)
			}
			if moved < 1e-3 {
				t.Errorf("%s: the weights hardly moved (%.3g): the comparison says nothing", name, moved)
			}
			if tr.Steps() != steps {
				t.Errorf("steps = %d, want %d", tr.Steps(), steps)
			}
		})
	}
}

// TestResidentResumeIsExact: a run stopped after 8 steps, its state read
// back and restored into a fresh Trainer, ends bit for bit where an
// uninterrupted run does.
func TestResidentResumeIsExact(t *testing.T) {
	runtimetest.Require(t)
	data, params, classes := synthGraph(t)
	b := makeBatches(steps, classes)
	cfg := configs()["adamw"]
	opts := Options{Session: runtime.Options{Threads: 1}}
	whole, err := New(data, params, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	residentSteps(t, whole, cfg, b, 0, 12)
	wantParams, err := whole.Params()
	if err != nil {
		t.Fatal(err)
	}
	wantState, err := whole.State()
	if err != nil {
		t.Fatal(err)
	}

	first, err := New(data, params, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	residentSteps(t, first, cfg, b, 0, 7) // odd: the state sits in the second buffer set
	ps, err := first.Params()
	if err != nil {
		t.Fatal(err)
	}
	st, err := first.State()
	first.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Through package optim, as a checkpoint holds it: the format is
	// optim's whichever side kept the state.
	host := make([]*optim.Param, len(params))
	for i, p := range params {
		host[i] = &optim.Param{Name: p.Name, Shape: p.Shape, Data: ps[i]}
	}
	o, err := optim.New(host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetState(st); err != nil {
		t.Fatal(err)
	}
	second, err := New(data, params, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.WriteParams(ps); err != nil {
		t.Fatal(err)
	}
	if err := second.SetState(o.State()); err != nil {
		t.Fatal(err)
	}
	residentSteps(t, second, cfg, b, 7, 12)
	gotParams, err := second.Params()
	if err != nil {
		t.Fatal(err)
	}
	gotState, err := second.State()
	if err != nil {
		t.Fatal(err)
	}
	if gotState.Step != wantState.Step {
		t.Errorf("steps %d, want %d", gotState.Step, wantState.Step)
	}
	same := func(what string, a, b [][]float32) {
		for i := range a {
			for j := range a[i] {
				if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
					t.Fatalf("%s of parameter %d differs at %d: %v vs %v", what, i, j, a[i][j], b[i][j])
				}
			}
		}
	}
	same("weights", gotParams, wantParams)
	for i := range wantState.Buffers {
		same(wantState.Buffers[i].Slot+" of "+wantState.Buffers[i].Param, [][]float32{gotState.Buffers[i].Data}, [][]float32{wantState.Buffers[i].Data})
	}
	if err := second.SetState(&optim.State{Algorithm: optim.SGD}); err == nil {
		t.Error("an SGD state was accepted by an AdamW trainer")
	}
}

// TestResidentSkipsNonFiniteGradients: a NaN in the image makes the
// gradients non-finite; the step is reported skipped, uncounted, and the
// weights stay as they were.
func TestResidentSkipsNonFiniteGradients(t *testing.T) {
	runtimetest.Require(t)
	data, params, classes := synthGraph(t)
	b := makeBatches(2, classes)
	cfg := configs()["sgd"]
	tr, err := New(data, params, cfg, Options{Session: runtime.Options{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	residentSteps(t, tr, cfg, b, 0, 1)
	before, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	b.images[1][17] = float32(math.NaN())
	if err := tr.SetInput(imageInput(tr), b.images[1]); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetInput(grad.TargetName, b.targets[1]); err != nil {
		t.Fatal(err)
	}
	r, err := tr.Step(0.05)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Skipped || tr.Steps() != 1 {
		t.Fatalf("a NaN batch: %+v, steps %d; want a skipped, uncounted step", r, tr.Steps())
	}
	after, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		for j := range before[i] {
			if math.Float32bits(before[i][j]) != math.Float32bits(after[i][j]) {
				t.Fatalf("parameter %d changed at %d by a skipped step", i, j)
			}
		}
	}
}

// TestResidentGradScaleOneMatchesHostLoop: with Options.GradScale (mixed
// precision's unscaling) and a scale of 1, the resident loop is the host
// loop: the scale input is bound and multiplies, and nothing else changes.
func TestResidentGradScaleOneMatchesHostLoop(t *testing.T) {
	runtimetest.Require(t)
	data, params, classes := synthGraph(t)
	b := makeBatches(steps, classes)
	cfg := configs()["sgd"]
	want := hostLoop(t, data, params, cfg, b)
	tr, err := New(data, params, cfg, Options{Session: runtime.Options{Threads: 1}, GradScale: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.SetGradScale(1); err != nil {
		t.Fatal(err)
	}
	residentSteps(t, tr, cfg, b, 0, steps)
	got, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range got {
		for j := range got[i] {
			worst = max(worst, math.Abs(float64(got[i][j]-want[i][j])))
		}
	}
	if worst > 1e-6 || math.IsNaN(worst) {
		t.Errorf("weights differ by %.3g after %d steps", worst, steps)
	}
}

// TestResidentCUDAGraphOnTheCPU: CUDA graphs asked for where the steps run
// on the CPU are ignored with one line (device cpu: that they are
// ignored; device auto without CUDA: the CPU fallback's line alone), the
// bindings carry no graph id, and the steps are those of a trainer that
// was not asked. Bindings that do carry the graph ids a CUDA session would
// get (1 and 2, one per ping-pong set) pass them to every run, which the
// CPU provider ignores: the steps stay exact.
func TestResidentCUDAGraphOnTheCPU(t *testing.T) {
	runtimetest.Require(t)
	data, params, classes := synthGraph(t)
	const n = 4
	b := makeBatches(n, classes)
	cfg := configs()["sgd"]
	run := func(o Options, ids bool) ([][]float32, *Trainer) {
		tr, err := New(data, params, cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		if ids {
			for set := range 2 {
				if err := errors.Join(graphID(tr.bindTrain[set], true, set), graphID(tr.bindOpt[set], true, set)); err != nil {
					t.Fatal(err)
				}
			}
		}
		residentSteps(t, tr, cfg, b, 0, n)
		got, err := tr.Params()
		if err != nil {
			t.Fatal(err)
		}
		return got, tr
	}
	want, _ := run(Options{Session: runtime.Options{Threads: 1}}, false)
	for _, device := range []string{"cpu", "auto"} {
		var log bytes.Buffer
		got, tr := run(Options{Session: runtime.Options{Threads: 1, Device: device, Log: &log}, CUDAGraph: true}, false)
		if tr.Device() != runtime.DeviceCPU {
			t.Skipf("device %s runs on %s here", device, tr.Device())
		}
		if tg, og := tr.CUDAGraphs(); tg || og {
			t.Errorf("device %s: CUDA graphs reported on (%v, %v) on the CPU", device, tg, og)
		}
		lines := strings.Split(strings.TrimSpace(log.String()), "\n")
		wantLine := map[string]string{"cpu": "CUDA graphs ignored", "auto": "running on the CPU"}[device]
		if len(lines) != 1 || !strings.Contains(lines[0], wantLine) {
			t.Errorf("device %s: log %q, want one line saying %q", device, log.String(), wantLine)
		}
		for set, bd := range append(tr.bindTrain[:], tr.bindOpt[:]...) {
			if v, ok := bd.RunConfig(runtime.CUDAGraphIDKey); ok {
				t.Errorf("device %s: binding %d carries graph id %s on the CPU", device, set, v)
			}
		}
		assertSame(t, "device "+device+" with CUDA graphs asked for", got, want)
	}
	got, tr := run(Options{Session: runtime.Options{Threads: 1}}, true)
	for set := range 2 {
		for _, bd := range []*runtime.Binding{tr.bindTrain[set], tr.bindOpt[set]} {
			if v, _ := bd.RunConfig(runtime.CUDAGraphIDKey); v != strconv.Itoa(set+1) {
				t.Errorf("set %d's binding has graph id %q, want %d", set, v, set+1)
			}
		}
	}
	assertSame(t, "bindings with graph ids", got, want)
}

func assertSame(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("%s: parameter %d [%d] = %v, want %v", what, i, j, got[i][j], want[i][j])
			}
		}
	}
}
