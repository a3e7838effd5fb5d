package data

import (
	"fmt"
	"image"
	"image/draw"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
)

// decodePair decodes an image into packed RGB and its mask into mapped,
// range-checked byte labels of the same size. Errors are Problems naming
// the file at fault.
func decodePair(cfg *Config, s datalayout.Sample) (Sample, error) {
	return readPair(cfg, s, func(int, int) bool { return true })
}

// readPair is decodePair that packs the image's pixels only when
// pack(width, height) says so (the cache has room); otherwise RGB is nil.
func readPair(cfg *Config, p datalayout.Sample, pack func(w, h int) bool) (Sample, error) {
	img, err := imageio.Decoder{MaxPixels: cfg.MaxPixels}.ReadFile(p.Image)
	if err != nil {
		return Sample{}, Problem{Path: p.Image, Err: err}
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	maskPath := p.Mask
	m, err := p.ReadMask(cfg.maskOptions(w, h))
	if err != nil {
		return Sample{}, Problem{Path: maskPath, Err: err}
	}
	labels, err := m.Uint8(nil)
	if err != nil {
		return Sample{}, Problem{Path: maskPath, Err: fmt.Errorf("mask %s: %w", maskPath, err)}
	}
	s := Sample{Width: w, Height: h, Labels: labels}
	if pack(w, h) {
		s.RGB = packRGB(img)
	}
	return s, nil
}

// packRGB returns img's pixels as packed RGB bytes. Transparent pixels are
// composited over black, as imageio does for model inputs.
func packRGB(img image.Image) []uint8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	rgba, ok := img.(*image.RGBA)
	if !ok {
		// draw has fast paths for YCbCr (JPEG), NRGBA and Gray.
		rgba = image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(rgba, rgba.Rect, img, b.Min, draw.Src)
		b = rgba.Rect
	}
	out := make([]uint8, 3*w*h)
	for y := 0; y < h; y++ {
		i := rgba.PixOffset(b.Min.X, b.Min.Y+y)
		src := rgba.Pix[i : i+4*w]
		dst := out[3*w*y : 3*w*(y+1)]
		for x := 0; x < w; x++ {
			s := src[4*x : 4*x+3 : 4*x+3]
			d := dst[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = s[0], s[1], s[2]
		}
	}
	return out
}
