package annot

import (
	"errors"
	"fmt"
)

// bitReader reads big-endian bit fields, as @thi.ng/bitstream writes them.
type bitReader struct {
	data []byte
	pos  int // in bits
}

var errShortRLE = errors.New("brush RLE ends before its last value")

func (r *bitReader) read(n int) (uint32, error) {
	if r.pos+n > 8*len(r.data) {
		return 0, errShortRLE
	}
	var v uint32
	for range n {
		b := r.data[r.pos>>3] >> (7 - r.pos&7) & 1
		v = v<<1 | uint32(b)
		r.pos++
	}
	return v, nil
}

// decodeBrushRLE decodes a Label Studio brush RLE, the encoding of
// @thi.ng/rle-pack over the brush layer's RGBA pixels, into a w×h mask
// that is 1 where the layer is drawn: where its alpha is at least half.
// The stream is a 32-bit value count (4·w·h), a 5-bit word size − 1, four
// 4-bit run-length field sizes − 1, then chunks: a flag bit (1 = one value
// repeated, 0 = literal values), a 2-bit choice of field size, the length
// − 1 in that many bits, then the value or values.
func decodeBrushRLE(data []byte, w, h int) ([]uint8, error) {
	r := &bitReader{data: data}
	num, err := r.read(32)
	if err != nil {
		return nil, err
	}
	if int64(num) != 4*int64(w)*int64(h) {
		return nil, fmt.Errorf("brush RLE holds %d values, not the 4×%d×%d of the image's RGBA pixels", num, w, h)
	}
	ws, err := r.read(5)
	if err != nil {
		return nil, err
	}
	wordSize := int(ws) + 1
	var sizes [4]int
	for i := range sizes {
		s, err := r.read(4)
		if err != nil {
			return nil, err
		}
		sizes[i] = int(s) + 1
	}
	half := uint32(1) << (wordSize - 1)
	mask := make([]uint8, w*h)
	set := func(i int, v uint32) {
		if i&3 == 3 && v >= half {
			mask[i>>2] = 1
		}
	}
	for i := 0; i < int(num); {
		repeat, err := r.read(1)
		if err != nil {
			return nil, err
		}
		t, err := r.read(2)
		if err != nil {
			return nil, err
		}
		n, err := r.read(sizes[t])
		if err != nil {
			return nil, err
		}
		j := i + 1 + int(n)
		if j > int(num) {
			return nil, fmt.Errorf("brush RLE run at value %d goes past the %d values", i, num)
		}
		if repeat == 1 {
			v, err := r.read(wordSize)
			if err != nil {
				return nil, err
			}
			if v >= half {
				for k := i | 3; k < j; k += 4 {
					mask[k>>2] = 1
				}
			}
			i = j
			continue
		}
		for ; i < j; i++ {
			v, err := r.read(wordSize)
			if err != nil {
				return nil, err
			}
			set(i, v)
		}
	}
	return mask, nil
}
