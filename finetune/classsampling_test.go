package finetune

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// rareClassData is 10 images of class 0, of which image 3 also holds
// class 1.
func rareClassData(t *testing.T) *data.Dataset {
	t.Helper()
	root := t.TempDir()
	imgs, masks := filepath.Join(root, "images"), filepath.Join(root, "masks")
	os.MkdirAll(imgs, 0o755)
	os.MkdirAll(masks, 0o755)
	for i := range 10 {
		labels := make([]uint8, 64)
		if i == 3 {
			labels[10] = 1
		}
		name := fmt.Sprintf("%02d.png", i)
		if err := imageio.WritePNG(filepath.Join(imgs, name), image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WriteMaskPNG(filepath.Join(masks, name), labels, 8, 8, nil); err != nil {
			t.Fatal(err)
		}
	}
	ds, _, err := data.Open(context.Background(), data.Config{ImageDir: imgs, MaskDir: masks, NumClasses: 2})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// The image holding the rare class gets LVIS's repeat factor √(t/f) and
// comes up that much more often in epochs of the usual length, the same
// way for the same epoch.
func TestRepeatFactorSampling(t *testing.T) {
	ds := rareClassData(t)
	r := repeatFactors(ds, 0.5)
	want := math.Sqrt(0.5 / 0.1)
	for id, f := range r {
		if w := map[bool]float64{true: want, false: 1}[id == 3]; math.Abs(f-w) > 1e-12 {
			t.Errorf("image %d: repeat factor %v, want %v", id, f, w)
		}
	}
	order := repeatFactorOrder(r, 7, 10)
	if !slices.Equal(order(5), order(5)) || slices.Equal(order(5), order(6)) {
		t.Error("an epoch's order is not a function of the epoch")
	}
	const epochs = 400
	var rare, others int
	for e := range epochs {
		o := order(e)
		if len(o) != 10 {
			t.Fatalf("epoch %d: %d ids, want 10", e, len(o))
		}
		for _, id := range o {
			if id == 3 {
				rare++
			} else {
				others++
			}
		}
	}
	// Expected per epoch: 10·r/(9 + r) ≈ 1.99 for image 3, 10·1/(9 + r) ≈ 0.89 for each other.
	if got := float64(rare) / epochs; got < 1.85 || got > 2.15 {
		t.Errorf("image 3 drawn %.2f times an epoch, want about 1.99", got)
	}
	if got := float64(others) / epochs / 9; got < 0.85 || got > 0.93 {
		t.Errorf("the other images drawn %.2f times an epoch each, want about 0.89", got)
	}
}

func TestCheckSampleBy(t *testing.T) {
	var se *setting.Error
	for _, c := range []struct {
		by       string
		th       float64
		balanced bool
	}{{"size", 0.1, false}, {"class", 0.1, true}, {"class", 1.5, false}} {
		if err := CheckSampleBy(c.by, c.th, c.balanced); !errors.As(err, &se) || se.Setting != "sample_by" {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := CheckSampleBy("class", 0, false); err != nil {
		t.Error(err)
	}
}
