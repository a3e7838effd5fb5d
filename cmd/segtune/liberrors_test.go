package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx/quantize"
)

// The libraries name a setting by its field; the user reads the flag that
// set it, with the library's reason, and the typed error stays reachable.
func TestLibraryErrorsNameTheFlag(t *testing.T) {
	isolateModelSearch(t)
	out := filepath.Join(t.TempDir(), "run")
	for _, c := range []struct{ flag, value, want string }{
		{"--precision", "fp8", "--precision fp8: want fp32, tf32, fp16 or bf16"},
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

// Each library error the CLI translates reads with the flag, keeps the
// library's reason and stays reachable by errors.As under a wrapping.
func TestWithFlagNames(t *testing.T) {
	cause := errors.New("permission denied")
	for _, c := range []struct {
		err        error
		want, gone string
	}{
		{&finetune.SettingError{Field: "Batch", Value: "8", Err: errors.New("m.onnx declares a fixed batch of 1")},
			"--batch 8: m.onnx declares a fixed batch of 1", "Batch"},
		{&finetune.SettingError{Field: "RunDir", Value: "/r", Err: cause},
			"--out /r: permission denied", "RunDir"},
		{&finetune.NotRunDirError{Dir: "/r", Files: []string{"a.txt"}},
			"finetune: --out /r is not empty (it holds a.txt)", "run folder /r"},
		{&datalayout.AmbiguousError{Root: "/d", Found: []string{"voc", "coco"}},
			"it holds voc and coco; name the layout with --format, or point --data at one of them", "name its layout"},
		{&datalayout.SplitError{Root: "/d", Format: "voc", Have: []string{"train", "val"}},
			"has splits train, val: pick one with --split", ""},
		{&datalayout.SplitError{Root: "/d", Format: "folders", Split: "val"},
			"has no splits, and --split val names one", "was asked for"},
	} {
		wrapped := fmt.Errorf("finetune: %w", c.err)
		got := withFlagNames(wrapped)
		if !strings.Contains(got.Error(), c.want) || (c.gone != "" && strings.Contains(got.Error(), c.gone)) {
			t.Errorf("%T: %q; want it to hold %q and not %q", c.err, got, c.want, c.gone)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%T: the library error is not reachable through %q", c.err, got)
		}
	}
	plain := errors.New("no such file")
	if got := withFlagNames(plain); got != plain {
		t.Errorf("an error naming no setting came back as %v", got)
	}
}
