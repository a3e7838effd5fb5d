package imageio

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
)

// MaxJPEGScans bounds the scans of a progressive JPEG. Go's decoder
// passes over every block of the image in each scan, whatever the scan
// holds, so a file of a few kilobytes with thousands of scans is a CPU
// bomb (a 35 KB 4096×4096 file of 1000 scans took 39 s to decode).
// Encoders write about ten (libjpeg's default progression: 10 for colour,
// 6 for grey; mozjpeg's searched ones are of that order); libjpeg-turbo's
// own limit for untrusted files is 500.
const MaxJPEGScans = 100

// ErrTooManyScans is wrapped by the error for a progressive JPEG of more
// than MaxJPEGScans scans.
var ErrTooManyScans = errors.New("too many scans")

// progressiveCoefficientBytes is the memory Go's progressive JPEG decoder
// holds for each pixel of each component until the last scan: 64 int32
// coefficients for every 8×8 block.
const progressiveCoefficientBytes = 4

// jpegLayout is what jpegScans reads of a JPEG's markers.
type jpegLayout struct {
	progressive bool
	components  int
	scans       int // counted only for progressive files, up to limit+1
}

// jpegScans walks a JPEG's markers: the frame header, and for a
// progressive frame its scans (SOS markers), skipping each scan's
// entropy-coded data; it stops at the end of the image, at a sequential
// frame's header (whose scans each decode something), or after limit+1
// scans. A file it cannot walk is left to the decoder, which says why.
func jpegScans(r io.Reader, limit int) (jpegLayout, error) {
	var l jpegLayout
	br := bufio.NewReaderSize(r, 32<<10)
	var soi [2]byte
	if _, err := io.ReadFull(br, soi[:]); err != nil || soi != [2]byte{0xFF, 0xD8} {
		return l, errors.New("no SOI marker")
	}
	marker, err := nextMarker(br)
	for err == nil {
		switch {
		case marker == 0xD9: // EOI
			return l, nil
		case marker >= 0xD0 && marker <= 0xD7 || marker == 0x01: // no length
			marker, err = nextMarker(br)
			continue
		}
		var lenBytes [2]byte
		if _, err = io.ReadFull(br, lenBytes[:]); err != nil {
			break
		}
		n := int(lenBytes[0])<<8 | int(lenBytes[1]) - 2
		if n < 0 {
			return l, errors.New("bad marker length")
		}
		switch {
		case isSOF(marker):
			l.progressive = marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE
			head, perr := br.Peek(min(n, 6))
			if perr == nil && len(head) == 6 {
				l.components = int(head[5])
			}
			if !l.progressive {
				return l, nil
			}
		case marker == 0xDA: // SOS
			if l.scans++; l.scans > limit {
				return l, nil
			}
		}
		if _, err = br.Discard(n); err != nil {
			break
		}
		if marker == 0xDA {
			marker, err = skipEntropyData(br)
		} else {
			marker, err = nextMarker(br)
		}
	}
	return l, err
}

// isSOF reports whether marker starts a frame (SOF0–SOF15 but DHT, JPG
// and DAC).
func isSOF(marker byte) bool {
	return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
}

// nextMarker reads a marker (0xFF, fill bytes, the code) and returns its
// code.
func nextMarker(br *bufio.Reader) (byte, error) {
	b, err := br.ReadByte()
	if err != nil {
		return 0, err
	}
	if b != 0xFF {
		return 0, fmt.Errorf("byte %#x where a marker belongs", b)
	}
	for b == 0xFF {
		if b, err = br.ReadByte(); err != nil {
			return 0, err
		}
	}
	return b, nil
}

// skipEntropyData passes a scan's entropy-coded data (stuffed 0xFF00
// bytes and restart markers included) and returns the marker after it.
func skipEntropyData(br *bufio.Reader) (byte, error) {
	for {
		if _, err := br.ReadSlice(0xFF); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return 0, err
		} else if err != nil {
			continue
		}
		b, err := br.ReadByte()
		for err == nil && b == 0xFF { // fill bytes
			b, err = br.ReadByte()
		}
		switch {
		case err != nil:
			return 0, err
		case b == 0x00 || b >= 0xD0 && b <= 0xD7: // stuffed byte, restart marker
		default:
			return b, nil
		}
	}
}

// checkJPEGScans refuses a progressive JPEG of more than MaxJPEGScans
// scans, or whose coefficients Go's decoder holds with the decoded image
// would take more than the decoder's memory budget, before it is decoded.
// rs is at the start of the file and is left anywhere.
func (d Decoder) checkJPEGScans(rs io.Reader, width, height int, decoded int64) error {
	l, err := jpegScans(rs, MaxJPEGScans)
	if err != nil || !l.progressive {
		return nil // Go's decoder reads it, or says what is wrong
	}
	if l.scans > MaxJPEGScans {
		return fmt.Errorf("%w: a progressive JPEG of more than %d scans (each one a pass over the whole image; encoders write about 10)",
			ErrTooManyScans, MaxJPEGScans)
	}
	coefficients := int64(width) * int64(height) * int64(max(l.components, 1)) * progressiveCoefficientBytes
	if limit := d.maxBytes(); decoded+coefficients > limit {
		return setting.Messagef("%w: a progressive %dx%d JPEG would take about %s decoded (its coefficients, the pixels and the float tensor), more than the %s allowed per image (an eighth of the memory limit, set by "+string(memlimit.HowToSet())+")",
			ErrTooLarge, width, height, memlimit.Human(decoded+coefficients), memlimit.Human(limit))
	}
	return nil
}
