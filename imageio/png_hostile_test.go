package imageio

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
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

// Hand-built hostile PNGs: bad CRCs, a missing or non-empty IEND, image
// data too long, too short or badly filtered, misplaced chunks are
// refused with the file named, whatever codec libraries are installed
// (PNG is decoded by image/png alone); the valid ones and the few
// harmless oddities image/png tolerates (bytes after IEND or after the
// zlib stream, a trailing IDAT, an unknown chunk with a good CRC) decode
// to their pixels.
func TestPNGHostileChunks(t *testing.T) {
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
	tolerated := map[string]bool{"after-iend": true, "after-iend-cut": true, "bytes-after-zlib": true,
		"trailing-idat": true, "unknown-critical": true}
	var pix []byte // the RGBA pixels of rgbScanlines(w, h, 0)
	for y, raw := 0, rgbScanlines(w, h, 0); y < h; y++ {
		for x := 0; x < w; x++ {
			pix = append(pix, raw[y*(1+3*w)+1+3*x:][:3]...)
			pix = append(pix, 255)
		}
	}
	for name, chunks := range cases {
		data := buildPNG(chunks)
		valid := strings.HasPrefix(name, "good") || tolerated[name]
		checkPNG(t, name+".png", data, valid, pix)
		checkPNG(t, name+"-cut.png", data[:len(data)-5], tolerated[name+"-cut"], pix)
	}
	checkPNG(t, "interlaced.png", interlacedPNG(t, 0), true, nil)
	checkPNG(t, "interlaced-extra.png", interlacedPNG(t, 1), false, nil)
}

// checkPNG decodes data as the file called name: accepted when valid, with
// pixels pix (when given), else refused with name in the error.
func checkPNG(t *testing.T, name string, data []byte, valid bool, pix []byte) {
	t.Helper()
	img, err := DecodeImage(bytes.NewReader(data), name)
	switch {
	case valid && err != nil:
		t.Errorf("%s refused: %v", name, err)
	case valid && pix != nil && !bytes.Equal(toRGBA(img).Pix, pix):
		t.Errorf("%s: wrong pixels", name)
	case !valid && err == nil:
		t.Errorf("%s accepted", name)
	case !valid && !strings.Contains(err.Error(), name):
		t.Errorf("%s: error does not name the file: %v", name, err)
	}
}

// interlacedPNG builds an Adam7 PNG (image/png does not write one) of
// 13×11 RGB pixels: every pass's scanlines, filter 0, compressed once,
// with extra bytes of image data after them.
func interlacedPNG(t *testing.T, extra int) []byte {
	t.Helper()
	const w, h = 13, 11
	ihdr := ihdrRGB(w, h)
	ihdr[len(ihdr)-1] = 1
	var raw []byte
	for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw == 0 || ph == 0 {
			continue // an empty pass has no scanlines
		}
		for y := 0; y < ph; y++ {
			raw = append(raw, 0) // filter: none
			for x := 0; x < 3*pw; x++ {
				raw = append(raw, byte(len(raw)*31))
			}
		}
	}
	raw = append(raw, make([]byte, extra)...)
	return buildPNG([]pngChunkRec{{typ: "IHDR", data: ihdr}, {typ: "IDAT", data: zlibBytes(t, raw)}, {typ: "IEND"}})
}
