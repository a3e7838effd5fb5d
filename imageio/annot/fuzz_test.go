package annot

import (
	"path/filepath"
	"slices"
	"testing"
)

// FuzzDecodeRLEString feeds arbitrary strings and mask sizes to the COCO
// RLE string decoder: it must return an error or counts that sum to the
// mask and survive a round trip through the reference encoding.
func FuzzDecodeRLEString(f *testing.F) {
	for _, seed := range []struct {
		s string
		n int
	}{
		{"dQ2Xf<h3\\ff2Pj2", 120000}, // reference encoder, 300×400
		{"0`0", 1 << 20},
		{"<", 12},
		{"04", 4},
		{"@", 5},
		{"ooooooo?", 1 << 20},
		{"0\x00", 5},
		{"12A", 100},
		{"", 0},
	} {
		f.Add(seed.s, seed.n)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<24 {
			return
		}
		counts, err := decodeRLEString(s, n)
		if err != nil {
			return
		}
		sum := 0
		for _, c := range counts {
			sum += int(c)
		}
		if sum != n {
			t.Fatalf("%q: counts sum to %d, not %d", s, sum, n)
		}
		again, err := decodeRLEString(encodeRLEString(counts), n)
		if err != nil || !slices.Equal(again, counts) {
			t.Fatalf("%q: round trip gave %v, %v; want %v", s, again, err, counts)
		}
	})
}

// FuzzDecodeLabelMe feeds arbitrary bytes to the LabelMe decoder: it
// must refuse them or return shapes that paint a mask of the declared
// size, never panic, and allocate in proportion to its input.
func FuzzDecodeLabelMe(f *testing.F) {
	for _, seed := range []string{
		labelMeJSON("a.png", 12, 9, "", lmShapeJSON("a", "polygon", [2]float64{1, 1}, [2]float64{10.5, 3}, [2]float64{4, 8.7})),
		labelMeJSON("a.png", 5, 5, "", lmShapeJSON("a", "circle", [2]float64{2, 2}, [2]float64{4, 4}), lmShapeJSON("b", "linestrip", [2]float64{0, 0}, [2]float64{4, 1}, [2]float64{1, 4})),
		labelMeJSON("a.png", 3, 3, "", lmShapeJSON("a", "point", [2]float64{-3, 6})),
		`{"shapes": [{"label": "a", "points": [[0, 0], [2, 0], [2, 2]]}], "imagePath": "x.png", "imageWidth": 3, "imageHeight": 3}`,
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Sample
		var shapes []lmDrawn
		var err error
		if got := allocated(func() {
			s, shapes, _, err = decodeLabelMe(data, filepath.Join(dir, "a.json"), LabelMeOptions{MaxPixels: 1 << 16})
		}); got > fuzzAllocLimit(len(data)) {
			t.Fatalf("%d bytes of input allocated %d", len(data), got)
		}
		if err != nil {
			return
		}
		for i := range shapes {
			shapes[i].class = uint8(i%3 + 1)
		}
		m, err := paintLabelMe(shapes, s.Width, s.Height, "a.json")
		if err == nil && len(m) != s.Width*s.Height {
			t.Fatalf("mask of %d pixels for %dx%d", len(m), s.Width, s.Height)
		}
	})
}
