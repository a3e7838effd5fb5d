package data

import (
	"context"
	"math"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
)

// openCamVid opens the shared CamVid train split with Unlabelled (11) as
// the ignore label, skipping when the assets are absent.
func openCamVid(tb testing.TB) *Dataset {
	tb.Helper()
	root := testassets.Require(tb, "data", "camvid")
	lm, err := imageio.ParseLabelMap("11:255")
	if err != nil {
		tb.Fatal(err)
	}
	ds, problems, err := Open(context.Background(), Config{
		Data: root, Split: "train", LabelMap: lm, NumClasses: 11,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(problems) > 0 {
		tb.Fatalf("problems: %v", problems)
	}
	return ds
}

func TestCamVid(t *testing.T) {
	if raceEnabled {
		// Decoding 367 PNGs takes a minute under the race detector; the
		// synthetic tests cover the loader's concurrency.
		t.Skip("slow under the race detector")
	}
	ds := openCamVid(t)
	if ds.Len() != 367 {
		t.Fatalf("%d training examples, want 367", ds.Len())
	}
	if n, _ := ds.Cached(); n != 367 {
		t.Fatalf("%d examples cached, want all", n)
	}
	e, _ := ds.Example(0)
	if e.Width != 480 || e.Height != 360 {
		t.Fatalf("example 0 is %dx%d", e.Width, e.Height)
	}
	withPeople := 0
	for id, row := range ds.ClassFractions() {
		sum := 0.0
		for _, f := range row {
			sum += f
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("example %d fractions sum to %v", id, sum)
		}
		if ds.Fraction(id, 9, 10) > 0 { // Pedestrian, Bicyclist
			withPeople++
		}
	}
	if withPeople < 100 {
		t.Errorf("only %d examples show pedestrians or bicyclists", withPeople)
	}
	cfg := LoaderConfig{
		BatchSize:  4,
		Preprocess: personNorm,
		Augment:    &Augment{Height: 360, Width: 480, ScaleMin: 0.5, ScaleMax: 2, Flip: true},
		Epochs:     1,
	}
	l, err := NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Images) != 4*3*360*480 || len(b.Masks) != 4*360*480 {
			t.Fatalf("batch sizes %d, %d", len(b.Images), len(b.Masks))
		}
		for _, m := range b.Masks {
			if (m < 0 || m >= 11) && m != 255 {
				t.Fatalf("label %d in a batch", m)
			}
		}
	}
}
