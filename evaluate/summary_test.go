package evaluate

import (
	"math"
	"testing"

	"github.com/segtune/segtune/internal/shard"
)

// Score counts one image as the run says, and Summary reports the counts
// with the confusion matrix and the size groups.
func TestScoreAndSummary(t *testing.T) {
	run := Setup{Classes: 3, Ignore: 255, ClassNames: []string{"bg", "person", "car"}, SizeClasses: []int{1, 2}, SizeThreshold: 0.4}
	p := NewPartial(shard.Spec{}, run)
	for i, img := range []struct{ pred, target []uint8 }{
		{[]uint8{0, 1, 1, 2}, []uint8{0, 1, 0, 255}}, // objects: 1 of 3 labelled pixels
		{[]uint8{1, 1, 2, 0}, []uint8{1, 1, 2, 0}},   // 3 of 4
	} {
		conf, frac, err := run.Score(img.pred, img.target)
		if err != nil {
			t.Fatal(err)
		}
		if want := []float64{1.0 / 3, 3.0 / 4}[i]; math.Abs(frac-want) > 1e-12 {
			t.Errorf("image %d: fraction %v, want %v", i, frac, want)
		}
		p.Add([]string{"a.png", "b.png"}[i], conf, frac)
		p.Images++
	}
	s := p.Summary()
	want := [][]int64{{2, 1, 0}, {0, 3, 0}, {0, 0, 1}}
	for tc := range want {
		for pc := range want[tc] {
			if s.Confusion[tc][pc] != want[tc][pc] {
				t.Fatalf("confusion %v, want %v", s.Confusion, want)
			}
		}
	}
	if s.Images != 2 || s.Classes[1].Support != 3 || *s.Classes[1].Precision != 0.75 || s.Groups["small"].Pixels != 3 || s.Groups["large"].Pixels != 4 {
		t.Errorf("summary %+v", s)
	}
	if _, _, err := run.Score([]uint8{0}, []uint8{0, 1}); err == nil {
		t.Error("label maps of two sizes scored")
	}
}
