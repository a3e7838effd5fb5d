package imageio

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"strings"

	"github.com/disintegration/imaging"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Sheet is a contact sheet: a grid of images under column headings, each
// row with a caption above it, laid out and scaled with imaging. Cells are
// scaled to CellWidth: small images up by a whole factor with nearest
// neighbour (pixels stay crisp, labels unblended), larger ones down with
// a Lanczos filter.
type Sheet struct {
	// Columns heads the columns; every row has one cell per column.
	Columns []string
	Rows    []SheetRow
	// CellWidth is the width of a cell in pixels; 0 means 256.
	CellWidth int
}

// SheetRow is one row of a Sheet.
type SheetRow struct {
	Caption string
	Cells   []image.Image
}

// Layout constants of a sheet, in pixels.
const (
	sheetGap  = 6  // between cells and around the sheet
	sheetText = 18 // height of a heading or caption line
)

var (
	sheetBackground = color.NRGBA{255, 255, 255, 255}
	sheetInk        = image.NewUniform(color.NRGBA{20, 20, 20, 255})
)

// Render draws the sheet.
func (s Sheet) Render() (*image.NRGBA, error) {
	if len(s.Columns) == 0 || len(s.Rows) == 0 {
		return nil, errors.New("contact sheet: no columns or no rows")
	}
	cw := s.CellWidth
	if cw == 0 {
		cw = 256
	}
	if cw < 16 || cw > 4096 {
		return nil, fmt.Errorf("contact sheet: cell width %d outside 16..4096", cw)
	}
	rows := make([][]*image.NRGBA, len(s.Rows))
	heights := make([]int, len(s.Rows))
	for r, row := range s.Rows {
		if len(row.Cells) != len(s.Columns) {
			return nil, fmt.Errorf("contact sheet: row %d has %d cells for %d columns", r, len(row.Cells), len(s.Columns))
		}
		for c, img := range row.Cells {
			if img == nil || img.Bounds().Empty() {
				return nil, fmt.Errorf("contact sheet: row %d, column %d is empty", r, c)
			}
			cell := fitWidth(img, cw)
			rows[r] = append(rows[r], cell)
			heights[r] = max(heights[r], cell.Bounds().Dy())
		}
	}
	width := sheetGap + len(s.Columns)*(cw+sheetGap)
	height := sheetGap + sheetText
	for _, h := range heights {
		height += sheetText + h + sheetGap
	}
	out := imaging.New(width, height, sheetBackground)
	for c, name := range s.Columns {
		drawText(out, name, sheetGap+c*(cw+sheetGap), sheetGap, cw)
	}
	y := sheetGap + sheetText
	for r, row := range rows {
		drawText(out, s.Rows[r].Caption, sheetGap, y, width-2*sheetGap)
		y += sheetText
		for c, cell := range row {
			out = imaging.Paste(out, cell, image.Pt(sheetGap+c*(cw+sheetGap), y))
		}
		y += heights[r] + sheetGap
	}
	return out, nil
}

// WritePNG renders the sheet and writes it to path atomically.
func (s Sheet) WritePNG(path string) error {
	img, err := s.Render()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WritePNG(path, img)
}

// fitWidth scales img to width w: up by a whole factor with nearest
// neighbour (then down to w if the factor overshoots), down with Lanczos.
func fitWidth(img image.Image, w int) *image.NRGBA {
	iw := img.Bounds().Dx()
	switch {
	case iw == w:
		return imaging.Clone(img)
	case iw < w:
		k := w / iw
		if k > 1 {
			img = imaging.Resize(img, k*iw, 0, imaging.NearestNeighbor)
		}
		if img.Bounds().Dx() == w {
			return imaging.Clone(img)
		}
		return imaging.Resize(img, w, 0, imaging.Linear)
	}
	return imaging.Resize(img, w, 0, imaging.Lanczos)
}

// drawText writes s at (x, y) (top left of a sheetText-high line) in the
// 7×13 basic font, cut to maxWidth.
func drawText(dst draw.Image, s string, x, y, maxWidth int) {
	face := basicfont.Face7x13
	s = asciiText(s)
	if n := maxWidth / face.Advance; len(s) > n && n > 3 {
		s = s[:n-3] + "..."
	}
	d := font.Drawer{Dst: dst, Src: sheetInk, Face: face,
		Dot: fixed.P(x, y+(sheetText+face.Ascent-face.Descent)/2)}
	d.DrawString(s)
}

// greek spells out the letters segtune's run names use; the basic font
// has ASCII only.
var greek = strings.NewReplacer("α", "alpha", "β", "beta", "ε", "eps", "τ", "tau", "λ", "lambda", "μ", "mu", "σ", "sigma", "…", "...")

// asciiText spells out Greek letters and replaces other characters the
// basic font lacks by '?'.
func asciiText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, greek.Replace(s))
}

// LabelImage draws labels (w×h) in pal's colours (nil: the VOC palette),
// so that a ground truth or a prediction can be shown, e.g. in a Sheet.
func LabelImage(labels []uint8, w, h int, pal Palette) (*image.NRGBA, error) {
	if len(labels) != w*h {
		return nil, fmt.Errorf("label image: %d labels for %dx%d (WxH)", len(labels), w, h)
	}
	pal = pal.withDefaults(256)
	out := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i, l := range labels {
		c := pal[l]
		out.Pix[4*i], out.Pix[4*i+1], out.Pix[4*i+2], out.Pix[4*i+3] = c.R, c.G, c.B, 0xff
	}
	return out, nil
}
