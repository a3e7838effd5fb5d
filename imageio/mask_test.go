package imageio

import (
	"bytes"
	"image"
	"image/color"
	"slices"
	"strings"
	"testing"
)

func grayMask(w, h int, labels []uint8) *image.Gray {
	g := image.NewGray(image.Rect(0, 0, w, h))
	copy(g.Pix, labels)
	return g
}

func TestReadMaskTypes(t *testing.T) {
	labels := []uint8{0, 1, 2, 3, 11, 9}
	want := []int32{0, 1, 2, 3, 11, 9}
	g16 := image.NewGray16(image.Rect(0, 0, 3, 2))
	for i, l := range labels {
		g16.SetGray16(i%3, i/3, color.Gray16{uint16(l)})
	}
	g16.SetGray16(2, 1, color.Gray16{300})
	pal := image.NewPaletted(image.Rect(0, 0, 3, 2), VOCPalette(12).colorPalette())
	copy(pal.Pix, labels)
	// Colour mask using the VOC palette's colours.
	rgb := image.NewRGBA(image.Rect(0, 0, 3, 2))
	voc := VOCPalette(256)
	for i, l := range labels {
		rgb.SetRGBA(i%3, i/3, voc[l])
	}
	// Grey levels stored as RGB, no palette needed.
	greyRGB := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	for i, l := range labels {
		greyRGB.SetNRGBA(i%3, i/3, color.NRGBA{l, l, l, 255})
	}
	cases := []struct {
		name string
		img  image.Image
		opt  MaskOptions
		want []int32
	}{
		{"gray", grayMask(3, 2, labels), MaskOptions{}, want},
		{"gray16", g16, MaskOptions{}, []int32{0, 1, 2, 3, 11, 300}},
		{"paletted", pal, MaskOptions{}, want},
		{"rgb+palette", rgb, MaskOptions{Palette: voc}, want},
		{"grey rgb", greyRGB, MaskOptions{}, want},
	}
	for _, c := range cases {
		m, err := DecodeMask(bytes.NewReader(encodePNG(t, c.img)), c.name+".png", c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Width != 3 || m.Height != 2 || !slices.Equal(m.Labels, c.want) {
			t.Errorf("%s: got %dx%d %v, want %v", c.name, m.Width, m.Height, m.Labels, c.want)
		}
	}
}

func TestMaskRemapAndChecks(t *testing.T) {
	data := encodePNG(t, grayMask(4, 2, []uint8{0, 9, 10, 11, 3, 8, 9, 11}))
	person := mustParseMap(t, "9,10:1;11:255;*:0")
	m, err := DecodeMask(bytes.NewReader(data), "m.png", MaskOptions{Map: person, NumClasses: 2, Ignore: 255})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{0, 1, 1, 255, 0, 0, 1, 255}; !slices.Equal(m.Labels, want) {
		t.Fatalf("remapped %v, want %v", m.Labels, want)
	}
	b, err := m.Uint8(nil)
	if err != nil || b[3] != 255 || b[1] != 1 {
		t.Fatalf("Uint8: %v %v", b, err)
	}

	// Without the map, label 9 exceeds 2 classes.
	_, err = DecodeMask(bytes.NewReader(data), "m.png", MaskOptions{NumClasses: 2, Ignore: 255})
	if err == nil || !strings.Contains(err.Error(), "m.png") || !strings.Contains(err.Error(), "label 9") ||
		!strings.Contains(err.Error(), "(1,0)") {
		t.Fatalf("want error naming file, label 9 and pixel (1,0), got %v", err)
	}
	// A mapped label out of range says where it came from.
	_, err = DecodeMask(bytes.NewReader(data), "m.png", MaskOptions{Map: mustParseMap(t, "11:70"), NumClasses: 12})
	if err == nil || !strings.Contains(err.Error(), "label 70 (mapped from 11)") {
		t.Fatalf("want mapped label error, got %v", err)
	}
	// "*:error" maps nothing but 0, 9, 10, 11.
	_, err = DecodeMask(bytes.NewReader(data), "m.png", MaskOptions{Map: mustParseMap(t, "0:0;9-11:1;*:error")})
	if err == nil || !strings.Contains(err.Error(), "label 3") || !strings.Contains(err.Error(), "not in label map") {
		t.Fatalf("want unmapped label error, got %v", err)
	}
}

func TestMaskSizeMismatch(t *testing.T) {
	data := encodePNG(t, grayMask(4, 2, make([]uint8, 8)))
	_, err := DecodeMask(bytes.NewReader(data), "masks/a.png", MaskOptions{Width: 480, Height: 360})
	if err == nil || !strings.Contains(err.Error(), "masks/a.png") || !strings.Contains(err.Error(), "4x2") ||
		!strings.Contains(err.Error(), "480x360") {
		t.Fatalf("want error naming file and both sizes, got %v", err)
	}
}

func TestColourMaskErrors(t *testing.T) {
	rgb := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for i := range rgb.Pix {
		rgb.Pix[i] = 255
	}
	rgb.SetRGBA(2, 1, color.RGBA{1, 2, 3, 255})
	data := encodePNG(t, rgb)
	_, err := DecodeMask(bytes.NewReader(data), "c.png", MaskOptions{Palette: Palette{{255, 255, 255, 255}}})
	if err == nil || !strings.Contains(err.Error(), "c.png") || !strings.Contains(err.Error(), "(2,1)") ||
		!strings.Contains(err.Error(), "#010203") {
		t.Fatalf("want error naming file, pixel and colour, got %v", err)
	}
	_, err = DecodeMask(bytes.NewReader(data), "c.png", MaskOptions{})
	if err == nil || !strings.Contains(err.Error(), "need a palette") {
		t.Fatalf("colour mask without palette: got %v", err)
	}
	// First match wins for duplicated palette colours.
	m, err := DecodeMask(bytes.NewReader(data), "c.png", MaskOptions{Palette: Palette{{0, 0, 0, 255}, {1, 2, 3, 255}, {255, 255, 255, 255}, {255, 255, 255, 255}}})
	if err != nil || m.Labels[0] != 2 || m.Labels[5] != 1 {
		t.Fatalf("got %v, %v", m, err)
	}
}

func TestMaskUint8Overflow(t *testing.T) {
	m := &Mask{Width: 2, Height: 1, Labels: []int32{1, 300}}
	if _, err := m.Uint8(nil); err == nil || !strings.Contains(err.Error(), "300") {
		t.Fatalf("got %v", err)
	}
}
