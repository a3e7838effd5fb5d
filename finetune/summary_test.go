package finetune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A finished run's summary gives the best val mIoU and names the outputs
// its folder holds, in the order RunOutputs lists them.
func TestWriteSummary(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"last.ckpt", "model.onnx"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	best := 0.61234
	var b strings.Builder
	if err := (&Result{Dir: dir, BestMIoU: &best}).WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := "\nbest val mIoU 0.6123; outputs in " + dir + " (model.onnx, last.ckpt)\n"
	if b.String() != want {
		t.Errorf("summary %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := (&Result{Dir: dir}).WriteSummary(&b); err != nil || strings.Contains(b.String(), "best") {
		t.Errorf("a run without validation: %q, %v", b.String(), err)
	}
}
