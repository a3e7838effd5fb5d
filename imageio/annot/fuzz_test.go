package annot

import (
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
