package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
)

// pngSignature starts every PNG file; IHDR, always 13 bytes of data,
// follows it.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

const ihdrEnd = 8 + 8 + 13 + 4 // signature, IHDR's length and type, data, CRC

// maxTextChunk bounds a tEXt chunk ReadPNGText reads whole, and
// maxHeaderChunks the bytes of chunks it passes before the image data.
const (
	maxTextChunk    = 1 << 10
	maxHeaderChunks = 1 << 16
)

// The text chunk segtune marks the masks and overlays it writes for
// images with (segment, serve), so that a run tells its own earlier
// outputs, which it may replace, from files of the same names that it
// did not write (an annotation mask, say).
const (
	OutputMarkKey = "Software"
	OutputMark    = "segtune segment"
)

// EncodeOutputPNG encodes a mask or overlay as EncodePNG does, marked
// with OutputMark.
func EncodeOutputPNG(w io.Writer, img image.Image) error {
	return EncodePNGText(w, img, OutputMarkKey, OutputMark)
}

// EncodePNGText encodes img as EncodePNG does, with a tEXt chunk holding
// key and value right after the header, where ReadPNGText finds it from
// the file's first bytes. key is 1 to 79 Latin-1 letters without NUL.
func EncodePNGText(w io.Writer, img image.Image, key, value string) error {
	if len(key) == 0 || len(key) > 79 || len(key)+1+len(value) > maxTextChunk || bytes.IndexByte([]byte(key), 0) >= 0 {
		return fmt.Errorf("png text %q: want a key of 1 to 79 characters, and key and value within %d bytes", key, maxTextChunk)
	}
	var chunk bytes.Buffer
	writeChunk(&chunk, "tEXt", append(append([]byte(key), 0), value...)) // a bytes.Buffer does not fail
	return EncodePNG(&afterHeader{w: w, insert: chunk.Bytes()}, img)
}

// afterHeader passes the bytes written to w, inserting insert after the
// first ihdrEnd of them.
type afterHeader struct {
	w      io.Writer
	n      int
	insert []byte
}

func (a *afterHeader) Write(p []byte) (int, error) {
	if a.insert == nil || a.n+len(p) < ihdrEnd {
		a.n += len(p)
		return a.w.Write(p)
	}
	k := ihdrEnd - a.n
	if _, err := a.w.Write(p[:k]); err != nil {
		return 0, err
	}
	if _, err := a.w.Write(a.insert); err != nil {
		return k, err
	}
	a.insert = nil
	n, err := a.w.Write(p[k:])
	return k + n, err
}

// ErrNotPNG is ReadPNGText's error for data that does not start as a PNG
// file does.
var ErrNotPNG = errors.New("not a PNG file")

// ReadPNGText returns the value of the first tEXt chunk with key among
// the chunks before a PNG file's image data, reading no further. found is
// false when there is none; data that is no PNG is ErrNotPNG.
func ReadPNGText(r io.Reader, key string) (value string, found bool, err error) {
	head := make([]byte, len(pngSignature))
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head, pngSignature) {
		return "", false, ErrNotPNG
	}
	var hdr [8]byte
	for passed := int64(0); ; {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return "", false, ErrNotPNG
		}
		n, kind := int64(binary.BigEndian.Uint32(hdr[:4])), string(hdr[4:])
		if passed += 12 + n; kind == "IDAT" || kind == "IEND" || passed > maxHeaderChunks {
			return "", false, nil
		}
		switch {
		case kind == "tEXt" && n <= maxTextChunk:
			data := make([]byte, n+4) // and the CRC
			if _, err := io.ReadFull(r, data); err != nil {
				return "", false, ErrNotPNG
			}
			if k, v, ok := bytes.Cut(data[:n], []byte{0}); ok && string(k) == key {
				return string(v), true, nil
			}
		default:
			if _, err := io.CopyN(io.Discard, r, n+4); err != nil {
				return "", false, ErrNotPNG
			}
		}
	}
}
