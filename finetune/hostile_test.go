package finetune

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
