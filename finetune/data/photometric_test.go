package data

import (
	"math"
	"slices"
	"testing"

	"github.com/segtune/segtune/imageio"
)

// crops runs the training pipeline on n examples of s and returns the
// tensors (raw 0..255 values) and masks.
func crops(t *testing.T, s Sample, a Augment, n int) (imgs [][]float32, masks [][]int64) {
	t.Helper()
	p, err := newPipeline(&a, imageio.Preprocess{}, 255)
	if err != nil {
		t.Fatal(err)
	}
	var sc slotScratch
	for i := range n {
		img, mask := make([]float32, 3*a.Height*a.Width), make([]int64, a.Height*a.Width)
		if _, err := p.apply(s, newRNG(9, streamExample, 0, i), img, mask, &sc); err != nil {
			t.Fatal(err)
		}
		imgs, masks = append(imgs, img), append(masks, mask)
	}
	return imgs, masks
}

func mean(xs []float32) float64 {
	s := 0.0
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// Photometric changes alter the pixels, never the geometry: the masks are
// those of the run without them (their draws come after the geometric
// ones), and brightness moves the mean both ways.
func TestPhotometricKeepsGeometry(t *testing.T) {
	s := randomSample()
	geo := Augment{Height: 90, Width: 120, ScaleMin: 0.5, ScaleMax: 1.5, Flip: true}
	plainImgs, plainMasks := crops(t, s, geo, 16)
	photo := geo
	photo.Photometric = Photometric{Brightness: 0.4, Contrast: 0.3, Saturation: 0.3, Gamma: 0.5, Blur: 1}
	imgs, masks := crops(t, s, photo, 16)
	again, _ := crops(t, s, photo, 16)
	changed := 0
	for i := range imgs {
		if !slices.Equal(masks[i], plainMasks[i]) {
			t.Fatalf("example %d: photometric augmentation changed the mask", i)
		}
		if !slices.Equal(imgs[i], again[i]) {
			t.Fatalf("example %d: not deterministic", i)
		}
		if !slices.Equal(imgs[i], plainImgs[i]) {
			changed++
		}
	}
	if changed < 15 {
		t.Errorf("%d of 16 crops changed", changed)
	}

	bright := geo
	bright.Brightness = 0.5
	bimgs, _ := crops(t, s, bright, 16)
	up, down := 0, 0
	for i := range bimgs {
		switch d := mean(bimgs[i]) - mean(plainImgs[i]); {
		case d > 5:
			up++
		case d < -5:
			down++
		}
	}
	if up == 0 || down == 0 {
		t.Errorf("brightness ±50%%: %d crops brighter, %d darker; want both", up, down)
	}
}

// Blur smooths: neighbouring pixels of a noise crop move closer together.
func TestPhotometricBlur(t *testing.T) {
	s := randomSample()
	geo := Augment{Height: 60, Width: 80}
	plain, _ := crops(t, s, geo, 8)
	blur := geo
	blur.Blur = 3
	blurred, _ := crops(t, s, blur, 8)
	rough := func(img []float32) float64 {
		d := 0.0
		for i := 1; i < len(img); i++ {
			d += math.Abs(float64(img[i] - img[i-1]))
		}
		return d
	}
	smoother := 0
	for i := range plain {
		if rough(blurred[i]) < 0.8*rough(plain[i]) {
			smoother++
		}
	}
	if smoother < 5 { // σ is uniform in [0, 3]: most draws blur visibly
		t.Errorf("%d of 8 blurred crops are smoother", smoother)
	}
}

func TestPhotometricDrawsAndLimits(t *testing.T) {
	p := Photometric{Gamma: 1}
	lo, hi := math.Inf(1), 0.0
	for i := range 2000 {
		g := p.draw(newRNG(1, streamExample, 0, i)).gamma
		lo, hi = min(lo, g), max(hi, g)
	}
	if lo < 0.5 || hi > 2 || lo > 0.55 || hi < 1.9 {
		t.Errorf("gamma 1: draws in [%v, %v], want to span [1/2, 2]", lo, hi)
	}
	for _, bad := range []Photometric{{Brightness: -0.1}, {Contrast: 1.5}, {Saturation: math.NaN()}, {Gamma: 5}, {Blur: 21}} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if (Photometric{}).Enabled() {
		t.Error("the zero value is enabled")
	}
}
