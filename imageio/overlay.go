package imageio

import (
	"fmt"
	"image"
	"image/draw"
)

// OverlayOptions controls how a mask is blended over its image.
type OverlayOptions struct {
	// Alpha is the weight of the mask colour, in (0, 1]; 0 means 0.5.
	Alpha float64
	// Skip lists labels left untinted, e.g. 0 (background) and 255 (ignore).
	Skip []uint8
}

// Overlay blends the palette colours of labels (w×h = img's size) over img:
// out = (1-alpha)·image + alpha·colour. pal nil means the VOC palette.
//
// The blend is a hand-written fixed-point loop, not imaging.Overlay of a
// colour layer, because `segment --overlay` runs it for every image and it
// is about 4× faster: 1.6 ms against 7.1 ms for a 480×360 image (medians of
// 5 runs of go test -bench Overlay ./imageio on the shared 2-core VM;
// imaging uses both cores). The results agree within 1 per channel
// (TestOverlayImagingAgrees). Contact sheets (sheet.go) use imaging.
func Overlay(img image.Image, labels []uint8, pal Palette, opt OverlayOptions) (*image.RGBA, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if len(labels) != w*h {
		return nil, fmt.Errorf("overlay: %d labels do not cover the %dx%d (WxH) image", len(labels), w, h)
	}
	alpha := opt.Alpha
	if alpha == 0 {
		alpha = 0.5
	}
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("overlay: alpha %v is outside (0, 1]", opt.Alpha)
	}
	pal = pal.withDefaults(256)
	var skip [256]bool
	for _, l := range opt.Skip {
		skip[l] = true
	}
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(out, out.Rect, img, b.Min, draw.Src)
	// Fixed point: a = alpha in 1/256 steps.
	a := uint32(alpha*256 + 0.5)
	for y := 0; y < h; y++ {
		row := out.Pix[y*out.Stride : y*out.Stride+4*w]
		for x, l := range labels[y*w : (y+1)*w] {
			if skip[l] {
				continue
			}
			c := pal[l]
			px := row[4*x : 4*x+4 : 4*x+4]
			px[0] = blend(px[0], c.R, a)
			px[1] = blend(px[1], c.G, a)
			px[2] = blend(px[2], c.B, a)
			px[3] = 0xff
		}
	}
	return out, nil
}

func blend(base, over uint8, a uint32) uint8 {
	return uint8((uint32(base)*(256-a) + uint32(over)*a + 128) >> 8)
}

// WriteOverlayPNG writes Overlay(img, labels, pal, opt) as a PNG at path,
// atomically.
func WriteOverlayPNG(path string, img image.Image, labels []uint8, pal Palette, opt OverlayOptions) error {
	out, err := Overlay(img, labels, pal, opt)
	if err != nil {
		return fmt.Errorf("write overlay %s: %w", path, err)
	}
	return WritePNG(path, out)
}
