package finetune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// Defect: two finetune runs into one --out both ran and mixed their files.
func TestRunFolderIsLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	first, err := lockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock conflicts between open file descriptions, so a second lock in
	// this process stands in for a second segtune process.
	_, err = lockRunDir(dir)
	if err == nil || !strings.Contains(err.Error(), "in use by another segtune finetune run") ||
		!strings.Contains(err.Error(), "process "+itoa(os.Getpid())) {
		t.Fatalf("second lock: err = %v", err)
	}
	first.release()
	stale := filepath.Join(dir, ".metrics.jsonl.tmp-99999999-1") // left by a killed run
	os.WriteFile(stale, nil, 0o644)
	again, err := lockRunDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a killed run's temporary file was left in the run folder")
	}
}

func TestSecondTrainIntoALockedFolderFailsAtOnce(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	out := filepath.Join(dir, "run")
	held, err := lockRunDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer held.release()
	_, err = Train(context.Background(), cfg, out, false, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("err = %v", err)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if e.Name() != LockFile {
			t.Errorf("the refused run wrote %s", e.Name())
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Defect: a folder with best.ckpt but no last.ckpt was reused by a new run,
// which ranked against and exported the earlier run's network.
func TestLeftoverBestIsNeverReused(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run")
	os.MkdirAll(out, 0o755)
	stale := filepath.Join(out, checkpoint.BestName)
	old := &checkpoint.Checkpoint{Metrics: map[string]float64{"val_miou": 0.99},
		Weights: []checkpoint.Tensor{{Name: "w", Shape: []int64{1}, Data: []float32{1}}}}
	if err := checkpoint.Save(stale, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(stale)
	// The model is never read (the folder is refused first), but it must
	// exist: a run refuses a path that names nothing before anything else.
	model := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Network: NetworkSpec{BaseModel: model}}
	for _, resume := range []bool{false, true} {
		_, err := Train(context.Background(), cfg, out, resume, Hooks{})
		if err == nil || !strings.Contains(err.Error(), "holds checkpoints of an earlier run (best.ckpt)") {
			t.Errorf("resume=%v: err = %v", resume, err)
		}
	}
	after, err := os.ReadFile(stale)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the earlier run's best.ckpt changed or went (%v)", err)
	}
}

// Defect: a checkpoint was not tied to its base model's content, so a
// replaced base graph was silently used by export and resume.
func TestReplacedBaseModelIsRefused(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	ckPath := filepath.Join(out, checkpoint.LastName)
	ck, err := checkpoint.Load(ckPath)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := regfile.SHA256(cfg.Network.BaseModel); ck.BaseSHA256 != want || ck.RunID == "" {
		t.Fatalf("checkpoint records base %q run %q; want base %q and a run id", ck.BaseSHA256, ck.RunID, want)
	}
	// Another graph at the base path: same weights, different file.
	m, err := onnx.Load(cfg.Network.BaseModel)
	if err != nil {
		t.Fatal(err)
	}
	m.Proto.ProducerName = proto.String("someone else")
	if err := m.Save(cfg.Network.BaseModel); err != nil {
		t.Fatal(err)
	}
	err = Export(ckPath, "", filepath.Join(dir, "x.onnx"))
	if err == nil || !strings.Contains(err.Error(), "is not the base model") || !strings.Contains(err.Error(), cfg.Network.BaseModel) {
		t.Errorf("export: err = %v", err)
	}
	cfg.Epochs = 2
	_, err = Train(context.Background(), cfg, out, true, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "is not the base model") {
		t.Errorf("resume: err = %v", err)
	}
	// --model naming another file: the error names that file.
	other := filepath.Join(dir, "other.onnx")
	m.Proto.ProducerName = proto.String("a third")
	m.Save(other)
	err = Export(ckPath, other, filepath.Join(dir, "x.onnx"))
	if err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("export --model other: err = %v", err)
	}
	// A checkpoint from before digests were recorded still loads, with a warning.
	ck.BaseSHA256 = ""
	legacy := filepath.Join(dir, "legacy.ckpt")
	if err := checkpoint.Save(legacy, ck); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	old := export.Warnings
	export.Warnings = &warn
	defer func() { export.Warnings = old }()
	if err := Export(legacy, "", filepath.Join(dir, "y.onnx")); err != nil {
		t.Errorf("legacy checkpoint: %v", err)
	}
	if !strings.Contains(warn.String(), "records no SHA-256") {
		t.Errorf("no warning for a checkpoint without a digest: %q", warn.String())
	}
}

// Defect: --resume silently ignored every changed flag but epochs, steps,
// device and threads (--lr included).
func TestResumeRefusesChangedSettingsAndAppliesLR(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	changed := cfg
	changed.Batch, changed.Seed, changed.LR, changed.Epochs = 2, 99, 0.001, 2
	changed.Explicit = []string{"batch", "seed", "lr", "epochs", "out", "resume"}
	_, err := Train(context.Background(), changed, out, true, Hooks{})
	var rc *ResumeConflictError
	if !errors.As(err, &rc) || !slices.Equal(rc.Refused, []SettingChange{{"batch", "2", "4"}, {"seed", "99", "3"}}) ||
		!strings.Contains(err.Error(), "batch (the run has 4), seed (the run has 3);") || strings.Contains(err.Error(), "--") {
		t.Fatalf("err = %v", err)
	}
	changed.Explicit = []string{"lr", "epochs", "out", "resume"}
	var log bytes.Buffer
	if _, err := Train(context.Background(), changed, out, true, Hooks{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "resuming with epochs 2 (was 1), lr 0.001 (was 0.02)\n") || strings.Contains(log.String(), "--") {
		t.Errorf("log: %q", log.String())
	}
	ck, err := checkpoint.Load(filepath.Join(out, checkpoint.LastName))
	if err != nil {
		t.Fatal(err)
	}
	var saved Config
	if err := json.Unmarshal(ck.Config, &saved); err != nil || saved.LR != 0.001 || saved.Batch != 4 || saved.Epochs != 2 {
		t.Errorf("checkpoint config lr %v batch %v epochs %v (%v)", saved.LR, saved.Batch, saved.Epochs, err)
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	ev := history.Filter(recs, KindResume)
	if len(ev) != 1 || ev[0].Extra["new_lr"] != 0.001 || ev[0].Extra["prev_new_lr"] != 0.02 || ev[0].Extra["epochs"] != 2 {
		t.Errorf("resume events %+v", ev)
	}
	for _, r := range history.Filter(recs, history.KindStep) {
		if r.Epoch == 1 && r.LR != 0.001 {
			t.Fatalf("step %d ran at lr %v", r.Step, r.LR)
		}
	}
}

// Defect: the divergence advice named a last.ckpt that was never written,
// and suggested a --lr that --resume ignored.
func TestDivergenceAdviceNamesExistingCheckpoint(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	// Pixel values scaled by 1e8 make SGD at the largest learning rate
	// (10) diverge within an epoch; at 1e-12 it does not.
	wildInputs := func(c *Config) { c.Optimizer, c.Preprocess.ValueScale = "sgd", 1e8 }
	cfg := toyConfig(t, dir)
	wildInputs(&cfg)
	cfg.Epochs, cfg.LR = 1, 10
	_, err := Train(context.Background(), cfg, filepath.Join(dir, "fresh"), false, Hooks{})
	var de *DivergedError
	if !errors.As(err, &de) || de.Checkpoint != "" || !strings.Contains(err.Error(), "no checkpoint was written") ||
		strings.Contains(err.Error(), "last.ckpt") || strings.Contains(err.Error(), "--") {
		t.Fatalf("diverging before any checkpoint: err = %v", err)
	}
	cfg = toyConfig(t, dir)
	wildInputs(&cfg)
	cfg.Epochs, cfg.LR = 1, 1e-12 // the weights barely move: lr 10 then diverges as from the start
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	wild := cfg
	wild.Epochs, wild.LR, wild.Explicit = 2, 10, []string{"lr", "epochs"}
	_, err = Train(context.Background(), wild, out, true, Hooks{})
	if !errors.As(err, &de) || de.Checkpoint != filepath.Join(out, "last.ckpt") || de.Dir != out ||
		!strings.Contains(err.Error(), "run_dir "+out+", resume, lr 1") || strings.Contains(err.Error(), "--") {
		t.Fatalf("diverging after a checkpoint: err = %v", err)
	}
	// The advice works: --resume with a lower --lr continues.
	wild.LR = 1e-12
	if _, err := Train(context.Background(), wild, out, true, Hooks{}); err != nil {
		t.Fatalf("following the advice: %v", err)
	}
}

// Defect: a bad line in metrics.jsonl was blamed on last.ckpt.
func TestBadHistoryLineNamesTheHistoryFile(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, HistoryFile)
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	lines[1] = "{not json\n"
	os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
	cfg.Epochs = 2
	_, err := Train(context.Background(), cfg, out, true, Hooks{})
	if err == nil || !strings.Contains(err.Error(), path+", line 2:") || strings.Contains(err.Error(), "last.ckpt") {
		t.Fatalf("err = %v", err)
	}
}

// Defect: finetune wrote model.onnx, config.json and metrics.jsonl into
// any --out, replacing a user's files of those names. A folder that holds
// files is now a run folder only when segtune marked it (its lock file) or
// it holds checkpoints; anything else is refused before a file is written.
func TestRunFolderMustBeNewEmptyOrARun(t *testing.T) {
	dir := t.TempDir()
	user := map[string]string{ModelFile: "my model", ConfigFile: "{}", HistoryFile: "my log\n"}
	foreign := filepath.Join(dir, "mine")
	os.Mkdir(foreign, 0o755)
	for name, body := range user {
		os.WriteFile(filepath.Join(foreign, name), []byte(body), 0o644)
	}
	// The model is never read (the folder is refused first), but it must
	// exist: a run refuses a path that names nothing before anything else.
	model := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Network: NetworkSpec{BaseModel: model}}
	for _, resume := range []bool{false, true} {
		_, err := Train(context.Background(), cfg, foreign, resume, Hooks{})
		var nr *NotRunDirError
		if !errors.As(err, &nr) || nr.Dir != foreign || !strings.Contains(err.Error(), "choose a new or empty folder") {
			t.Errorf("resume=%v: err = %v, want a NotRunDirError for %s", resume, err, foreign)
		}
	}
	for name, body := range user {
		if got, _ := os.ReadFile(filepath.Join(foreign, name)); string(got) != body {
			t.Errorf("%s now holds %q", name, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(foreign, LockFile)); err == nil {
		t.Error("the refused folder was marked as a run")
	}

	// New, empty, and a run's own folder (here one whose run was killed
	// before its first checkpoint, leaving config.json and metrics.jsonl).
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	own := filepath.Join(dir, "own")
	l, err := lockRunDir(own)
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	for name, body := range user {
		os.WriteFile(filepath.Join(own, name), []byte(body), 0o644)
	}
	for _, d := range []string{filepath.Join(dir, "new"), empty, own} {
		l, err := lockRunDir(d)
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		l.release()
	}
}
