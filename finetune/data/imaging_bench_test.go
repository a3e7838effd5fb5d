package data

import (
	"image"
	"testing"

	"github.com/disintegration/imaging"
)

// The geometric augmentation (random scale, crop with padding, flip) of
// one 480×360 example and its mask into a 360×480 crop, two ways:
// Augment.render's single fused pass, and imaging's Resize (Linear for
// the image, NearestNeighbor for the mask), Paste onto the padded crop
// and FlipH. The figures are quoted in augment.go.

func benchCrops(b *testing.B) (Sample, *Augment, []crop) {
	a := &Augment{Height: 360, Width: 480, ScaleMin: 0.5, ScaleMax: 2, Flip: true}
	s := randomSample()
	cs := make([]crop, 64)
	for i := range cs {
		cs[i] = a.draw(newRNG(1, streamExample, 0, i), s.Width, s.Height)
	}
	return s, a, cs
}

func BenchmarkGeometryFused(b *testing.B) {
	s, a, cs := benchCrops(b)
	mask := make([]int64, a.Width*a.Height)
	var sc augmentScratch
	for i := 0; b.Loop(); i++ {
		a.render(s, cs[i%len(cs)], [3]uint8{128, 128, 128}, 255, &sc, mask)
	}
}

func BenchmarkGeometryImaging(b *testing.B) {
	s, a, cs := benchCrops(b)
	var buf *image.RGBA
	labels := &image.Gray{Pix: s.Labels, Stride: s.Width, Rect: image.Rect(0, 0, s.Width, s.Height)}
	mask := make([]int64, a.Width*a.Height)
	for i := 0; b.Loop(); i++ {
		c := cs[i%len(cs)]
		buf = rgbaOf(s, buf)
		img := imaging.Resize(buf, c.sw, c.sh, imaging.Linear)
		lab := imaging.Resize(labels, c.sw, c.sh, imaging.NearestNeighbor)
		at := image.Pt(-c.x0, -c.y0)
		out := imaging.Paste(imaging.New(a.Width, a.Height, image.Black), img, at)
		lout := imaging.Paste(imaging.New(a.Width, a.Height, image.White), lab, at)
		if c.flip {
			out, lout = imaging.FlipH(out), imaging.FlipH(lout)
		}
		for k := range mask {
			mask[k] = int64(lout.Pix[4*k])
		}
		_ = out
	}
}

// BenchmarkPhotometric measures the photometric changes on one 360×480
// crop (imaging, parallel over rows): the four colour changes, the blur,
// and all five.
func BenchmarkPhotometric(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 480, 360))
	s := randomSample()
	for i := range 480 * 360 {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2], 0xff
	}
	for _, c := range []struct {
		name string
		p    Photometric
	}{
		{"colour", Photometric{Brightness: 0.2, Contrast: 0.2, Saturation: 0.2, Gamma: 0.3}},
		{"blur", Photometric{Blur: 1.5}},
		{"all", Photometric{Brightness: 0.2, Contrast: 0.2, Saturation: 0.2, Gamma: 0.3, Blur: 1.5}},
	} {
		a := &Augment{Photometric: c.p}
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				a.photometric(newRNG(1, streamExample, 0, i), img)
			}
		})
	}
}
