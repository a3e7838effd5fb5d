package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"image/png"
	"io"
	"strings"
	"testing"
)

// pngChunkRec is one chunk of a PNG a test builds.
type pngChunkRec struct {
	typ  string
	data []byte
	crc  uint32 // 0: computed
}

// buildPNG joins chunks after the signature; a chunk with a non-zero
// crc gets that CRC instead of the right one.
func buildPNG(chunks []pngChunkRec) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	for _, c := range chunks {
		ch := pngChunk(c.typ, c.data)
		if c.crc != 0 {
			binary.BigEndian.PutUint32(ch[len(ch)-4:], c.crc)
		}
		b = append(b, ch...)
	}
	return b
}

// rgbScanlines is the filtered image data (filter 0) of an 8-bit RGB
// image w×h, plus extra bytes.
func rgbScanlines(w, h int, extra int) []byte {
	var raw []byte
	for y := 0; y < h; y++ {
		raw = append(raw, 0)
		for x := 0; x < w*3; x++ {
			raw = append(raw, byte(x*7+y*13))
		}
	}
	return append(raw, make([]byte, extra)...)
}

func zlibBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func ihdrRGB(w, h int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(w))
	b = binary.BigEndian.AppendUint32(b, uint32(h))
	return append(b, 8, 2, 0, 0, 0)
}

// Hand-built hostile PNGs are accepted or refused the same by image/png
// and by the native path, with the same pixels when accepted.
func TestNativePNGAcceptsWhatGoAccepts(t *testing.T) {
	requireNative(t)
	const w, h = 33, 21
	ihdr := pngChunkRec{typ: "IHDR", data: ihdrRGB(w, h)}
	good := zlibBytes(t, rgbScanlines(w, h, 0))
	text := pngChunkRec{typ: "tEXt", data: []byte("Comment\x00hello")}
	iend := pngChunkRec{typ: "IEND"}
	badAdler := bytes.Clone(good)
	badAdler[len(badAdler)-1] ^= 0xff
	cases := map[string][]pngChunkRec{
		"good":                 {ihdr, {typ: "IDAT", data: good}, iend},
		"good-split-idat":      {ihdr, {typ: "IDAT", data: good[:10]}, {typ: "IDAT", data: good[10:]}, iend},
		"good-text":            {ihdr, text, {typ: "IDAT", data: good}, text, iend},
		"bad-idat-crc":         {ihdr, {typ: "IDAT", data: good, crc: 1}, iend},
		"bad-first-idat-crc":   {ihdr, {typ: "IDAT", data: good[:10], crc: 1}, {typ: "IDAT", data: good[10:]}, iend},
		"bad-text-crc-before":  {ihdr, {typ: "tEXt", data: text.data, crc: 1}, {typ: "IDAT", data: good}, iend},
		"bad-text-crc-after":   {ihdr, {typ: "IDAT", data: good}, {typ: "tEXt", data: text.data, crc: 1}, iend},
		"bad-iend-crc":         {ihdr, {typ: "IDAT", data: good}, {typ: "IEND", crc: 1}},
		"iend-with-data":       {ihdr, {typ: "IDAT", data: good}, {typ: "IEND", data: []byte{1}}},
		"no-iend":              {ihdr, {typ: "IDAT", data: good}},
		"no-iend-text":         {ihdr, {typ: "IDAT", data: good}, text},
		"extra-pixel-data":     {ihdr, {typ: "IDAT", data: zlibBytes(t, rgbScanlines(w, h, 1+3*w))}, iend},
		"extra-pixel-byte":     {ihdr, {typ: "IDAT", data: zlibBytes(t, rgbScanlines(w, h, 1))}, iend},
		"bytes-after-zlib":     {ihdr, {typ: "IDAT", data: append(bytes.Clone(good), 1, 2, 3)}, iend},
		"trailing-idat":        {ihdr, {typ: "IDAT", data: good}, {typ: "IDAT", data: []byte{1, 2, 3}}, iend},
		"trailing-bad-idat":    {ihdr, {typ: "IDAT", data: good}, {typ: "IDAT", data: []byte{1, 2, 3}, crc: 1}, iend},
		"short-pixel-data":     {ihdr, {typ: "IDAT", data: zlibBytes(t, rgbScanlines(w, h-1, 0))}, iend},
		"truncated-idat":       {ihdr, {typ: "IDAT", data: good[:len(good)/2]}, iend},
		"bad-adler":            {ihdr, {typ: "IDAT", data: badAdler}, iend},
		"text-between-idats":   {ihdr, {typ: "IDAT", data: good[:10]}, text, {typ: "IDAT", data: good[10:]}, iend},
		"trns-after-idat":      {ihdr, {typ: "IDAT", data: good}, {typ: "tRNS", data: []byte{0, 1, 0, 2, 0, 3}}, iend},
		"plte-after-idat":      {ihdr, {typ: "IDAT", data: good}, {typ: "PLTE", data: []byte{1, 2, 3}}, iend},
		"second-ihdr":          {ihdr, ihdr, {typ: "IDAT", data: good}, iend},
		"bad-filter":           {ihdr, {typ: "IDAT", data: zlibBytes(t, append([]byte{9}, rgbScanlines(w, h, 0)[1:]...))}, iend},
		"unknown-critical":     {ihdr, {typ: "ABCD", data: []byte{1}}, {typ: "IDAT", data: good}, iend},
		"unknown-critical-bad": {ihdr, {typ: "ABCD", data: []byte{1}, crc: 1}, {typ: "IDAT", data: good}, iend},
		"after-iend":           {ihdr, {typ: "IDAT", data: good}, iend, {typ: "IDAT", data: []byte{9}, crc: 1}},
	}
	interlaced := encodeInterlacedForTest(t)
	for name, chunks := range cases {
		data := buildPNG(chunks)
		checkNativeParity(t, name, data, strings.HasPrefix(name, "good"))
		checkNativeParity(t, name+"-cut", data[:len(data)-5], false)
	}
	checkNativeParity(t, "interlaced", interlaced, true)
	checkNativeParity(t, "interlaced-extra", withExtraIDATByte(t, interlaced), false)
}

// checkNativeParity decodes data with libspng alone and with image/png:
// the native decoder accepts only what image/png accepts, with the same
// pixels, and must accept it when wantNative; through DecodeImage the
// file is accepted or refused as image/png does.
func checkNativeParity(t *testing.T, name string, data []byte, wantNative bool) {
	t.Helper()
	want, werr := png.Decode(bytes.NewReader(data))
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	native, nerr := decodeNativeBytes(data, "png", cfg)
	switch {
	case nerr == nil && werr != nil:
		t.Errorf("%s: libspng accepts what image/png refuses (%v)", name, werr)
	case nerr == nil && !bytes.Equal(pixOf(want), pixOf(native)):
		t.Errorf("%s: libspng's pixels differ from image/png's", name)
	case nerr != nil && wantNative:
		t.Errorf("%s: a valid PNG was left to Go: %v", name, nerr)
	}
	got, gerr := DecodeImage(bytes.NewReader(data), name)
	if (werr == nil) != (gerr == nil) {
		t.Errorf("%s: image/png: %v; DecodeImage: %v", name, werr, gerr)
	} else if werr == nil && !bytes.Equal(pixOf(want), pixOf(got)) {
		t.Errorf("%s: pixels differ from image/png", name)
	}
}

// encodeInterlacedForTest builds an Adam7 PNG (image/png does not write
// one): every pass's scanlines, filter 0, compressed once.
func encodeInterlacedForTest(t *testing.T) []byte {
	t.Helper()
	const w, h = 13, 11
	ihdr := ihdrRGB(w, h)
	ihdr[len(ihdr)-1] = 1
	size := pngFilteredSize(w, h, 3, true)
	raw := make([]byte, size)
	for i := range raw {
		raw[i] = byte(i * 31)
	}
	// Every scanline's filter byte: 0 (its first byte in each pass).
	off := 0
	for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw == 0 || ph == 0 {
			continue
		}
		for y := 0; y < ph; y++ {
			raw[off] = 0
			off += 1 + 3*pw
		}
	}
	if int64(off) != size {
		t.Fatalf("interlaced layout: %d bytes, want %d", off, size)
	}
	return buildPNG([]pngChunkRec{{typ: "IHDR", data: ihdr}, {typ: "IDAT", data: zlibBytes(t, raw)}, {typ: "IEND"}})
}

// withExtraIDATByte re-compresses an image's data with one more byte.
func withExtraIDATByte(t *testing.T, data []byte) []byte {
	t.Helper()
	l, err := pngNativeLayout(data)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(data[l.IDAT[0].Off : l.IDAT[0].Off+l.IDAT[0].Len]))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return buildPNG([]pngChunkRec{{typ: "IHDR", data: data[16:29]}, {typ: "IDAT", data: zlibBytes(t, append(raw, 0))}, {typ: "IEND"}})
}
