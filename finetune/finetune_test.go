package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func epochLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	recs, err := history.Read(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, r := range history.Filter(recs, history.KindEpoch) {
		out = append(out, r.Loss)
	}
	return out
}

func TestToyRunLearnsAndExports(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	out := filepath.Join(dir, "run")
	var epochs []EpochInfo
	res, err := Train(context.Background(), cfg, out, false, Hooks{OnEpoch: func(e EpochInfo) { epochs = append(epochs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	losses := epochLosses(t, out)
	if len(losses) != 4 || !(losses[3] < losses[0]) {
		t.Fatalf("epoch losses %v: want 4 falling", losses)
	}
	if res.BestMIoU == nil || *res.BestMIoU < 0.5 || epochs[3].Val == nil {
		t.Fatalf("best val mIoU %v", res.BestMIoU)
	}
	for _, f := range []string{"last.ckpt", "best.ckpt", HistoryFile, PlotFile, ModelFile, ConfigFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	assertExportMatchesTraining(t, filepath.Join(out, "last.ckpt"), cfg)
}

// The resumed run must end with exactly the weights of an uninterrupted
// one: same data order, augmentation, optimiser state and schedule.
func TestResumeIsExact(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	assertResumeIsExact(t, dir, toyConfig(t, dir))
}

// assertResumeIsExact runs cfg whole, and again in two parts (its first
// two epochs, then resumed), and requires the same end state and history.
func assertResumeIsExact(t *testing.T, dir string, cfg Config) {
	t.Helper()
	full := filepath.Join(dir, "full")
	if _, err := Train(context.Background(), cfg, full, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part")
	short := cfg
	short.Epochs = 2
	if _, err := Train(context.Background(), short, part, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Train(context.Background(), cfg, part, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	assertSameWeights(t, filepath.Join(full, "last.ckpt"), filepath.Join(part, "last.ckpt"))
	if a, b := epochLosses(t, full), epochLosses(t, part); !slices.Equal(a, b) {
		t.Errorf("histories differ: %v vs %v", a, b)
	}
}

// Cancelling (Ctrl-C) mid-epoch saves a checkpoint at that step, and
// resuming from it also ends with the uninterrupted run's weights.
func TestInterruptMidEpochAndResume(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	full := filepath.Join(dir, "full")
	if _, err := Train(context.Background(), cfg, full, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Train(ctx, cfg, part, false, Hooks{OnStep: func(s StepInfo) {
		if s.Step == 5 { // epoch 1, step 2 of 3
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	ck, err := checkpoint.Load(filepath.Join(part, "last.ckpt"))
	if err != nil || ck.Step != 5 {
		t.Fatalf("checkpoint at step %v, err %v", ck.Step, err)
	}
	if _, err := Train(context.Background(), cfg, part, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	assertSameWeights(t, filepath.Join(full, "last.ckpt"), filepath.Join(part, "last.ckpt"))
}

// A process killed with SIGKILL mid-epoch loses nothing but the steps since
// the last checkpoint: resuming ends with the uninterrupted run's weights.
func TestSIGKILLMidEpochResumes(t *testing.T) {
	runtimetest.Require(t)
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 40
	full := filepath.Join(dir, "full")
	if _, err := Train(context.Background(), cfg, full, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildTrain$")
	cmd.Env = append(os.Environ(), "SEGTUNE_CHILD_DIR="+dir, "SEGTUNE_CHILD_OUT="+part)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until a few epochs are checkpointed, then kill mid-run.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := checkpoint.ReadInfo(filepath.Join(part, "last.ckpt"))
		if err == nil && info.Epoch >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("child made no progress")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(37 * time.Millisecond) // land somewhere inside an epoch
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	info, err := checkpoint.ReadInfo(filepath.Join(part, "last.ckpt"))
	if err != nil {
		t.Fatalf("checkpoint after SIGKILL: %v", err)
	}
	if info.Step >= int64(cfg.Epochs*3) {
		t.Skip("the child finished before it was killed")
	}
	t.Logf("killed after step %d", info.Step)
	if _, err := Train(context.Background(), cfg, part, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	assertSameWeights(t, filepath.Join(full, "last.ckpt"), filepath.Join(part, "last.ckpt"))
}

// TestChildTrain is the process TestSIGKILLMidEpochResumes kills.
func TestChildTrain(t *testing.T) {
	dir, out := os.Getenv("SEGTUNE_CHILD_DIR"), os.Getenv("SEGTUNE_CHILD_OUT")
	if dir == "" {
		t.Skip("only run as a child of TestSIGKILLMidEpochResumes")
	}
	runtimetest.Require(t)
	cfg := toyConfig(t, dir)
	cfg.Epochs = 40
	Train(context.Background(), cfg, out, false, Hooks{})
}

func assertSameWeights(t *testing.T, a, b string) {
	t.Helper()
	ca, err := checkpoint.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := checkpoint.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Step != cb.Step || len(ca.Weights) != len(cb.Weights) {
		t.Fatalf("steps %d vs %d", ca.Step, cb.Step)
	}
	for i := range ca.Weights {
		if !slices.Equal(ca.Weights[i].Data, cb.Weights[i].Data) {
			t.Fatalf("weights %q differ after resuming", ca.Weights[i].Name)
		}
	}
	if !slices.Equal(ca.RegularizerState, cb.RegularizerState) {
		t.Fatalf("regularizer states differ after resuming")
	}
}

func TestBadDataNamesTheFile(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	bad := filepath.Join(cfg.Train.Images, "005.png")
	os.WriteFile(bad, []byte("not a png"), 0o644)
	_, err := Train(context.Background(), cfg, filepath.Join(dir, "run"), false, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "005.png") {
		t.Fatalf("err = %v, want it to name 005.png", err)
	}
	cfg.SkipBad = true
	var log strings.Builder
	if _, err := Train(context.Background(), cfg, filepath.Join(dir, "run2"), false, Hooks{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "005.png") {
		t.Errorf("no warning naming the skipped file: %q", log.String())
	}
}

// A new run must not overwrite an earlier run's checkpoints.
func TestRefusesToOverwriteARun(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(out, "last.ckpt"))
	_, err := Train(context.Background(), cfg, out, false, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("err = %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "last.ckpt"))
	if !slices.Equal(before, after) {
		t.Fatal("the earlier checkpoint changed")
	}
}

// TestToyRunLearnsWithEachLoss: every --loss trains the toy model (its
// loss falls and it segments), and the training graph carries the terms
// asked for; a bad name or γ is refused before any work.
func TestToyRunLearnsWithEachLoss(t *testing.T) {
	runtimetest.Require(t)
	for _, loss := range []string{"focal", "dice", "lovasz", "ce+dice", "ce+lovasz", "focal+dice"} {
		t.Run(loss, func(t *testing.T) {
			dir := t.TempDir()
			cfg := toyConfig(t, dir)
			cfg.Loss, cfg.Epochs = loss, 3
			out := filepath.Join(dir, "run")
			res, err := Train(context.Background(), cfg, out, false, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			losses := epochLosses(t, out)
			if len(losses) != 3 || !(losses[2] < losses[0]) {
				t.Errorf("epoch losses %v: want 3 falling", losses)
			}
			if res.BestMIoU == nil || *res.BestMIoU < 0.4 {
				t.Errorf("best val mIoU %v", res.BestMIoU)
			}
		})
	}
	for _, c := range []struct {
		loss  string
		gamma float64
	}{{"hinge", 0}, {"focal", -1}, {"focal", 11}, {"focal", math.NaN()}} {
		cfg := toyConfig(t, t.TempDir())
		cfg.Loss, cfg.FocalGamma = c.loss, c.gamma
		if err := cfg.validate(); err == nil {
			t.Errorf("loss %q γ %v accepted", c.loss, c.gamma)
		}
	}
}

// TestToyRunWritesTensorBoard: the run's records reach TensorBoard event
// files in tb/ (read back by the independent reader of internal/tfevents),
// and a resumed run marks where it restarts, so TensorBoard drops the
// steps it repeats.
func TestToyRunWritesTensorBoard(t *testing.T) {
	runtimetest.Require(t)
	py := testassets.RequirePython(t, "google.protobuf")
	reader := testassets.FindUp("internal/tfevents/testdata/read_events.py")
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	type event struct {
		Step       int64 `json:"step"`
		SessionLog int   `json:"session_log"`
		Summary    []struct {
			Tag string `json:"tag"`
		} `json:"summary"`
	}
	read := func() (tags map[string]int, restarts []int64) {
		tags = map[string]int{}
		files, _ := filepath.Glob(filepath.Join(out, TensorBoardDir, "events.out.tfevents.*"))
		for _, f := range files {
			b, err := exec.Command(py, reader, f).Output()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var evs []event
			if err := json.Unmarshal(b, &evs); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				for _, v := range e.Summary {
					tags[v.Tag]++
				}
				if e.SessionLog == 1 {
					restarts = append(restarts, e.Step)
				}
			}
		}
		return tags, restarts
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	steps := len(history.Filter(recs, history.KindStep))
	tags, restarts := read()
	if tags["step/loss"] != steps || tags["step/lr"] != steps || tags["epoch/val_miou"] != 2 || len(restarts) != 0 {
		t.Fatalf("TensorBoard tags %v, restarts %v; want %d steps and 2 epochs", tags, restarts, steps)
	}
	cfg.Epochs = 3
	if _, err := Train(context.Background(), cfg, out, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	tags, restarts = read()
	if tags["epoch/val_miou"] != 3 || len(restarts) != 1 || restarts[0] != int64(steps) {
		t.Errorf("after resuming: tags %v, restarts %v; want 3 epochs and a restart at step %d", tags, restarts, steps)
	}
}

// A configuration from a file (a hand-edited config.json replayed with
// --config) meets the checks its flags would: a hostile round found
// threads −4, a size threshold of −5 and a scale factor of 0 accepted.
func TestValidateChecksValuesFlagsRangeCheck(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"threads":        func(c *Config) { c.Threads = -4 },
		"size threshold": func(c *Config) { c.Size.Threshold = -5 },
		"NaN threshold":  func(c *Config) { c.Size.Threshold = math.NaN() },
		"scale factor":   func(c *Config) { c.Preprocess.Resize, c.Preprocess.ScaleFactor = "scale", 0 },
	} {
		cfg := toyConfig(t, t.TempDir())
		if err := cfg.validate(); err != nil {
			t.Fatalf("the toy config: %v", err)
		}
		edit(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
