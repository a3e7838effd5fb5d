package finetune

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
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
	again, err := lockRunDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
}

func TestSecondTrainIntoALockedFolderFailsAtOnce(t *testing.T) {
	requireORT(t)
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
	cfg := Config{Network: NetworkSpec{BaseModel: filepath.Join(dir, "absent.onnx")}}
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
