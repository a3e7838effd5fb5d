package annot

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeLabelMe writes preds as LabelMe files and reads them back with
// segtune's reader, returning the files' shapes too.
func writeLabelMe(t *testing.T, preds []Prediction) (*Set, [][]lmShapeOut) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "labelme")
	addAll(t, NewLabelMeWriter(out, out, WriteOptions{Classes: writeClasses}), preds)
	var files []string
	var shapes [][]lmShapeOut
	for _, p := range preds {
		f := filepath.Join(out, filepath.FromSlash(p.Name())+".json")
		files = append(files, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lf lmFileOut
		if err := json.Unmarshal(data, &lf); err != nil {
			t.Fatal(err)
		}
		shapes = append(shapes, lf.Shapes)
	}
	set, err := ReadLabelMe(files, LabelMeOptions{Root: out, Labels: append([]string{LabelMeBackground}, writeClasses[1:]...)})
	if err != nil {
		t.Fatal(err)
	}
	checkSameMasks(t, set, preds, func(p Prediction) string { return filepath.Join(out, filepath.FromSlash(p.Name())+".json") })
	return set, shapes
}

// Regions become polygons, simplified: the rectangles are 4 points each,
// the ring's hole a later _background_ polygon, and the disc far fewer
// points than its boundary has pixels; read back, the masks are exact.
func TestLabelMeWriterPolygons(t *testing.T) {
	preds := writePredictions()
	_, shapes := writeLabelMe(t, preds)
	for _, s := range shapes[0] { // rects
		if s.ShapeType != "polygon" || s.Mask != nil {
			t.Errorf("rects: a %s shape, want polygons only", s.ShapeType)
		}
		if s.Label != "tree" && len(s.Points) != 4 {
			t.Errorf("rects: %s has %d points %v, want a rectangle's 4", s.Label, len(s.Points), s.Points)
		}
	}
	if len(shapes[0]) != 5 {
		t.Errorf("rects: %d shapes, want 5 (one per region)", len(shapes[0]))
	}
	var labels []string
	for _, s := range shapes[1] { // blob: a ring, its hole, a cut disc
		labels = append(labels, s.Label)
		if s.ShapeType != "polygon" {
			t.Errorf("blob: a %s shape, want polygons only", s.ShapeType)
		}
		// The ring's outline has 56 boundary pixels (it is written with 20).
		if s.Label == "car" && len(s.Points) > 32 {
			t.Errorf("blob: the ring has %d points, want it simplified to 32 or fewer", len(s.Points))
		}
	}
	if want := []string{"car", LabelMeBackground, "tree"}; !slices.Equal(labels, want) {
		t.Errorf("blob: shapes %q, want %q (the hole after its ring)", labels, want)
	}
	if len(shapes[2]) != 0 {
		t.Errorf("empty: %d shapes, want none", len(shapes[2]))
	}
}

// Random maps — speckles, diagonal contacts, rings in rings, regions of
// one class in another's hole — read back exactly.
func TestLabelMeWriterRandomMapsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var preds []Prediction
	masks := 0
	for i := range 40 {
		w, h := 8+rng.IntN(25), 8+rng.IntN(25)
		p := Prediction{Image: "r" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".png", Width: w, Height: h, Labels: make([]uint8, w*h)}
		// Blobs of random classes over each other, then speckles.
		for range 1 + rng.IntN(6) {
			cx, cy, r := rng.IntN(w), rng.IntN(h), 1+rng.IntN(8)
			c := uint8(rng.IntN(4))
			for y := range h {
				for x := range w {
					if (x-cx)*(x-cx)+(y-cy)*(y-cy) < r*r {
						p.Labels[y*w+x] = c
					}
				}
			}
		}
		for range rng.IntN(w * h / 8) {
			p.Labels[rng.IntN(w*h)] = uint8(rng.IntN(4))
		}
		preds = append(preds, p)
	}
	_, shapes := writeLabelMe(t, preds)
	polygons := 0
	for _, ss := range shapes {
		for _, s := range ss {
			if s.ShapeType == "mask" {
				masks++
			} else {
				polygons++
			}
		}
	}
	t.Logf("%d polygons, %d masks", polygons, masks)
	if polygons < 10*masks {
		t.Errorf("%d polygons and %d masks: want masks only where polygons cannot be", polygons, masks)
	}
}

// A map whose polygons would pass the reader's limits is written as a
// mask per class, and still reads back.
func TestLabelMeWriterNoisyMapAsMasks(t *testing.T) {
	w, h := 300, 300
	p := Prediction{Image: "noise.png", Width: w, Height: h, Labels: make([]uint8, w*h)}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range p.Labels {
		p.Labels[i] = uint8(rng.IntN(4))
	}
	_, shapes := writeLabelMe(t, []Prediction{p})
	if len(shapes[0]) != 3 || shapes[0][0].ShapeType != "mask" {
		t.Errorf("%d shapes (first %q), want 3 masks", len(shapes[0]), shapes[0][0].ShapeType)
	}
}
