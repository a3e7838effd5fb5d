package evaluate

import (
	"errors"
	"slices"
	"testing"

	"github.com/segtune/segtune/metrics"
)

// ParsePartial never panics, refuses with a *PartialError naming the file, and accepts
// only partials whose matrix is the sum of their images' cells and whose
// image count is their records'; what it accepts summarises, merges (one
// shard of one) and reads back the same once written. Seeds:
// testdata/fuzz/FuzzParsePartial (valid partials, and corrupted ones).
func FuzzParsePartial(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePartial(data, "f.json")
		if err != nil {
			var e *PartialError
			if !errors.As(err, &e) || e.File != "f.json" {
				t.Fatalf("error %v is no *PartialError naming f.json", err)
			}
			return
		}
		k := int64(p.Setup.Classes)
		sum := make([]int64, k*k)
		for _, r := range p.Records {
			for _, c := range r.Cells {
				sum[c[0]*k+c[1]] += c[2]
			}
		}
		if !slices.Equal(sum, p.Confusion) {
			t.Fatalf("accepted a matrix %v that is not the sum %v of its cells", p.Confusion, sum)
		}
		if p.Images != len(p.Records)+len(p.Failures) {
			t.Fatalf("accepted %d images for %d records and %d failures", p.Images, len(p.Records), len(p.Failures))
		}
		metrics.NewReport(p.Matrix(), p.Setup.ClassNames)
		p.SizeGroups()
		if p.Shard.Count == 1 {
			if _, err := MergePartials([]*Partial{p}, []string{"f.json"}); err != nil {
				t.Fatalf("a valid one-shard partial does not merge: %v", err)
			}
		}
		again, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParsePartial(again, "again.json")
		if err != nil {
			t.Fatalf("an accepted partial, written again, is refused: %v", err)
		}
		if !slices.Equal(q.Confusion, p.Confusion) || len(q.Records) != len(p.Records) {
			t.Fatal("an accepted partial reads back differently")
		}
	})
}
