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
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
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
		{&contract.LayoutError{Try: contract.NHWC, Msg: "output \"y\" has shape [1 64 64 3]"},
			"output \"y\" has shape [1 64 64 3]; if the output is NHWC, pass --output-layout nhwc", "set its layout"},
		{&contract.LayoutError{Msg: "output \"y\": its class axis reads as axis 2"},
			"axis 2; pass --output-layout nchw|nhwc", "set the output layout"},
		{&contract.LayoutError{Input: true, Try: contract.NHWC, Msg: "input \"x\" [1 224 224 3] has 224 channels in the NCHW layout"},
			"in the NCHW layout; the model may want --nhwc", "input layout"},
		{&contract.LayoutError{Input: true, Try: contract.NCHW, Msg: "input \"x\" has 224 channels in the NHWC layout"},
			"the model may want no --nhwc", "input layout"},
		{&inference.FixedSizeError{Height: 513, Width: 513},
			"the model takes a fixed 513x513 (HxW) input; use --size 513x513 with --resize stretch or letterbox", "preprocess to"},
		{&onnx.FormatError{Path: "best.pt", Err: errors.New("not a valid ONNX protobuf: cannot parse invalid wire-format data")},
			"onnx: best.pt: not a valid ONNX protobuf: cannot parse invalid wire-format data (a PyTorch file? export the model with torch.onnx.export", ""},
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
	for _, plain := range []error{errors.New("no such file"), &onnx.FormatError{Path: "m.onnx", Err: errors.New("empty file, not an ONNX model")}} {
		if got := withFlagNames(plain); got != plain {
			t.Errorf("an error naming no setting came back as %v", got)
		}
	}
}

// A --model that is a PyTorch checkpoint, not an ONNX file, is refused
// naming the file, with what to do about it.
func TestSegmentModelThatIsNotONNX(t *testing.T) {
	testassets.RequireORT(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	pt := filepath.Join(dir, "best.pt")
	if err := os.WriteFile(pt, []byte("PK\x03\x04 a zip of tensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 40, 30)
	_, err := runCLI(t, "segment", "--model", pt, "--input", in, "--output", filepath.Join(t.TempDir(), "masks"))
	var fe *onnx.FormatError
	if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), pt) || !strings.Contains(err.Error(), "torch.onnx.export") {
		t.Fatalf("segment --model best.pt: %v; want a FormatError naming the file and torch.onnx.export", err)
	}
}

// Each library's advice is given by flag.
func TestAdviceNamesFlags(t *testing.T) {
	for fix, want := range adviceFlags {
		err := fmt.Errorf("x.png: %w", &memlimit.TooLargeError{What: "work", Need: 2 << 30, Limit: 1 << 30, From: "--max-memory", Fix: fix})
		got := withFlagNames(err).Error()
		if !strings.Contains(got, want) || strings.Contains(got, fix) || !errors.Is(withFlagNames(err), memlimit.ErrTooLarge) {
			t.Errorf("%q renamed to %q, want %q in it", err, got, want)
		}
		if !strings.Contains(want, "--") || strings.Contains(fix, "--") {
			t.Errorf("advice %q names a flag, or its CLI text %q none", fix, want)
		}
	}
	if withFlagNames(nil) != nil {
		t.Error("withFlagNames(nil) is not nil")
	}
}

// Where ONNX Runtime could not be loaded from, the error names --ort-lib
// as it did when runtime wrote the flag's name itself.
func TestORTLibErrorNamesFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SEGTUNE_CACHE_DIR", filepath.Join(dir, "cache"))
	t.Setenv(runtime.LibraryEnv, "")
	missing := filepath.Join(dir, "libonnxruntime.so")
	_, err := runtime.FindLibrary(missing)
	if want := "ONNX Runtime library " + missing + " (from --ort-lib): "; err == nil || !strings.HasPrefix(ortLibError(missing, err).Error(), want) {
		t.Errorf("--ort-lib %s: %v; want it to start %q", missing, ortLibError(missing, err), want)
	}
	_, err = runtime.FindLibrary("")
	if want := "or point " + runtime.LibraryEnv + " or --ort-lib at your own"; err == nil || !strings.Contains(ortLibError("", err).Error(), want) ||
		!errors.Is(ortLibError("", err), runtime.ErrNoLibrary) {
		t.Errorf("no library: %v; want %q in it, and runtime.ErrNoLibrary", ortLibError("", err), want)
	}
}
