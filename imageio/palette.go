package imageio

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"strconv"
	"strings"
)

// Palette maps labels to colours: entry i is the colour of label i. In JSON
// it is a list of "#rrggbb" strings ([r,g,b] arrays are accepted too).
type Palette []color.RGBA

// VOCPalette returns the first n colours of the Pascal VOC colormap (label 0
// black, 1 maroon, 2 green, ..., 255 the VOC "void" cream), the usual
// default for segmentation masks. n is clamped to 0..256.
func VOCPalette(n int) Palette {
	n = min(max(n, 0), 256)
	p := make(Palette, n)
	for i := range p {
		var r, g, b uint8
		c := i
		// Spread the bits of the label over the colour channels, most
		// significant first, so neighbouring labels get distinct colours.
		for j := 7; j >= 0; j-- {
			r |= uint8(c&1) << j
			g |= uint8(c>>1&1) << j
			b |= uint8(c>>2&1) << j
			c >>= 3
		}
		p[i] = color.RGBA{r, g, b, 0xff}
	}
	return p
}

// MaskPalette is the palette masks are written in: the palette image
// file's (ReadPalette) when one is given, else the model's settings' (nil:
// Pascal VOC's colours).
func (s Sidecar) MaskPalette(file string) (Palette, error) {
	if file != "" {
		return ReadPalette(file)
	}
	return s.Palette, nil
}

// ReadPalette reads a palette from an image file: a palette (indexed) PNG
// gives its colour table; any other image gives its pixels in row-major
// order (e.g. camvid12_palette.png, 256×1). Alpha is dropped.
func ReadPalette(path string) (Palette, error) {
	img, err := Decoder{MaxPixels: 1 << 16}.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read palette: %w", err)
	}
	if pm, ok := img.(*image.Paletted); ok && len(pm.Palette) > 0 {
		p := make(Palette, len(pm.Palette))
		for i, c := range pm.Palette {
			p[i] = opaque(c)
		}
		return p, nil
	}
	b := img.Bounds()
	p := make(Palette, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			p = append(p, opaque(img.At(x, y)))
		}
	}
	return p, nil
}

// opaque returns c's non-premultiplied colour with full alpha.
func opaque(c color.Color) color.RGBA {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return color.RGBA{n.R, n.G, n.B, 0xff}
}

// withDefaults returns p extended to n entries with VOC colours (nil p
// means all VOC), so any label up to n-1 has a colour.
func (p Palette) withDefaults(n int) Palette {
	if len(p) >= n {
		return p
	}
	voc := VOCPalette(n)
	copy(voc, p)
	return voc
}

// colorPalette converts to the standard library's type for image.Paletted.
func (p Palette) colorPalette() color.Palette {
	cp := make(color.Palette, len(p))
	for i, c := range p {
		cp[i] = color.RGBA{c.R, c.G, c.B, 0xff}
	}
	return cp
}

// MarshalJSON writes "#rrggbb" strings.
func (p Palette) MarshalJSON() ([]byte, error) {
	s := make([]string, len(p))
	for i, c := range p {
		s[i] = fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
	}
	return json.Marshal(s)
}

// UnmarshalJSON reads "#rrggbb" strings or [r,g,b] arrays.
func (p *Palette) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("palette: want a list of colours: %w", err)
	}
	out := make(Palette, len(raw))
	for i, r := range raw {
		c, err := parseColor(r)
		if err != nil {
			return fmt.Errorf("palette entry %d: %w", i, err)
		}
		out[i] = c
	}
	*p = out
	return nil
}

func parseColor(raw json.RawMessage) (color.RGBA, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		h, ok := strings.CutPrefix(s, "#")
		if !ok || len(h) != 6 {
			return color.RGBA{}, fmt.Errorf("colour %q is not #rrggbb", s)
		}
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return color.RGBA{}, fmt.Errorf("colour %q is not #rrggbb", s)
		}
		return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}, nil
	}
	var a []int
	if err := json.Unmarshal(raw, &a); err != nil || len(a) != 3 {
		return color.RGBA{}, fmt.Errorf("colour %s is neither \"#rrggbb\" nor [r,g,b]", raw)
	}
	for _, v := range a {
		if v < 0 || v > 255 {
			return color.RGBA{}, fmt.Errorf("colour %s has a component outside 0..255", raw)
		}
	}
	return color.RGBA{uint8(a[0]), uint8(a[1]), uint8(a[2]), 0xff}, nil
}
