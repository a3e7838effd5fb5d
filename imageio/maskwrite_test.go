package imageio

import (
	"image"
	"image/color"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestVOCPalette(t *testing.T) {
	p := VOCPalette(256)
	want := map[int]color.RGBA{
		0: {0, 0, 0, 255}, 1: {128, 0, 0, 255}, 2: {0, 128, 0, 255}, 3: {128, 128, 0, 255},
		15: {192, 128, 128, 255}, 255: {224, 224, 192, 255},
	}
	for i, c := range want {
		if p[i] != c {
			t.Errorf("VOC[%d] = %v, want %v", i, p[i], c)
		}
	}
	if len(VOCPalette(-1)) != 0 || len(VOCPalette(1000)) != 256 {
		t.Error("VOCPalette does not clamp n")
	}
}

func TestWriteMaskRoundTrip(t *testing.T) {
	dir := t.TempDir()
	labels := []uint8{0, 1, 2, 255, 5, 1}
	path := filepath.Join(dir, "out.png")
	if err := WriteMaskPNG(path, labels, 3, 2, Palette{{1, 2, 3, 255}}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMask(path, MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := m.Uint8(nil)
	if !slices.Equal(got, labels) {
		t.Fatalf("read back %v, want %v", got, labels)
	}
	img, err := ReadImage(path)
	if err != nil {
		t.Fatal(err)
	}
	pm, ok := img.(*image.Paletted)
	if !ok {
		t.Fatalf("mask decoded as %T, want a palette image", img)
	}
	// Given colour first, then VOC colours for the labels it lacks.
	if len(pm.Palette) != 256 || pm.Palette[0] != (color.RGBA{1, 2, 3, 255}) || pm.Palette[1] != (color.RGBA{128, 0, 0, 255}) {
		t.Fatalf("palette %d entries, [0]=%v [1]=%v", len(pm.Palette), pm.Palette[0], pm.Palette[1])
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"out.png"}) {
		t.Fatalf("directory holds %v, want only out.png", names)
	}
	if err := WriteMaskPNG(path, labels, 4, 2, nil); err == nil || !strings.Contains(err.Error(), "out.png") {
		t.Fatalf("wrong size: got %v", err)
	}
}

func TestOverlay(t *testing.T) {
	img := uniformRGBA(2, 1, color.RGBA{100, 100, 100, 255})
	pal := Palette{{0, 0, 0, 255}, {255, 0, 0, 255}}
	out, err := Overlay(img, []uint8{0, 1}, pal, OverlayOptions{Alpha: 0.5, Skip: []uint8{0}})
	if err != nil {
		t.Fatal(err)
	}
	if c := out.RGBAAt(0, 0); c != (color.RGBA{100, 100, 100, 255}) {
		t.Errorf("skipped label tinted: %v", c)
	}
	if c := out.RGBAAt(1, 0); c != (color.RGBA{178, 50, 50, 255}) {
		t.Errorf("blend = %v, want {178 50 50 255}", c)
	}
	full, _ := Overlay(img, []uint8{0, 1}, pal, OverlayOptions{Alpha: 1})
	if c := full.RGBAAt(1, 0); c != (color.RGBA{255, 0, 0, 255}) {
		t.Errorf("alpha 1 = %v", c)
	}
	if _, err := Overlay(img, []uint8{0}, pal, OverlayOptions{}); err == nil {
		t.Error("label count mismatch accepted")
	}
	if _, err := Overlay(img, []uint8{0, 1}, pal, OverlayOptions{Alpha: 1.5}); err == nil {
		t.Error("alpha 1.5 accepted")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "ov.png")
	if err := WriteOverlayPNG(p, img, []uint8{0, 1}, nil, OverlayOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadImage(p)
	if err != nil || back.Bounds().Dx() != 2 {
		t.Fatalf("overlay read back: %v %v", back, err)
	}
}

func TestReadPalette(t *testing.T) {
	dir := t.TempDir()
	strip := image.NewNRGBA(image.Rect(0, 0, 3, 1))
	strip.SetNRGBA(1, 0, color.NRGBA{10, 20, 30, 255})
	strip.SetNRGBA(2, 0, color.NRGBA{40, 50, 60, 0}) // alpha dropped
	p, err := ReadPalette(writeTemp(t, dir, "strip.png", encodePNG(t, strip)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Palette{{0, 0, 0, 255}, {10, 20, 30, 255}, {40, 50, 60, 255}}); !slices.Equal(p, want) {
		t.Fatalf("strip palette %v, want %v", p, want)
	}
	pm := image.NewPaletted(image.Rect(0, 0, 1, 1), color.Palette{color.RGBA{9, 8, 7, 255}, color.RGBA{1, 1, 1, 255}})
	p, err = ReadPalette(writeTemp(t, dir, "pal.png", encodePNG(t, pm)))
	if err != nil || len(p) != 2 || p[0] != (color.RGBA{9, 8, 7, 255}) {
		t.Fatalf("indexed palette %v %v", p, err)
	}
}
