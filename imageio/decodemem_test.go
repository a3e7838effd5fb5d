package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"strings"
	"testing"
)

// pngHeader returns the start of a PNG (signature and IHDR) declaring
// w×h pixels of the given bit depth and colour type; the header is all
// DecodeConfig reads.
func pngHeader(w, h uint32, depth, colorType byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	data := make([]byte, 13)
	binary.BigEndian.PutUint32(data[0:], w)
	binary.BigEndian.PutUint32(data[4:], h)
	data[8], data[9] = depth, colorType
	chunk := append([]byte("IHDR"), data...)
	binary.Write(&b, binary.BigEndian, uint32(len(data)))
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// Defect: the 100-megapixel limit did not bound memory: a small 16-bit PNG
// declaring 100 MP drove the process to gigabytes.
func TestDecodeBoundsBytesNotJustPixels(t *testing.T) {
	// 10000x10000 16-bit RGBA: within the pixel limit, 2.4 GB decoded.
	_, err := Decoder{}.Decode(bytes.NewReader(pngHeader(10000, 10000, 16, 6)), "deep.png")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "deep.png") || !strings.Contains(err.Error(), "16-bit RGBA") {
		t.Fatalf("err = %v", err)
	}
	d := Decoder{MaxBytes: 16 << 20}
	_, err = d.Decode(bytes.NewReader(pngHeader(1000, 1000, 16, 6)), "a.png")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("1 MP 16-bit RGBA under a 16 MiB budget: err = %v", err)
	}
	_, err = d.Decode(bytes.NewReader(pngHeader(900, 900, 8, 0)), "b.png")
	if errors.Is(err, ErrTooLarge) { // passes the check, then fails on the missing data
		t.Errorf("0.8 MP 8-bit grey under a 16 MiB budget: err = %v", err)
	}
}

func TestDecodedBytes(t *testing.T) {
	cfg := image.Config{ColorModel: color.RGBA64Model, Width: 100, Height: 10}
	if got := DecodedBytes(cfg, "png"); got != 1000*(8+4+12) {
		t.Errorf("16-bit PNG: %d", got)
	}
	if got := DecodedBytes(cfg, "tiff"); got != 1000*(16+4+12) {
		t.Errorf("16-bit TIFF: %d", got)
	}
	cfg.ColorModel = color.RGBAModel
	if got := DecodedBytes(cfg, "png"); got != 1000*(4+12) {
		t.Errorf("8-bit RGBA: %d", got)
	}
}
