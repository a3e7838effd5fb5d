package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// Settings.Prepare refuses the user's mistakes before any model is
// loaded: as usage errors (status 2) what the settings alone show, the
// outputs replacing an input (status 1) by the setting out; a blank
// calibration image is a note.
func TestSettingsPrepare(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	writeTestImage(t, model, 0, false) // any file: nothing here loads it
	calib := filepath.Join(dir, "calib")
	if err := os.Mkdir(calib, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, level := range []uint8{10, 60, 110, 0} {
		writeTestImage(t, filepath.Join(calib, string(rune('a'+i))+".png"), level, level != 0)
	}
	fp32 := DefaultSettings()
	fp32.Model, fp32.Out = model, filepath.Join(dir, "out.onnx")
	int8 := fp32
	int8.Precision, int8.Calibrate, int8.CalibrateMinImages = "int8", calib, 1
	int8.Given = func(key string) bool { return key == "calibrate" || key == "calibrate_min_images" }
	var se *setting.Error
	for _, c := range []struct {
		name string
		edit func(*Settings, *Sources)
		is   func(error) bool
	}{
		{"no model", func(s *Settings, _ *Sources) { s.Model = "" }, func(err error) bool { return errors.Is(err, ErrNoSource) }},
		{"percentile", func(s *Settings, _ *Sources) { s.Percentile = 0 }, func(err error) bool { return errors.As(err, &se) && se.Setting == "percentile" }},
		{"label map", func(_ *Settings, in *Sources) { in.LabelMap = "nonsense" }, func(err error) bool { return errors.As(err, &se) && se.Setting == "label_map" }},
		{"crowd", func(s *Settings, in *Sources) { *s, in.Layout.Crowd = int8, "maybe" }, func(err error) bool { return errors.As(err, &se) && se.Setting == "coco_crowd" }},
		{"negative minimum", func(s *Settings, _ *Sources) { *s = int8; s.CalibrateMinImages = -1 }, func(err error) bool { return errors.Is(err, ErrNegativeMinimum) }},
	} {
		s, in := fp32, Sources{}
		c.edit(&s, &in)
		if _, err := s.Prepare(in); setting.ExitCode(err) != 2 || !c.is(err) {
			t.Errorf("%s: %v (exit %d)", c.name, err, setting.ExitCode(err))
		}
	}
	keep := Sources{Keep: []File{{Path: filepath.Join(dir, "out.segtune.json"), What: "the {preprocess} file"}}}
	if _, err := fp32.Prepare(keep); setting.ExitCode(err) != 1 || !errors.As(err, &se) || se.Setting != "out" || !errors.As(err, new(*ReplaceError)) {
		t.Errorf("out over the preprocessing file: %v", err)
	}
	var notes strings.Builder
	p, err := int8.Prepare(Sources{Notes: datalayout.Notes{W: &notes, Prefix: "p: "}})
	if err != nil || len(p.Calibration) == 0 {
		t.Fatalf("int8: %v", err)
	}
	if !strings.HasPrefix(notes.String(), "p: warning: ") || !strings.Contains(notes.String(), "d.png") {
		t.Errorf("notes %q: want the blank image warned of", notes.String())
	}
}
