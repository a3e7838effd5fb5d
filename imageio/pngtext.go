package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"slices"
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
//
// OutputModelKey's chunk, after it, names what decided the mask (the
// Segmenter's MaskIdentity: the model's bytes and the settings that turn
// its scores into labels), so that a rerun with another model or other
// settings tells the earlier masks from its own.
const (
	OutputMarkKey  = "Software"
	OutputMark     = "segtune segment"
	OutputModelKey = "segtune model"
)

// EncodeOutputPNG encodes a mask or overlay as EncodePNG does, marked
// with OutputMark and, where model is not "", with model under
// OutputModelKey.
func EncodeOutputPNG(w io.Writer, img image.Image, model string) error {
	if model == "" {
		return EncodePNGText(w, img, OutputMarkKey, OutputMark)
	}
	return EncodePNGText(w, img, OutputMarkKey, OutputMark, OutputModelKey, model)
}

// EncodePNGText encodes img as EncodePNG does, with a tEXt chunk holding
// each key and value (pairs of keyValues) right after the header, where
// ReadPNGText finds them from the file's first bytes. A key is 1 to 79
// Latin-1 letters without NUL.
func EncodePNGText(w io.Writer, img image.Image, keyValues ...string) error {
	if len(keyValues)%2 != 0 {
		return fmt.Errorf("png text: %d strings are not pairs of key and value", len(keyValues))
	}
	var chunks bytes.Buffer
	for i := 0; i < len(keyValues); i += 2 {
		key, value := keyValues[i], keyValues[i+1]
		if len(key) == 0 || len(key) > 79 || len(key)+1+len(value) > maxTextChunk || bytes.IndexByte([]byte(key), 0) >= 0 {
			return fmt.Errorf("png text %q: want a key of 1 to 79 characters, and key and value within %d bytes", key, maxTextChunk)
		}
		writeChunk(&chunks, "tEXt", append(append([]byte(key), 0), value...)) // a bytes.Buffer does not fail
	}
	return EncodePNG(&afterHeader{w: w, insert: chunks.Bytes()}, img)
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
	texts, err := ReadPNGTexts(r, key)
	value, found = texts[key]
	return value, found, err
}

// ReadPNGTexts returns the value of the first tEXt chunk of each of keys
// among the chunks before a PNG file's image data, reading no further
// than the last of them; a key without one is not in the map. Data that
// is no PNG is ErrNotPNG.
func ReadPNGTexts(r io.Reader, keys ...string) (map[string]string, error) {
	head := make([]byte, len(pngSignature))
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head, pngSignature) {
		return nil, ErrNotPNG
	}
	texts := map[string]string{}
	var hdr [8]byte
	for passed := int64(0); len(texts) < len(keys); {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return texts, ErrNotPNG
		}
		n, kind := int64(binary.BigEndian.Uint32(hdr[:4])), string(hdr[4:])
		if passed += 12 + n; kind == "IDAT" || kind == "IEND" || passed > maxHeaderChunks {
			return texts, nil
		}
		switch {
		case kind == "tEXt" && n <= maxTextChunk:
			data := make([]byte, n+4) // and the CRC
			if _, err := io.ReadFull(r, data); err != nil {
				return texts, ErrNotPNG
			}
			k, v, ok := bytes.Cut(data[:n], []byte{0})
			if _, seen := texts[string(k)]; ok && !seen && slices.Contains(keys, string(k)) {
				texts[string(k)] = string(v)
			}
		default:
			if _, err := io.CopyN(io.Discard, r, n+4); err != nil {
				return texts, ErrNotPNG
			}
		}
	}
	return texts, nil
}
