package imageio

import (
	"fmt"
	"image"
	"image/color"
	"io"

	"github.com/segtune/segtune/internal/regfile"
)

// Mask is a label map: Labels[y*Width+x] is the class of pixel (x, y).
type Mask struct {
	Width, Height int
	Labels        []int32
}

// MaskOptions controls how mask files become label maps.
type MaskOptions struct {
	// Decoder sets the pixel limit.
	Decoder Decoder
	// Palette turns RGB colour masks into labels: a pixel of colour
	// Palette[i] has label i (first match wins). Single-channel and palette
	// PNGs do not need it: their value or index is the label.
	Palette Palette
	// Map remaps labels after reading; nil keeps them.
	Map *LabelMap
	// Width and Height, when > 0, are the size the mask must have (usually
	// its image's).
	Width, Height int
	// NumClasses, when > 0, requires every (mapped) label to be below it
	// or equal to Ignore.
	NumClasses int
	// Ignore is the label exempt from the NumClasses check, e.g. 255.
	Ignore int32
}

// ReadMask reads a mask file (see [DecodeMask]).
func ReadMask(path string, opt MaskOptions) (*Mask, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read mask: %w", err)
	}
	defer f.Close()
	return DecodeMask(f, path, opt)
}

// DecodeMask decodes a mask image and turns it into labels: Gray and Gray16
// pixel values and Paletted indices are labels as they are; colour images
// are looked up in opt.Palette, or, without a palette, must be grey
// (r = g = b), whose level is the label. name is used in errors.
func DecodeMask(r io.Reader, name string, opt MaskOptions) (*Mask, error) {
	img, err := opt.Decoder.Decode(r, name)
	if err != nil {
		return nil, fmt.Errorf("read mask: %w", err)
	}
	return MaskFromImage(img, name, opt)
}

// MaskFromImage turns a decoded mask image into labels (see [DecodeMask]).
func MaskFromImage(img image.Image, name string, opt MaskOptions) (*Mask, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if (opt.Width > 0 && w != opt.Width) || (opt.Height > 0 && h != opt.Height) {
		return nil, fmt.Errorf("mask %s is %dx%d (WxH) but its image is %dx%d", name, w, h, opt.Width, opt.Height)
	}
	m := &Mask{Width: w, Height: h, Labels: make([]int32, w*h)}
	if err := rawLabels(img, name, opt.Palette, m.Labels); err != nil {
		return nil, err
	}
	if err := m.remap(name, opt); err != nil {
		return nil, err
	}
	return m, nil
}

// rawLabels writes img's labels, before remapping, into dst.
func rawLabels(img image.Image, name string, pal Palette, dst []int32) error {
	b := img.Bounds()
	w := b.Dx()
	switch m := img.(type) {
	case *image.Gray:
		for y := 0; y < b.Dy(); y++ {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x, v := range m.Pix[i : i+w] {
				dst[y*w+x] = int32(v)
			}
		}
		return nil
	case *image.Gray16:
		for y := 0; y < b.Dy(); y++ {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			row := m.Pix[i : i+2*w]
			for x := range w {
				dst[y*w+x] = int32(row[2*x])<<8 | int32(row[2*x+1])
			}
		}
		return nil
	case *image.Paletted:
		for y := 0; y < b.Dy(); y++ {
			i := m.PixOffset(b.Min.X, b.Min.Y+y)
			for x, v := range m.Pix[i : i+w] {
				dst[y*w+x] = int32(v)
			}
		}
		return nil
	}
	return colourLabels(img, name, pal, dst)
}

// colourLabels maps RGB pixels to labels through pal (or grey levels
// without one), failing on the first colour it cannot place.
func colourLabels(img image.Image, name string, pal Palette, dst []int32) error {
	index := make(map[[3]uint8]int32, len(pal))
	for i := len(pal) - 1; i >= 0; i-- { // reverse: first match wins
		c := pal[i]
		index[[3]uint8{c.R, c.G, c.B}] = int32(i)
	}
	b := img.Bounds()
	w := b.Dx()
	// One-entry cache: masks are made of large flat regions.
	last, lastLabel := [3]uint8{}, int32(-1)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := pixelRGB(img, x, y)
			if c == last && lastLabel >= 0 {
				dst[(y-b.Min.Y)*w+x-b.Min.X] = lastLabel
				continue
			}
			var l int32
			if pal == nil {
				if c[0] != c[1] || c[1] != c[2] {
					return fmt.Errorf("mask %s: pixel (%d,%d) has colour #%02x%02x%02x; colour masks need a palette",
						name, x, y, c[0], c[1], c[2])
				}
				l = int32(c[0])
			} else {
				var ok bool
				if l, ok = index[c]; !ok {
					return fmt.Errorf("mask %s: pixel (%d,%d) has colour #%02x%02x%02x, which is not in the %d-colour palette",
						name, x, y, c[0], c[1], c[2], len(pal))
				}
			}
			last, lastLabel = c, l
			dst[(y-b.Min.Y)*w+x-b.Min.X] = l
		}
	}
	return nil
}

// pixelRGB reads a pixel's non-premultiplied colour, directly from the
// pixel slice for the usual PNG types.
func pixelRGB(img image.Image, x, y int) [3]uint8 {
	switch m := img.(type) {
	case *image.NRGBA:
		i := m.PixOffset(x, y)
		return [3]uint8{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
	case *image.RGBA:
		i := m.PixOffset(x, y)
		if m.Pix[i+3] == 0xff {
			return [3]uint8{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
		}
	}
	n := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	return [3]uint8{n.R, n.G, n.B}
}

// remap applies opt.Map through a lookup table and checks the label range.
func (m *Mask) remap(name string, opt MaskOptions) error {
	lm := opt.Map
	if lm.IsIdentity() && opt.NumClasses <= 0 {
		return nil
	}
	maxRaw := int32(0)
	for _, l := range m.Labels {
		maxRaw = max(maxRaw, l)
	}
	// lut[l] is the mapped label, or -1 when the map rejects l.
	lut := make([]int32, maxRaw+1)
	for l := range lut {
		t, ok := lm.Map(int32(l))
		if !ok {
			t = -1
		}
		lut[l] = t
	}
	for i, l := range m.Labels {
		t := lut[l]
		if t < 0 {
			return fmt.Errorf("mask %s: label %d at pixel (%d,%d) is not in label map %q",
				name, l, i%m.Width, i/m.Width, lm.String())
		}
		if opt.NumClasses > 0 && int(t) >= opt.NumClasses && t != opt.Ignore {
			from := ""
			if t != l {
				from = fmt.Sprintf(" (mapped from %d)", l)
			}
			return fmt.Errorf("mask %s: label %d%s at pixel (%d,%d) is outside 0..%d and not the ignore label %d",
				name, t, from, i%m.Width, i/m.Width, opt.NumClasses-1, opt.Ignore)
		}
		m.Labels[i] = t
	}
	return nil
}

// Uint8 returns the labels as bytes, written into dst when it is large
// enough; it fails, naming the label, if one exceeds 255.
func (m *Mask) Uint8(dst []uint8) ([]uint8, error) {
	if cap(dst) < len(m.Labels) {
		dst = make([]uint8, len(m.Labels))
	}
	dst = dst[:len(m.Labels)]
	for i, l := range m.Labels {
		if l < 0 || l > 255 {
			return nil, fmt.Errorf("mask label %d at pixel (%d,%d) does not fit in a byte", l, i%m.Width, i/m.Width)
		}
		dst[i] = uint8(l)
	}
	return dst, nil
}
