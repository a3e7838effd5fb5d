package imageio

import (
	"image"
	"image/color"
	"testing"
)

// benchImage is a deterministic 480×360 image of the requested type, the
// CamVid size.
func benchImage(kind string) image.Image {
	const w, h = 480, 360
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			rgba.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	switch kind {
	case "ycbcr":
		yc := image.NewYCbCr(rgba.Rect, image.YCbCrSubsampleRatio420)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := rgba.RGBAAt(x, y)
				yy, cb, cr := color.RGBToYCbCr(c.R, c.G, c.B)
				yc.Y[yc.YOffset(x, y)] = yy
				yc.Cb[yc.COffset(x, y)] = cb
				yc.Cr[yc.COffset(x, y)] = cr
			}
		}
		return yc
	}
	return rgba
}

func benchPreprocess(b *testing.B, kind string, p Preprocess) {
	img := benchImage(kind)
	g, err := p.Geometry(480, 360)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, g.Len())
	b.ReportAllocs()
	b.SetBytes(int64(g.Len() * 4))
	for b.Loop() {
		if _, err := p.Tensor(img, dst); err != nil {
			b.Fatal(err)
		}
	}
}

var deeplab513 = Preprocess{Height: 513, Width: 513, Resize: ResizeStretch, ValueScale: 1 / 127.5, ValueOffset: -1}

// BenchmarkPreprocess480x360To513 is the segmentation pipeline's per-image
// cost: 480×360 RGBA (PNG) to a 513×513 NCHW slot.
func BenchmarkPreprocess480x360To513(b *testing.B) {
	b.Run("RGBA/bilinear/NCHW", func(b *testing.B) { benchPreprocess(b, "rgba", deeplab513) })
	b.Run("YCbCr/bilinear/NCHW", func(b *testing.B) { benchPreprocess(b, "ycbcr", deeplab513) })
	p := deeplab513
	p.Interpolation = Nearest
	b.Run("RGBA/nearest/NCHW", func(b *testing.B) { benchPreprocess(b, "rgba", p) })
	p = deeplab513
	p.Layout = NHWC
	b.Run("RGBA/bilinear/NHWC", func(b *testing.B) { benchPreprocess(b, "rgba", p) })
	p = deeplab513
	p.Resize = ResizeLetterbox
	b.Run("RGBA/letterbox/NCHW", func(b *testing.B) { benchPreprocess(b, "rgba", p) })
	p = Preprocess{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true, ValueScale: 1 / 127.5, ValueOffset: -1}
	b.Run("RGBA/scale721x961/NCHW", func(b *testing.B) { benchPreprocess(b, "rgba", p) })
	p = Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}
	b.Run("RGBA/native/NCHW", func(b *testing.B) { benchPreprocess(b, "rgba", p) })
}
