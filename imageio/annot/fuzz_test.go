package annot

import (
	"bytes"
	"os"
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

// FuzzDecodeCVATXML feeds arbitrary bytes to the CVAT XML reader: it must
// refuse them or return samples whose masks have their declared size,
// never panic, and allocate in proportion to its input.
func FuzzDecodeCVATXML(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "cvat_for_images.xml")); err == nil {
		f.Add(data)
	}
	for _, seed := range []string{
		`<annotations><meta><task><labels><label><name>a</name></label></labels></task></meta><image name="x.png" width="4" height="3"><mask label="a" rle="1, 2, 3" left="1" top="0" width="3" height="2"/><polygon label="a" points="0,0;3,0;0,2" z_order="-1"/></image></annotations>`,
		`<annotations><image name="x.png" width="8" height="8"><box label="b" xtl="1" ytl="1" xbr="6" ybr="5" rotation="30"/><ellipse label="c" cx="4" cy="4" rx="3" ry="2" rotation="10"/></image></annotations>`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var set *Set
		var err error
		if got := allocated(func() {
			set, err = decodeCVATXML(bytes.NewReader(data), "a.xml", CVATXMLOptions{MaxPixels: 1 << 16})
		}); got > fuzzAllocLimit(len(data)) {
			t.Fatalf("%d bytes of input allocated %d", len(data), got)
		}
		if err != nil {
			return
		}
		for _, s := range set.Samples {
			m, err := s.Mask()
			if err != nil || len(m) != s.Width*s.Height {
				t.Fatalf("mask of %d pixels for %dx%d: %v", len(m), s.Width, s.Height, err)
			}
		}
	})
}

// FuzzLabelMePolygons turns arbitrary bytes into a small label map, and
// the shapes the LabelMe writer makes of it must redraw it exactly as
// labelme (and segtune's reader) draws them.
func FuzzLabelMePolygons(f *testing.F) {
	f.Add([]byte{5, 4, 0, 1, 1, 0, 2, 1, 0, 1, 1, 0, 0, 2, 2, 1, 1, 0, 2, 0, 1, 1})
	f.Add([]byte{3, 3, 1, 1, 1, 1, 0, 1, 1, 1, 1})
	f.Add([]byte{4, 4, 1, 2, 1, 2, 2, 1, 2, 1, 1, 2, 1, 2, 2, 1, 2, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		w, h := 1+int(data[0])%24, 1+int(data[1])%24
		labels := make([]uint8, w*h)
		for i := range labels {
			labels[i] = data[2+i%(len(data)-2)] % 4
		}
		p := Prediction{Image: "a.png", Width: w, Height: h, Labels: labels}
		lw := &labelMeWriter{opt: WriteOptions{Classes: writeClasses}}
		out, err := lw.shapes(p)
		if err != nil {
			t.Fatal(err)
		}
		classOf := map[string]uint8{LabelMeBackground: 0}
		for i, c := range writeClasses[1:] {
			classOf[c] = uint8(i + 1)
		}
		var drawn []lmDrawn
		for i, s := range out {
			in := lmShape{Label: &s.Label, ShapeType: s.ShapeType, Mask: s.Mask}
			for _, pt := range s.Points {
				in.Points = append(in.Points, []float64{float64(pt[0]), float64(pt[1])})
			}
			d, err := checkLabelMeShape(in, w, h, 1<<20)
			if err != nil {
				t.Fatalf("shape %d: %v", i, err)
			}
			d.class = classOf[s.Label]
			drawn = append(drawn, d)
		}
		m, err := paintLabelMe(drawn, w, h, "a.json")
		if err != nil || !slices.Equal(m, labels) {
			t.Fatalf("%dx%d: redrawn\n%v\nwant\n%v (%v)", w, h, m, labels, err)
		}
	})
}
