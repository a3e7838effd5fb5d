package imageio

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"strings"
	"testing"
)

// bitWriter writes a JPEG scan's entropy-coded bits, stuffing a zero
// after each 0xFF byte.
type bitWriter struct {
	buf bytes.Buffer
	acc byte
	n   uint
}

func (b *bitWriter) bits(v uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		b.acc = b.acc<<1 | byte(v>>uint(i))&1
		if b.n++; b.n == 8 {
			b.buf.WriteByte(b.acc)
			if b.acc == 0xFF {
				b.buf.WriteByte(0)
			}
			b.acc, b.n = 0, 0
		}
	}
}

func jpegSegment(out *bytes.Buffer, marker byte, data []byte) {
	out.Write([]byte{0xFF, marker, byte((len(data) + 2) >> 8), byte(len(data) + 2)})
	out.Write(data)
}

// progressiveJPEG is a w×h grey progressive JPEG of scans AC scans, each
// one end-of-band run over every block: a few bytes a scan, and for Go's
// decoder a pass over the whole image each.
func progressiveJPEG(w, h, scans int) []byte {
	var out bytes.Buffer
	out.Write([]byte{0xFF, 0xD8})
	jpegSegment(&out, 0xDB, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))
	jpegSegment(&out, 0xC2, []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 1, 1, 0x11, 0})
	counts := make([]byte, 16)
	counts[0] = 1 // one code, "0": EOBRUN of 2^14 + 14 more bits
	jpegSegment(&out, 0xC4, append(append([]byte{0x10}, counts...), 0xE0))
	blocks := ((w + 7) / 8) * ((h + 7) / 8)
	for s := 0; s < scans; s++ {
		jpegSegment(&out, 0xDA, []byte{1, 1, 0x00, 1, 63, 0})
		var b bitWriter
		for left := blocks; left > 0; left -= 1<<15 - 1 {
			b.bits(0, 1)
			b.bits(1<<14-1, 14)
		}
		for b.n != 0 {
			b.bits(1, 1)
		}
		out.Write(b.buf.Bytes())
	}
	out.Write([]byte{0xFF, 0xD9})
	return out.Bytes()
}

// A progressive JPEG of thousands of scans is a CPU bomb for Go's
// decoder, which passes over the whole image in each (a 35 KB 4096×4096
// file of 1000 scans took 39 s): it is refused from its markers, naming
// the file, before any decoding (#45). Files of the scans encoders write
// decode as before.
func TestProgressiveJPEGScansAreBounded(t *testing.T) {
	bomb := progressiveJPEG(1024, 1024, 1000)
	_, err := DecodeImage(bytes.NewReader(bomb), "bomb.jpg")
	if !errors.Is(err, ErrTooManyScans) || !strings.Contains(err.Error(), "bomb.jpg") {
		t.Fatalf("%d bytes of 1000 scans: error %v, want ErrTooManyScans naming bomb.jpg", len(bomb), err)
	}
	// A reader that cannot seek (a request body) is read whole first.
	if _, err := DecodeImage(struct{ *bytes.Reader }{bytes.NewReader(bomb)}, "body"); !errors.Is(err, ErrTooManyScans) {
		t.Errorf("streamed: error %v, want ErrTooManyScans", err)
	}
	for _, scans := range []int{1, 10, MaxJPEGScans} {
		img, err := DecodeImage(bytes.NewReader(progressiveJPEG(64, 48, scans)), "ok.jpg")
		if err != nil || img.Bounds().Dx() != 64 || img.Bounds().Dy() != 48 {
			t.Errorf("%d scans: %v", scans, err)
		}
	}
	// Stuffed bytes and restart markers inside a scan are not markers.
	l, err := jpegScans(bytes.NewReader(progressiveJPEG(4096, 4096, 3)), 10)
	if err != nil || !l.progressive || l.scans != 3 || l.components != 1 {
		t.Errorf("a progressive file of 3 scans reads as %+v, %v", l, err)
	}
	var baseline bytes.Buffer
	if err := jpeg.Encode(&baseline, image.NewRGBA(image.Rect(0, 0, 64, 48)), nil); err != nil {
		t.Fatal(err)
	}
	if l, err := jpegScans(bytes.NewReader(baseline.Bytes()), 10); err != nil || l.progressive || l.components != 3 {
		t.Errorf("a baseline file reads as %+v, %v", l, err)
	}
}

// Go's progressive decoder holds every block's coefficients (4 bytes a
// pixel and component) besides the image: a progressive JPEG within the
// pixel budget of a baseline one but not with its coefficients is refused.
func TestProgressiveJPEGCoefficientsCount(t *testing.T) {
	file := progressiveJPEG(1024, 1024, 2)
	need := int64(1024 * 1024 * (1 + tensorBytesPerPixel + rgbaBytesPerPixel)) // grey pixels, RGBA view, tensor
	d := Decoder{MaxBytes: need + 1024*1024}                                   // short of the 4 MiB of coefficients
	_, err := d.Decode(bytes.NewReader(file), "big.jpg")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "progressive") || !strings.Contains(err.Error(), "big.jpg") {
		t.Errorf("error %v, want ErrTooLarge for the progressive coefficients, naming big.jpg", err)
	}
	d.MaxBytes = need + 4*1024*1024
	if _, err := d.Decode(bytes.NewReader(file), "big.jpg"); err != nil {
		t.Errorf("within the budget with its coefficients: %v", err)
	}
}
