package imageio

import (
	"image"
	"math/rand/v2"
	"testing"

	"github.com/disintegration/imaging"
)

// overlayInputs is a 480×360 noise image with labels 0..11.
func overlayInputs() (*image.RGBA, []uint8) {
	const w, h = 480, 360
	r := rand.New(rand.NewPCG(3, 4))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.Uint32())
		if i%4 == 3 {
			img.Pix[i] = 0xff
		}
	}
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = uint8(r.IntN(12))
	}
	return img, labels
}

// overlayImaging is Overlay written with imaging: a colour layer, opaque
// where a label is tinted, blended by imaging.Overlay.
func overlayImaging(img image.Image, labels []uint8, pal Palette, alpha float64, skip uint8) *image.NRGBA {
	b := img.Bounds()
	layer := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for i, l := range labels {
		if l == skip {
			continue
		}
		c := pal[l]
		layer.Pix[4*i], layer.Pix[4*i+1], layer.Pix[4*i+2], layer.Pix[4*i+3] = c.R, c.G, c.B, 0xff
	}
	return imaging.Overlay(img, layer, b.Min, alpha)
}

// The two agree to within rounding (imaging blends in float64).
func TestOverlayImagingAgrees(t *testing.T) {
	img, labels := overlayInputs()
	pal := Palette(nil).withDefaults(256)
	ours, err := Overlay(img, labels, pal, OverlayOptions{Alpha: 0.5, Skip: []uint8{0}})
	if err != nil {
		t.Fatal(err)
	}
	theirs := overlayImaging(img, labels, pal, 0.5, 0)
	for i := range ours.Pix {
		if d := int(ours.Pix[i]) - int(theirs.Pix[i]); d < -1 || d > 1 {
			t.Fatalf("byte %d: %d vs imaging's %d", i, ours.Pix[i], theirs.Pix[i])
		}
	}
}

// BenchmarkOverlay and BenchmarkOverlayImaging compare the hand-written
// fixed-point blend with imaging.Overlay on a 480×360 image (the figures
// are quoted in overlay.go).
func BenchmarkOverlay(b *testing.B) {
	img, labels := overlayInputs()
	opt := OverlayOptions{Alpha: 0.5, Skip: []uint8{0}}
	for b.Loop() {
		if _, err := Overlay(img, labels, nil, opt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOverlayImaging(b *testing.B) {
	img, labels := overlayInputs()
	pal := Palette(nil).withDefaults(256)
	for b.Loop() {
		overlayImaging(img, labels, pal, 0.5, 0)
	}
}
