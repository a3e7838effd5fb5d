package data

import (
	"github.com/segtune/segtune/imageio"
	"slices"
	"testing"
)

// squareSample is a 40×32 grey image (label 0) with a red square (label
// 1), every pixel labelled.
func squareSample() Sample {
	const w, h = 40, 32
	s := Sample{Width: w, Height: h, RGB: make([]uint8, 3*w*h), Labels: make([]uint8, w*h)}
	for y := range h {
		for x := range w {
			i := y*w + x
			c := [3]uint8{90, 90, 90}
			if x >= 10 && x < 30 && y >= 8 && y < 24 {
				c, s.Labels[i] = [3]uint8{230, 20, 20}, 1
			}
			copy(s.RGB[3*i:], c[:])
		}
	}
	return s
}

// Rotation, shear and translation move image and mask alike: inside the
// moved square the image is red and the mask 1, outside grey and 0, and
// the pixels the crop leaves uncovered are the pad colour (black here)
// and ignored.
func TestGeometricMovesImageAndMaskAlike(t *testing.T) {
	s := squareSample()
	a := Augment{Height: 32, Width: 40, Geometric: Geometric{Rotate: 30, Shear: 10, Translate: 0.2}}
	imgs, masks := crops(t, s, a, 12)
	again, _ := crops(t, s, a, 12)
	_, plain := crops(t, s, Augment{Height: 32, Width: 40}, 1)
	const n = 40 * 32
	moved, ignored := 0, 0
	for e, m := range masks {
		if !slices.Equal(imgs[e], again[e]) {
			t.Fatalf("example %d: not deterministic", e)
		}
		if !slices.Equal(m, plain[0]) {
			moved++
		}
		for i, l := range m {
			r, g := imgs[e][i], imgs[e][n+i]
			x, y := i%40, i/40
			interior := x > 0 && y > 0 && x < 39 && y < 31 && m[i-1] == l && m[i+1] == l && m[i-40] == l && m[i+40] == l
			switch {
			case l == 255:
				ignored++
				if r != 0 || g != 0 || imgs[e][2*n+i] != 0 {
					t.Fatalf("example %d pixel (%d,%d): ignored, but the image has (%v,%v,%v), not the pad colour", e, x, y, r, g, imgs[e][2*n+i])
				}
			case !interior:
			case l == 1 && !(r > 180 && g < 60):
				t.Fatalf("example %d pixel (%d,%d): label 1 on (%v,%v): the mask is not where the red square is", e, x, y, r, g)
			case l == 0 && !(r > 60 && r < 120 && g > 60):
				t.Fatalf("example %d pixel (%d,%d): label 0 on (%v,%v)", e, x, y, r, g)
			}
		}
	}
	if moved < 11 || ignored == 0 {
		t.Errorf("%d of 12 masks moved, %d pixels uncovered", moved, ignored)
	}
}

// Cutout blanks rectangles in image and mask and leaves the rest as the
// crop was; without any Geometric field the crops are unchanged.
func TestGeometricCutout(t *testing.T) {
	s := randomSample()
	plain := Augment{Height: 60, Width: 80, ScaleMin: 0.8, ScaleMax: 1.2, Flip: true}
	pImgs, pMasks := crops(t, s, plain, 8)
	cut := plain
	cut.Cutout = 3
	imgs, masks := crops(t, s, cut, 8)
	const n = 60 * 80
	for e := range masks {
		blanked := 0
		for i, l := range masks[e] {
			if l == 255 && pMasks[e][i] != 255 {
				blanked++
				continue
			}
			if l != pMasks[e][i] || imgs[e][i] != pImgs[e][i] || imgs[e][n+i] != pImgs[e][n+i] {
				t.Fatalf("example %d pixel %d: changed outside the cutouts", e, i)
			}
		}
		// Three rectangles of at least 10×7 pixels, overlapping or cut by
		// the border at worst to a quarter each.
		if blanked < 3*10*7/4 {
			t.Errorf("example %d: %d pixels blanked", e, blanked)
		}
	}
	for _, bad := range []Geometric{{Rotate: 181}, {Shear: -1}, {Translate: 0.6}, {Cutout: 17}} {
		a := plain
		a.Geometric = bad
		if _, err := newPipeline(&a, imageio.Preprocess{}, 255); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
