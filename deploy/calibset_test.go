package deploy

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
)

// writeTestImage writes a 32×24 PNG: flat grey at level when varied is
// false, else a gradient offset by level.
func writeTestImage(t *testing.T, path string, level uint8, varied bool) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 32, 24))
	for y := 0; y < 24; y++ {
		for x := 0; x < 32; x++ {
			v := level
			if varied {
				v = level + uint8(x*7+y*3)
			}
			img.Set(x, y, color.RGBA{v, v / 2, 255 - v, 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScreenCalibrationImages(t *testing.T) {
	dir := t.TempDir()
	black := writeTestImage(t, filepath.Join(dir, "black.png"), 0, false)
	var varied []string
	for i := 0; i < 8; i++ {
		varied = append(varied, writeTestImage(t, filepath.Join(dir, fmt.Sprintf("v%d.png", i)), uint8(i*20), true))
	}
	copies := []string{varied[0]}
	for i := 0; i < 8; i++ {
		data, _ := os.ReadFile(varied[0])
		p := filepath.Join(dir, fmt.Sprintf("copy%d.png", i))
		os.WriteFile(p, data, 0o644)
		copies = append(copies, p)
	}
	screen := func(paths []string) *ImageSet {
		t.Helper()
		s, err := ScreenImages(paths, imageio.Decoder{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// One black image: refused, named as near-constant.
	if err := screen([]string{black}).CheckCalibration(MinCalibrationImages); err == nil ||
		!strings.Contains(err.Error(), "near-constant") || !strings.Contains(err.Error(), "black.png") {
		t.Errorf("one black image: %v", err)
	}
	// Nine copies of one image: one distinct image, refused.
	s := screen(copies)
	if err := s.CheckCalibration(MinCalibrationImages); err == nil || !strings.Contains(err.Error(), "duplicates of earlier images: 8") {
		t.Errorf("copies of one image: %v", err)
	}
	// Eight varied images pass; a black one among them is warned about.
	s = screen(append(slices.Clone(varied), black))
	if err := s.CheckCalibration(MinCalibrationImages); err != nil || s.Usable() != 8 {
		t.Errorf("varied images: %v (usable %d)", err, s.Usable())
	}
	if w := s.NearConstantWarning(); !strings.Contains(w, "black.png") {
		t.Errorf("warning %q", w)
	}
	// Overlap is by content: a copy under another name is a calibration image.
	if n, err := s.Overlap([]string{copies[3], black, writeTestImage(t, filepath.Join(dir, "new.png"), 200, true)}); err != nil || n != 2 {
		t.Errorf("overlap %d (%v), want 2", n, err)
	}
}

func TestHoldOut(t *testing.T) {
	names := func(n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("%03d.png", i))
		}
		return out
	}
	disjoint := func(a, b []string) bool {
		for _, x := range a {
			if slices.Contains(b, x) {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		all, calibCount, checkCount int
		calib, check                int
		heldOut                     bool
	}{
		{all: 100, calibCount: 64, checkCount: 32, calib: 64, check: 32, heldOut: true}, // the images left out of the sample
		{all: 40, calibCount: 64, checkCount: 32, calib: 30, check: 10, heldOut: true},  // every fourth held out
		{all: 40, calibCount: 0, checkCount: 4, calib: 36, check: 4, heldOut: true},
		{all: 9, calibCount: 64, checkCount: 32, calib: 9, check: 9, heldOut: false}, // too few to spare any
	} {
		all := names(tc.all)
		calib, check, held := HoldOut(all, tc.calibCount, tc.checkCount, MinCalibrationImages)
		if len(calib) != tc.calib || len(check) != tc.check || held != tc.heldOut || (held && !disjoint(calib, check)) {
			t.Errorf("%d images, --calibrate-count %d, --check-count %d: %d calibration, %d check images, held out %v; want %d, %d, %v",
				tc.all, tc.calibCount, tc.checkCount, len(calib), len(check), held, tc.calib, tc.check, tc.heldOut)
		}
	}
}
