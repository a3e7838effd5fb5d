package evalpartial

import (
	"errors"
	"slices"
	"testing"

	"github.com/segtune/segtune/metrics"
)

// Parse never panics, refuses with an *Error naming the file, and accepts
// only partials whose matrix is the sum of their images' cells and whose
// image count is their records'; what it accepts summarises, merges (one
// shard of one) and reads back the same once written. Seeds:
// testdata/fuzz/FuzzParse (valid partials, and corrupted ones).
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "f.json")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "f.json" {
				t.Fatalf("error %v is no *Error naming f.json", err)
			}
			return
		}
		k := int64(p.Run.Classes)
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
		metrics.NewReport(p.Matrix(), p.Run.ClassNames)
		p.SizeGroups()
		if p.Shard.Count == 1 {
			if _, err := Merge([]*Partial{p}, []string{"f.json"}); err != nil {
				t.Fatalf("a valid one-shard partial does not merge: %v", err)
			}
		}
		again, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(again, "again.json")
		if err != nil {
			t.Fatalf("an accepted partial, written again, is refused: %v", err)
		}
		if !slices.Equal(q.Confusion, p.Confusion) || len(q.Records) != len(p.Records) {
			t.Fatal("an accepted partial reads back differently")
		}
	})
}
