package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx/quantize"
)

// The libraries name a setting by its field; the user reads the flag that
// set it, with the library's reason, and the typed error stays reachable.
func TestLibraryErrorsNameTheFlag(t *testing.T) {
	isolateModelSearch(t, "")
	out := filepath.Join(t.TempDir(), "run")
	for _, c := range []struct{ flag, value, want string }{
		{"--precision", "bf16", "--precision bf16: the training graphs are ONNX opset 18"},
		{"--precision", "fp8", "--precision fp8: want fp32, tf32 or fp16"},
		{"--resident", "maybe", "--resident maybe: want auto, on or off"},
	} {
		_, err := runCLI(t, "finetune", "--model", "segtune-synth", "--data", t.TempDir(), "--out", out, c.flag, c.value)
		var se *finetune.SettingError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &se) {
			t.Errorf("finetune %s %s: %v; want %q", c.flag, c.value, err, c.want)
		}
		if strings.Contains(err.Error(), "Precision") || strings.Contains(err.Error(), "Resident") {
			t.Errorf("finetune %s %s: the error names the Config field: %v", c.flag, c.value, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run wrote %s", out)
	}
}

func TestKeepFloatErrorNamesTheFlag(t *testing.T) {
	testassets.RequireORT(t)
	dir, model, data := exportSynth(t)
	out := filepath.Join(dir, "m16.onnx")
	_, err := runCLI(t, "export", "--model", model, "--out", out, "--precision", "fp16",
		"--check-images", filepath.Join(data, "images", "val"), "--keep-float", "Conv,Sotfmax")
	var ke *quantize.UnmatchedKeepError
	want := "--keep-float names Sotfmax, which no node of the model has"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ke) {
		t.Errorf("export --keep-float Conv,Sotfmax: %v; want %q", err, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused export wrote %s", out)
	}
}
