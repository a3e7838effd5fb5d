package finetune

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestResidentRunMatchesHostRun: fine-tuning with the training state in
// the session's memory (--resident on, here the CPU provider's) ends with
// the weights of the host loop, validation, checkpoints and export
// included, within float32 rounding of the two optimisers.
func TestResidentRunMatchesHostRun(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	assertResidentMatchesHost(t, dir, toyConfig(t, dir))
}

// assertResidentMatchesHost runs cfg in both forms and compares the last
// checkpoints and the resident run's export.
func assertResidentMatchesHost(t *testing.T, dir string, cfg Config) {
	t.Helper()
	host, dev := cfg, cfg
	host.Resident, dev.Resident = "off", "on"
	if _, err := Train(context.Background(), host, filepath.Join(dir, "host"), false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Train(context.Background(), dev, filepath.Join(dir, "resident"), false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	a, err := checkpoint.Load(filepath.Join(dir, "host", "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Load(filepath.Join(dir, "resident", "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Step != b.Step || a.Step == 0 || len(a.Weights) != len(b.Weights) {
		t.Fatalf("steps %d vs %d, %d vs %d weights", a.Step, b.Step, len(a.Weights), len(b.Weights))
	}
	worst := 0.0
	for i := range a.Weights {
		for j := range a.Weights[i].Data {
			worst = max(worst, math.Abs(float64(a.Weights[i].Data[j]-b.Weights[i].Data[j])))
		}
	}
	t.Logf("max |resident − host| after %d steps: %.3g", a.Step, worst)
	if worst > 1e-5 || math.IsNaN(worst) {
		t.Errorf("weights differ by %.3g", worst)
	}
	if a.Optimizer.Step != b.Optimizer.Step || len(a.Optimizer.Buffers) != len(b.Optimizer.Buffers) {
		t.Errorf("optimiser states differ: step %d vs %d, %d vs %d buffers", a.Optimizer.Step, b.Optimizer.Step,
			len(a.Optimizer.Buffers), len(b.Optimizer.Buffers))
	}
	assertExportMatchesTraining(t, filepath.Join(dir, "resident", "last.ckpt"), dev)
}

// TestResidentResumeIsExact: a resident run stopped after two epochs and
// resumed ends bit for bit where the uninterrupted one does; and a run
// resumed in the other form continues from the same checkpoint.
func TestResidentResumeIsExact(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Resident = "on"
	assertResumeIsExact(t, dir, cfg)
}

// TestResidentRegularized runs the size regularizer (its inputs fed each
// step, the size scores read back, the head boxed on the host after every
// update) in the resident form: the host run's weights, and exact resume.
func TestResidentRegularized(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "epoch")
	assertResidentMatchesHost(t, filepath.Join(dir, "match"), cfg)
	cfg.Resident = "on"
	assertResumeIsExact(t, filepath.Join(dir, "resume"), cfg)
}

// TestHalfPrecisionRun: --precision fp16 trains the toy model in both
// forms (float16 convolutions behind Casts; ONNX Runtime's CPU provider
// runs them through its own float32 fallback), records the loss scale in
// metrics.jsonl, and resumes bit for bit, the loss scale included.
func TestHalfPrecisionRun(t *testing.T) {
	runtimetest.Require(t)
	// A scale large enough to overflow the first steps' float16
	// gradients, so that skipping and halving are exercised and resumed.
	defer func(s float64) { trainer.InitialLossScale = s }(trainer.InitialLossScale)
	trainer.InitialLossScale = 1 << 19
	for _, res := range []string{"off", "on"} {
		t.Run("resident-"+res, func(t *testing.T) {
			dir := t.TempDir()
			cfg := toyConfig(t, dir)
			cfg.Precision, cfg.Resident = "fp16", res
			out := filepath.Join(dir, "run")
			if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
				t.Fatal(err)
			}
			if l := epochLosses(t, out); len(l) != 4 || !(l[3] < l[0]) {
				t.Fatalf("epoch losses %v: want 4 falling", l)
			}
			recs, err := history.Read(filepath.Join(out, HistoryFile))
			if err != nil {
				t.Fatal(err)
			}
			steps := history.Filter(recs, history.KindStep)
			skipped := 0
			for _, r := range steps {
				if r.Extra["skipped"] == 1 {
					skipped++
				}
			}
			if skipped == 0 || skipped > 4 {
				t.Errorf("%d steps skipped for overflow at a starting scale of 2^19", skipped)
			}
			want := trainer.InitialLossScale / math.Pow(2, float64(skipped))
			if len(steps) == 0 || steps[len(steps)-1].Extra["loss_scale"] != want {
				t.Fatalf("last loss scale %v after %d skipped steps, want %v", steps[len(steps)-1].Extra["loss_scale"], skipped, want)
			}
			t.Logf("%d of %d steps skipped for overflow", skipped, len(steps))
			assertResumeIsExact(t, filepath.Join(dir, "resume"), cfg)
		})
	}
}

// TestModesCheckedBeforeWork: bad --precision and --resident values are
// refused by validate, before any file is read.
func TestModesCheckedBeforeWork(t *testing.T) {
	base := Config{Network: NetworkSpec{BaseModel: "m.onnx"}, Train: DataSpec{Images: "i", Masks: "m"},
		Batch: 1, Height: 8, Width: 8, Epochs: 1, LR: 1e-3, Ignore: 255}
	for _, c := range []struct{ precision, resident, want string }{
		{"fp8", "", "precision fp8: "},
		{"", "sometimes", "resident sometimes: "},
	} {
		cfg := base
		cfg.Precision, cfg.Resident = c.precision, c.resident
		err := cfg.validate()
		var se *setting.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &se) {
			t.Errorf("precision %q resident %q: %v, want a setting.Error naming %s", c.precision, c.resident, err, c.want)
		}
	}
	if err := base.validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestCUDAGraphIgnoredOnTheCPU: Config.CUDAGraph on the CPU, in either
// form of the training state, trains exactly as without it after one line
// saying it is ignored, and the run's config.json records that it was
// asked for.
func TestCUDAGraphIgnoredOnTheCPU(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	base := toyConfig(t, dir)
	base.Epochs, base.Device = 1, "cpu"
	for _, res := range []string{"on", "off"} {
		plain, graph := base, base
		plain.Resident, graph.Resident, graph.CUDAGraph = res, res, true
		var log bytes.Buffer
		pd, gd := filepath.Join(dir, res, "plain"), filepath.Join(dir, res, "graph")
		if _, err := Train(context.Background(), plain, pd, false, Hooks{}); err != nil {
			t.Fatal(err)
		}
		if _, err := Train(context.Background(), graph, gd, false, Hooks{Log: &log}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(log.String(), "CUDA graphs ignored"); n != 1 {
			t.Errorf("resident %s: %d lines saying CUDA graphs are ignored in %q, want 1", res, n, log.String())
		}
		a, err := checkpoint.Load(filepath.Join(pd, "last.ckpt"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := checkpoint.Load(filepath.Join(gd, "last.ckpt"))
		if err != nil {
			t.Fatal(err)
		}
		if a.Step == 0 || a.Step != b.Step {
			t.Fatalf("resident %s: steps %d and %d", res, a.Step, b.Step)
		}
		for i := range a.Weights {
			if !slices.Equal(a.Weights[i].Data, b.Weights[i].Data) {
				t.Fatalf("resident %s: weight %d differs with CUDA graphs asked for on the CPU", res, i)
			}
		}
		cfg, err := os.ReadFile(filepath.Join(gd, ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(cfg, []byte(`"cuda_graph": true`)) {
			t.Errorf("resident %s: config.json does not record cuda_graph: %s", res, cfg)
		}
	}
}
