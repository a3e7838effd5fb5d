package deploy

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
)

// varied writes n varied images into dir and returns their paths.
func varied(t *testing.T, dir string, n int) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range n {
		out = append(out, writeTestImage(t, filepath.Join(dir, string(rune('a'+i))+".png"), uint8(20*i), true))
	}
	return out
}

func TestListImageDirRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for _, c := range []struct {
		dir  string
		want error
	}{
		{filepath.Join(dir, "missing"), fs.ErrNotExist},
		{file, ErrNotFolder},
		{empty, ErrNoImages},
	} {
		_, err := ListImageDir(c.dir)
		var fe *FolderError
		if !errors.As(err, &fe) || fe.Dir != c.dir || !errors.Is(err, c.want) {
			t.Errorf("ListImageDir(%s) = %v; want a *FolderError for %v", c.dir, err, c.want)
		}
	}
	imgs := varied(t, filepath.Join(dir, "imgs"), 2)
	if got, err := ListImageDir(filepath.Join(dir, "imgs")); err != nil || len(got) != 2 || got[0] != imgs[0] {
		t.Errorf("ListImageDir = %v, %v", got, err)
	}
}

// An int8 request without check images holds calibration images out to
// check on; with too few usable images, or an unreadable one, it is
// refused before any model is read, by a *RequestError naming the field.
func TestPrepareInt8(t *testing.T) {
	dir := t.TempDir()
	imgs := varied(t, filepath.Join(dir, "cal"), 12)
	r := Request{Source: "m.onnx", Out: "o.onnx", Precision: INT8, CalibrationDir: filepath.Join(dir, "cal"),
		CalibrationImages: imgs, CalibrationCount: 8, MinCalibration: 4, CheckCount: 4}
	p, err := Prepare(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Calibration) != 8 || len(p.Checks) != 4 || p.Masks != nil {
		t.Errorf("calibration %d, checks %d, masks %v", len(p.Calibration), len(p.Checks), p.Masks)
	}
	for _, c := range p.Checks {
		for _, k := range p.Calibration {
			if c == k {
				t.Errorf("%s both calibrates and checks", c)
			}
		}
	}
	few := r
	few.MinCalibration, few.CalibrationCount = 20, 0 // all 12 images, fewer than 20
	var re *RequestError
	if _, err := Prepare(few); !errors.As(err, &re) || re.Field != "MinCalibration" || re.Path != r.CalibrationDir {
		t.Errorf("too few images: %v", err)
	}
	bad := r
	bad.CalibrationImages = nil
	for range imgs {
		bad.CalibrationImages = append(bad.CalibrationImages, filepath.Join(dir, "missing.png"))
	}
	if _, err := Prepare(bad); !errors.As(err, &re) || re.Field != "CalibrationImages" || !strings.Contains(err.Error(), "missing.png") {
		t.Errorf("a missing image: %v", err)
	}
	none := r
	none.CalibrationImages = nil
	if _, err := Prepare(none); err == nil {
		t.Error("an int8 request without calibration images was prepared")
	}
}

// Check images are paired with their masks; an image without a mask is
// refused.
func TestPrepareChecks(t *testing.T) {
	dir := t.TempDir()
	imgs := varied(t, filepath.Join(dir, "images"), 3)
	masks := varied(t, filepath.Join(dir, "masks"), 2)
	r := Request{Source: "m.onnx", Out: "o.onnx", Precision: FP16, CheckImages: filepath.Join(dir, "images")}
	p, err := Prepare(r)
	if err != nil || len(p.Checks) != 3 {
		t.Fatalf("%v, checks %v", err, p)
	}
	r.CheckMasks = filepath.Join(dir, "masks")
	var re *RequestError
	if _, err := Prepare(r); !errors.As(err, &re) || re.Field != "CheckPairs" || !strings.Contains(err.Error(), imgs[2]) {
		t.Errorf("an image without a mask: %v", err)
	}
	os.Remove(imgs[2])
	p, err = Prepare(r)
	if err != nil || len(p.Checks) != 2 || p.Masks[imgs[0]] != masks[0] {
		t.Errorf("paired: %v %+v", err, p)
	}
	r.CheckImages, r.CheckMasks = "", ""
	if _, err := Prepare(r); !errors.Is(err, ErrNoCheckImages) {
		t.Errorf("an fp16 request without check images: %v", err)
	}
}

// A checkpoint's export must not replace its base model or any
// checkpoint of its run.
func TestRequestInputs(t *testing.T) {
	run := t.TempDir()
	for _, f := range []string{"best.ckpt", "last.ckpt"} {
		os.WriteFile(filepath.Join(run, f), []byte("x"), 0o644)
	}
	r := Request{Source: filepath.Join(run, "best.ckpt"), Checkpoint: true, Base: "base.onnx"}
	got := map[string]string{}
	for _, f := range r.Inputs() {
		got[f.Path] = f.What
	}
	for _, want := range []string{r.Source, filepath.Join(run, "last.ckpt"), "base.onnx", "base.segtune.json"} {
		if got[want] == "" {
			t.Errorf("inputs %v lack %s", got, want)
		}
	}
	outs := Outputs("dir/m.onnx")
	if len(outs) != 4 || outs[0].Path != "dir/m.onnx" || outs[1].Path != "dir/m.segtune.json" {
		t.Errorf("outputs %v", outs)
	}
}

// A negative minimum, or fewer images to calibrate on than the minimum,
// is refused before any image is read.
func TestPrepareCalibrationCounts(t *testing.T) {
	r := Request{Source: "m.onnx", Out: "o.onnx", Precision: INT8, CalibrationImages: []string{"missing.png"}, MinCalibration: -1}
	var re *RequestError
	if _, err := Prepare(r); !errors.Is(err, ErrNegativeMinimum) || !errors.As(err, &re) || re.Field != "MinCalibration" {
		t.Errorf("minimum -1: %v", err)
	}
	r.MinCalibration, r.CalibrationCount = 8, 3
	if _, err := Prepare(r); !errors.Is(err, ErrBelowMinimum) || !errors.As(err, &re) || re.Field != "CalibrationCount" {
		t.Errorf("3 images for a minimum of 8: %v", err)
	}
}

// No output may replace an input (the model, its sidecar, a caller's
// file), through a symbolic link too; a good output's missing folder is
// made.
func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	os.WriteFile(model, []byte("x"), 0o644)
	os.Symlink(model, filepath.Join(dir, "link.onnx"))
	for _, c := range []struct {
		out, output, input string
		extra              File
	}{
		{model, "{out}", "the model being exported", File{}},
		{filepath.Join(dir, "link.onnx"), "{out}", "the model being exported", File{}},
		{filepath.Join(dir, "m.segtune.json.onnx"), "the JSON report", "the pre file", File{filepath.Join(dir, "m.segtune.json.report.json"), "the pre file"}},
		{filepath.Join(dir, "x.onnx"), "the sidecar of {out}", "the pre file", File{filepath.Join(dir, "x.segtune.json"), "the pre file"}},
	} {
		r := Request{Source: model, Out: c.out}
		var re *ReplaceError
		if err := r.CheckOutputs(c.extra); !errors.As(err, &re) || re.Output.What != c.output || re.Input != c.input {
			t.Errorf("out %s: %v; want %s replacing %s", c.out, err, c.output, c.input)
		}
	}
	// An existing file that is no ONNX model (a photo, a split list) is
	// the user's; an earlier export is replaced.
	for name, content := range map[string][]byte{"photo.jpg": {0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 'J', 'F', 'I', 'F', 0}, "train.txt": []byte("0001TP_006690\n0001TP_006720\n")} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, content, 0o644)
		var re *ReplaceError
		if err := (Request{Source: model, Out: p}).CheckOutputs(); !errors.As(err, &re) || re.Output.What != "{out}" || !strings.Contains(err.Error(), "not an ONNX model") {
			t.Errorf("out %s: %v; want it refused as no ONNX model", name, err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, content) {
			t.Errorf("%s changed", name)
		}
	}
	earlier := filepath.Join(dir, "earlier.onnx")
	if err := onnx.NewModel((&onnx.Builder{}).Graph("g", nil, nil), 17).Save(earlier); err != nil {
		t.Fatal(err)
	}
	if err := (Request{Source: model, Out: earlier}).CheckOutputs(); err != nil {
		t.Errorf("an earlier export as --out: %v", err)
	}
	out := filepath.Join(dir, "new", "sub", "e.onnx")
	if err := (Request{Source: model, Out: out}).CheckOutputs(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		t.Errorf("the output folder was not made: %v", err)
	}
}

// A source said to be a checkpoint must be one: an ONNX file is
// ErrNotCheckpoint, a missing file the error reading it.
func TestPrepareChecksCheckpoint(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	os.WriteFile(model, []byte("not a checkpoint"), 0o644)
	var re *RequestError
	r := Request{Source: model, Checkpoint: true, Out: filepath.Join(dir, "o.onnx"), Precision: FP32}
	if _, err := Prepare(r); !errors.Is(err, ErrNotCheckpoint) || !errors.As(err, &re) || re.Field != "Source" {
		t.Errorf("an ONNX file as checkpoint: %v", err)
	}
	r.Source = filepath.Join(dir, "missing.ckpt")
	if _, err := Prepare(r); !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &re) || re.Field != "Source" {
		t.Errorf("a missing checkpoint: %v", err)
	}
}
