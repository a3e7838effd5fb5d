package imageio

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEncodePalettedPNGRoundTrip checks the packed encoder against
// image/png's decoder at every bit depth, row lengths that leave every
// possible partial last byte, and a sub-image (a stride wider than the row).
func TestEncodePalettedPNGRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 2, 3, 4, 5, 16, 17, 255, 256} {
		pal := make(color.Palette, n)
		for i := range pal {
			pal[i] = color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 0xff}
		}
		for _, width := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 33} {
			full := image.NewPaletted(image.Rect(0, 0, width+3, 5), pal)
			for i := range full.Pix {
				full.Pix[i] = uint8(rng.IntN(n))
			}
			m := full.SubImage(image.Rect(1, 1, 1+width, 5)).(*image.Paletted)
			var buf bytes.Buffer
			ok, err := encodePalettedPNG(&buf, m)
			if !ok || err != nil {
				t.Fatalf("palette %d, width %d: ok %v, err %v", n, width, ok, err)
			}
			got, err := png.Decode(&buf)
			if err != nil {
				t.Fatalf("palette %d, width %d: image/png cannot read it: %v", n, width, err)
			}
			gp, isP := got.(*image.Paletted)
			if !isP || gp.Bounds().Dx() != width || gp.Bounds().Dy() != 4 {
				t.Fatalf("palette %d, width %d: decoded %T %v", n, width, got, got.Bounds())
			}
			for y := 0; y < 4; y++ {
				want := m.Pix[m.PixOffset(1, 1+y):][:width]
				if have := gp.Pix[gp.PixOffset(0, y):][:width]; !bytes.Equal(have, want) {
					t.Fatalf("palette %d, width %d, row %d: indices %v, want %v", n, width, y, have, want)
				}
			}
			if !slices.EqualFunc(gp.Palette, pal, func(a, b color.Color) bool { return color.RGBAModel.Convert(a) == b }) {
				t.Fatalf("palette %d, width %d: palette not kept", n, width)
			}
		}
	}
}

// TestEncodePalettedPNGDeclines: images the packed path does not handle go
// to image/png through EncodePNG, and still read back.
func TestEncodePalettedPNGDeclines(t *testing.T) {
	opaque := color.Palette{color.RGBA{0, 0, 0, 0xff}, color.RGBA{255, 0, 0, 0xff}}
	cases := map[string]*image.Paletted{
		"index outside the palette": {Pix: []uint8{0, 1, 2, 1}, Stride: 2, Rect: image.Rect(0, 0, 2, 2), Palette: opaque},
		"translucent colour":        {Pix: []uint8{0, 1, 1, 0}, Stride: 2, Rect: image.Rect(0, 0, 2, 2), Palette: color.Palette{color.RGBA{0, 0, 0, 0}, color.RGBA{9, 9, 9, 0xff}}},
		"empty palette":             {Pix: []uint8{0}, Stride: 1, Rect: image.Rect(0, 0, 1, 1)},
	}
	for name, m := range cases {
		var buf bytes.Buffer
		if ok, _ := encodePalettedPNG(&buf, m); ok || buf.Len() != 0 {
			t.Errorf("%s: packed path took it (ok %v, %d bytes written)", name, ok, buf.Len())
		}
	}
	var buf bytes.Buffer
	m := cases["translucent colour"]
	if err := EncodePNG(&buf, m); err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if gp, ok := got.(*image.Paletted); !ok || !bytes.Equal(gp.Pix, m.Pix) {
		t.Fatalf("EncodePNG's fallback read back as %T %v", got, got)
	}
}

func TestIndicesBelow(t *testing.T) {
	row := make([]byte, 21)
	for _, n := range []int{1, 2, 3, 4, 8, 16, 100, 128, 255} {
		for i := range row {
			clear(row)
			row[i] = byte(n - 1)
			if !indicesBelow(row, n) {
				t.Fatalf("n %d: index %d at %d reported out of range", n, n-1, i)
			}
			row[i] = byte(n)
			if indicesBelow(row, n) {
				t.Fatalf("n %d: index %d at %d not caught", n, n, i)
			}
		}
	}
}

func BenchmarkEncodeMask480x360(b *testing.B) {
	labels := make([]uint8, 480*360)
	for y := 0; y < 360; y++ {
		for x := 0; x < 480; x++ {
			if (x-200)*(x-200)+(y-180)*(y-180) < 60*60 {
				labels[y*480+x] = 1
			}
		}
	}
	var buf bytes.Buffer
	for b.Loop() {
		img, err := MaskImage(labels, 480, 360, nil)
		if err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if err := EncodePNG(&buf, img); err != nil {
			b.Fatal(err)
		}
	}
}
