package datalayout

import (
	"image"
	"image/color"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadMaskPaletteRefusesAShadowedClass: a palette image giving two
// classes one colour, with a new colour after them, is refused naming the
// class no mask could hold; one padded to its end with a repeated colour
// (camvid12_palette.png's black) is read as it is.
func TestReadMaskPaletteRefusesAShadowedClass(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, cs ...color.RGBA) string {
		img := image.NewRGBA(image.Rect(0, 0, len(cs), 1))
		for i, c := range cs {
			img.Set(i, 0, c)
		}
		p := filepath.Join(dir, name)
		writeImageFile(t, p, img)
		return p
	}
	red, green, blue, black := color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}, color.RGBA{0, 0, 255, 255}, color.RGBA{0, 0, 0, 255}
	padded := write("padded.png", red, green, black, black, black, black)
	if pal, _, err := ReadMaskPalette(padded); err != nil || len(pal) != 6 {
		t.Fatalf("padded palette: %v, %v", pal, err)
	}
	shadowed := write("shadowed.png", red, green, red, blue)
	if _, _, err := ReadMaskPalette(shadowed); err == nil || !strings.Contains(err.Error(), "classes 0 and 2 have one colour (255,0,0)") ||
		!strings.Contains(err.Error(), "shadowed.png") {
		t.Fatalf("error %v, want one naming the file and classes 0 and 2", err)
	}
}
