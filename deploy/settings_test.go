package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// Settings name what is wrong by key: a number out of range, a setting
// of another precision given, a check setting without the one it needs.
func TestSettingsRefuseByKey(t *testing.T) {
	s := DefaultSettings()
	if err := s.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	s.Percentile = 0
	var se *setting.Error
	if err := s.Validate(); !errors.As(err, &se) || se.Setting != "percentile" || err.Error() != "percentile 0: must be in (0, 100]" {
		t.Errorf("percentile 0: %v", err)
	}
	s = DefaultSettings()
	s.Ignore = 70000
	if err := s.Validate(); !errors.As(err, &se) || se.Setting != "ignore" {
		t.Errorf("ignore 70000: %v", err)
	}
	given := func(keys ...string) func(string) bool {
		return func(k string) bool {
			for _, g := range keys {
				if g == k {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		precision string
		given     []string
		want      string
	}{
		{"fp32", []string{"calibrate"}, "calibrate is for precision int8 (this export is fp32)"},
		{"fp16", []string{"split"}, "split is for precision int8 (this export is fp16)"},
		{"fp32", []string{"keep_float"}, "keep_float is for precision fp16 or int8"},
		{"fp16", []string{"check_masks"}, "check_masks needs check_images (the images the masks belong to)"},
		{"fp16", []string{"check_images", "mask_palette"}, "mask_palette is for reading check_masks"},
		{"int8", nil, "precision int8 needs calibrate DIR: a folder of images like those the model will segment, to measure its activations' ranges on"},
		{"int4", nil, `precision: unknown precision "int4" (want fp32, fp16 or int8)`},
	} {
		s := DefaultSettings()
		s.Model, s.Precision, s.Calibrate, s.Given = "m.onnx", c.precision, "dir", given(c.given...)
		if c.precision == "int8" {
			s.Calibrate = ""
		}
		if _, err := s.Request(datalayout.Options{}, nil); err == nil || err.Error() != c.want {
			t.Errorf("%s given %v: %v, want %q", c.precision, c.given, err, c.want)
		}
	}
	// Left at their defaults, int8's settings are no mistake in fp32.
	s = DefaultSettings()
	s.Model, s.Calibrate = "m.onnx", "dir"
	r, err := s.Request(datalayout.Options{}, nil)
	if err != nil || r.MinAgreement != DefaultMinAgreement[FP32] || r.IgnoreLabel != nil {
		t.Errorf("fp32 defaults: %+v, %v", r, err)
	}
	s.Given, s.MinAgreement, s.Ignore = given("min_agreement", "ignore"), 0.5, 3
	if r, err := s.Request(datalayout.Options{}, nil); err != nil || r.MinAgreement != 0.5 || r.IgnoreLabel == nil || *r.IgnoreLabel != 3 {
		t.Errorf("given: %+v, %v", r, err)
	}
	s.Model = ""
	if _, err := s.Request(datalayout.Options{}, nil); !errors.Is(err, ErrNoSource) {
		t.Errorf("no model: %v", err)
	}
}

// A calibration folder that is a file, or holds no images and no data
// set, is refused naming the calibrate setting, as check images are.
func TestCalibrationDirRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	_, err := CalibrationImages(file, datalayout.Options{}, false, nil)
	if err == nil || err.Error() != "calibrate "+file+" is not a folder of images" {
		t.Errorf("a file: %v", err)
	}
	_, err = CalibrationImages(dir, datalayout.Options{}, false, nil)
	var re *RequestError
	if !errors.As(err, &re) || re.Field != "CalibrationDir" {
		t.Errorf("a folder of no images: %v", err)
	}
}
