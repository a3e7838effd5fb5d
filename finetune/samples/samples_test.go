package samples

import (
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
)

// The sheet keeps the images with the 3 smallest and 3 largest objects,
// smallest first, asks each column's model for exactly those, and
// refuses a run without validation images or a model that skips one.
func TestWritePicksBySizeAndAsksEachModel(t *testing.T) {
	dir := t.TempDir()
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	const w, h = 20, 10
	for _, d := range []string{imgs, masks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 8 { // image k has an object k columns wide (k = 0: none)
		name := string(rune('a'+k)) + ".png"
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range img.Pix {
			img.Pix[i] = 200
		}
		if err := imageio.WritePNG(filepath.Join(imgs, name), img); err != nil {
			t.Fatal(err)
		}
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
	cfg := finetune.Config{Val: finetune.DataSpec{Images: imgs, Masks: masks}, Ignore: 255}
	asked := map[string][]string{}
	predict := func(model string, _ imageio.Preprocess, paths []string) (map[string][]uint8, error) {
		out := map[string][]uint8{}
		for _, p := range paths {
			asked[model] = append(asked[model], filepath.Base(p))
			out[p] = make([]uint8, w*h)
		}
		return out, nil
	}
	out := filepath.Join(dir, File)
	cols := []Column{{Name: "one", Model: "m1"}, {Name: "two", Model: "m2"}}
	if err := Write(out, cfg, imageio.Palette{color.RGBA{0, 0, 0, 255}}, cols, predict); err != nil {
		t.Fatal(err)
	}
	want := []string{"b.png", "c.png", "d.png", "f.png", "g.png", "h.png"}
	if !slices.Equal(asked["m1"], want) || !slices.Equal(asked["m2"], want) {
		t.Errorf("models asked for %v; want %v each", asked, want)
	}
	img, err := imageio.ReadImage(out)
	if err != nil {
		t.Fatal(err)
	}
	const cell, gap, text = 256, 6, 18 // imageio's default layout
	if b := img.Bounds(); b.Dx() != gap+4*(cell+gap) || b.Dy() != gap+text+6*(text+h*cell/w+gap) {
		t.Errorf("sheet is %v: want 4 columns and 6 rows", b)
	}

	if err := Write(out, finetune.Config{}, nil, cols, predict); err == nil || !strings.Contains(err.Error(), "no validation images") {
		t.Errorf("without validation images: %v", err)
	}
	skip := func(string, imageio.Preprocess, []string) (map[string][]uint8, error) {
		return map[string][]uint8{}, nil
	}
	if err := Write(out, cfg, nil, cols, skip); err == nil || !strings.Contains(err.Error(), "no prediction for") {
		t.Errorf("a model that predicts nothing: %v", err)
	}
	failing := func(string, imageio.Preprocess, []string) (map[string][]uint8, error) { return nil, errors.New("boom") }
	if err := Write(out, cfg, nil, cols, failing); err == nil || !strings.HasPrefix(err.Error(), "one: boom") {
		t.Errorf("a failing model: %v", err)
	}
}
