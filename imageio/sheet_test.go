package imageio

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"
)

func TestSheetLayout(t *testing.T) {
	red := uniformRGBA(32, 24, color.RGBA{200, 0, 0, 255})
	green := uniformRGBA(32, 24, color.RGBA{0, 200, 0, 255})
	big := uniformRGBA(512, 384, color.RGBA{0, 0, 200, 255})
	s := Sheet{
		Columns:   []string{"image", "ground truth", "prediction"},
		Rows:      []SheetRow{{Caption: "small", Cells: []image.Image{red, green, red}}, {Caption: "large", Cells: []image.Image{big, big, green}}},
		CellWidth: 128,
	}
	img, err := s.Render()
	if err != nil {
		t.Fatal(err)
	}
	// 32×24 scales ×4 to 128×96; 512×384 down to 128×96.
	wantW := sheetGap + 3*(128+sheetGap)
	wantH := sheetGap + sheetText + 2*(sheetText+96+sheetGap)
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Fatalf("sheet %v, want %dx%d", b, wantW, wantH)
	}
	at := func(col, row int) color.NRGBA {
		x := sheetGap + col*(128+sheetGap) + 64
		y := sheetGap + sheetText + row*(sheetText+96+sheetGap) + sheetText + 48
		return img.NRGBAAt(x, y)
	}
	for _, c := range []struct {
		col, row int
		want     color.NRGBA
	}{{0, 0, color.NRGBA{200, 0, 0, 255}}, {1, 0, color.NRGBA{0, 200, 0, 255}}, {0, 1, color.NRGBA{0, 0, 200, 255}}, {2, 1, color.NRGBA{0, 200, 0, 255}}} {
		if got := at(c.col, c.row); got != c.want {
			t.Errorf("cell (%d, %d) = %v, want %v", c.col, c.row, got, c.want)
		}
	}
	// The headings are drawn: dark pixels in the first text line.
	dark := 0
	for y := sheetGap; y < sheetGap+sheetText; y++ {
		for x := 0; x < wantW; x++ {
			if img.NRGBAAt(x, y).R < 100 {
				dark++
			}
		}
	}
	if dark < 50 {
		t.Errorf("%d dark pixels in the heading line: no text?", dark)
	}
	if err := s.WritePNG(filepath.Join(t.TempDir(), "s.png")); err != nil {
		t.Fatal(err)
	}

	s.Rows[1].Cells = s.Rows[1].Cells[:2]
	if _, err := s.Render(); err == nil {
		t.Error("a row with a missing cell was accepted")
	}
	if _, err := (Sheet{Columns: []string{"a"}}).Render(); err == nil {
		t.Error("a sheet without rows was accepted")
	}
}
