package annot

import (
	"errors"
	"fmt"
)

// COCO's RLE runs over the mask in column-major order (down each column,
// left to right), alternating 0 and 1 and starting with a run of 0s, which
// may be empty.

// maxRLEChars is the most characters one compressed count may take: 7 × 5
// bits hold any count of an image within the pixel limit, and more would
// overflow the reference decoder.
const maxRLEChars = 7

// decodeRLEString decodes the counts of a compressed COCO RLE string as
// pycocotools' rleFrString does: each count is a little-endian run of
// 5-bit groups in the characters '0'..'o' (0x20 = more to come, 0x10 in
// the last = negative), and counts after the second are stored as the
// difference from the count two before. The counts must sum to n.
func decodeRLEString(s string, n int) ([]uint32, error) {
	counts := make([]uint32, 0, min(len(s), n+1))
	sum := 0
	for p := 0; p < len(s); {
		var x int64
		for k := 0; ; k++ {
			if p >= len(s) {
				return nil, errors.New("RLE string ends inside a count")
			}
			if k == maxRLEChars {
				return nil, fmt.Errorf("RLE count at character %d is longer than %d characters", p-k, maxRLEChars)
			}
			ch := s[p]
			if ch < '0' || ch > 'o' {
				return nil, fmt.Errorf("RLE string has %q at character %d (only '0'..'o' occur)", ch, p)
			}
			c := int64(ch - '0')
			x |= (c & 0x1f) << (5 * k)
			p++
			if c&0x20 == 0 {
				if c&0x10 != 0 {
					x |= -1 << (5 * (k + 1))
				}
				break
			}
		}
		if len(counts) > 2 {
			x += int64(counts[len(counts)-2])
		}
		if x < 0 {
			return nil, fmt.Errorf("RLE count %d is negative (%d)", len(counts), x)
		}
		if x > int64(n-sum) {
			return nil, fmt.Errorf("RLE counts exceed the mask's %d pixels at count %d", n, len(counts))
		}
		sum += int(x)
		counts = append(counts, uint32(x))
	}
	if sum != n {
		return nil, fmt.Errorf("RLE counts sum to %d, not the mask's %d pixels", sum, n)
	}
	return counts, nil
}

// checkCounts checks uncompressed RLE counts: whole, non-negative,
// summing to n.
func checkCounts(raw []float64, n int) ([]uint32, error) {
	counts := make([]uint32, len(raw))
	sum := 0
	for i, c := range raw {
		if c != c || c < 0 || c != float64(int64(c)) {
			return nil, fmt.Errorf("RLE count %d is %v, not a whole number ≥ 0", i, c)
		}
		if c > float64(n-sum) {
			return nil, fmt.Errorf("RLE counts exceed the mask's %d pixels at count %d", n, i)
		}
		sum += int(c)
		counts[i] = uint32(c)
	}
	if sum != n {
		return nil, fmt.Errorf("RLE counts sum to %d, not the mask's %d pixels", sum, n)
	}
	return counts, nil
}

// paintRLE sets the pixels of dst (row-major, w wide, h high) that the
// column-major RLE counts mark as 1 to v. The counts sum to w*h.
func paintRLE(dst []uint8, counts []uint32, w, h int, v uint8) {
	i := 0
	for k, c := range counts {
		if k%2 == 1 {
			for j := i; j < i+int(c); j++ {
				dst[(j%h)*w+j/h] = v
			}
		}
		i += int(c)
	}
}
