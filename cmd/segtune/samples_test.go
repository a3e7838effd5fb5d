package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/resolve/runsetup"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The contact sheet shows the images with the smallest and the largest
// objects, smallest first, with their ground truth and the model's
// prediction in the palette's colours.
func TestWriteSamples(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir) // class 1 where red > green: the left half
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(imgs, 0o755)
	os.Mkdir(masks, 0o755)
	const w, h = 20, 10
	// Image k has an object k columns wide (k = 0: none); 8 candidates, so
	// the sheet keeps the 3 narrowest (1, 2, 3) and the 3 widest (5, 6, 7).
	for k := range 8 {
		name := string(rune('a'+k)) + ".png"
		writeImage(t, filepath.Join(imgs, name), w, h)
		labels := make([]uint8, w*h)
		for y := range h {
			for x := range k {
				labels[y*w+x] = 1
			}
		}
		if err := imageio.WriteMaskPNG(filepath.Join(masks, name), labels, w, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "samples.png")
	cfg := finetune.Config{Val: finetune.DataSpec{Images: imgs, Masks: masks}, Ignore: 255}
	pal := imageio.Palette{{0, 0, 0, 255}, {250, 0, 0, 255}}
	if err := samples.Write(out, cfg, pal, []samples.Column{{Name: "prediction", Model: model}}, runsetup.Predictor(runtime.Options{}, io.Discard)); err != nil {
		t.Fatal(err)
	}
	img, err := imageio.ReadImage(out)
	if err != nil {
		t.Fatal(err)
	}
	const cell, gap, text = 256, 6, 18 // imageio's default cell width and layout
	cellH := h * cell / w
	if b := img.Bounds(); b.Dx() != gap+3*(cell+gap) || b.Dy() != gap+text+6*(text+cellH+gap) {
		t.Fatalf("sheet is %v: want 3 columns and 6 rows", b)
	}
	red := func(col, row, srcX int) bool {
		x := gap + col*(cell+gap) + (2*srcX+1)*cell/(2*w)
		y := gap + text + row*(text+cellH+gap) + text + cellH/2
		r, g, b, _ := img.At(x, y).RGBA()
		return r>>8 > 200 && g>>8 < 50 && b>>8 < 50
	}
	for row, width := range []int{1, 2, 3, 5, 6, 7} {
		if !red(1, row, width-1) || red(1, row, width) {
			t.Errorf("row %d: ground truth is not %d columns wide", row, width)
		}
		if !red(2, row, 2) || red(2, row, w-3) {
			t.Errorf("row %d: the prediction is not the left half", row)
		}
	}
}
