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

// maxBrushRLEBytes is the most bytes a brush RLE of a w×h image can take:
// its 53-bit header, then at worst a chunk of its own for each of the
// 4·w·h values, of 1+2+16 bits and a 32-bit word. Anything longer is not
// a brush of that image, and is refused before it is decoded.
func maxBrushRLEBytes(w, h int) int64 {
	return (32 + 5 + 16 + 4*int64(w)*int64(h)*51 + 7) / 8
}

// decodeBrushRLE decodes a Label Studio brush RLE, the encoding of
// @thi.ng/rle-pack over the brush layer's RGBA pixels, into a w×h mask
// that is 1 where the layer is drawn: where its alpha is at least half.
// The stream is a 32-bit value count (4·w·h), a 5-bit word size − 1, four
// 4-bit run-length field sizes − 1, then chunks: a flag bit (1 = one value
// repeated, 0 = literal values), a 2-bit choice of field size, the length
// − 1 in that many bits, then the value or values.
func decodeBrushRLE(data []byte, w, h int) ([]uint8, error) {
	var mask []uint8
	err := walkBrushRLE(data, w, h, func() []uint8 {
		mask = make([]uint8, w*h)
		return mask
	})
	if err != nil {
		return nil, err
	}
	return mask, nil
}

// checkBrushRLE checks a brush RLE as decodeBrushRLE decodes it, without
// making its mask.
func checkBrushRLE(data []byte, w, h int) error {
	return walkBrushRLE(data, w, h, func() []uint8 { return nil })
}

// walkBrushRLE reads a brush RLE; once its header is checked it paints
// the mask that alloc returns, or nothing where that is nil.
func walkBrushRLE(data []byte, w, h int, alloc func() []uint8) error {
	if n := int64(len(data)); n > maxBrushRLEBytes(w, h) {
		return fmt.Errorf("brush RLE of %d bytes is longer than any of a %dx%d image", n, w, h)
	}
	r := &bitReader{data: data}
	num, err := r.read(32)
	if err != nil {
		return err
	}
	if int64(num) != 4*int64(w)*int64(h) {
		return fmt.Errorf("brush RLE holds %d values, not the 4×%d×%d of the image's RGBA pixels", num, w, h)
	}
	ws, err := r.read(5)
	if err != nil {
		return err
	}
	wordSize := int(ws) + 1
	var sizes [4]int
	for i := range sizes {
		s, err := r.read(4)
		if err != nil {
			return err
		}
		sizes[i] = int(s) + 1
	}
	half := uint32(1) << (wordSize - 1)
	mask := alloc()
	for i := 0; i < int(num); {
		repeat, err := r.read(1)
		if err != nil {
			return err
		}
		t, err := r.read(2)
		if err != nil {
			return err
		}
		n, err := r.read(sizes[t])
		if err != nil {
			return err
		}
		j := i + 1 + int(n)
		if j > int(num) {
			return fmt.Errorf("brush RLE run at value %d goes past the %d values", i, num)
		}
		if repeat == 1 {
			v, err := r.read(wordSize)
			if err != nil {
				return err
			}
			if v >= half && mask != nil {
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
				return err
			}
			if mask != nil && i&3 == 3 && v >= half {
				mask[i>>2] = 1
			}
		}
	}
	return nil
}
