package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/segtune/segtune/imageio/internal/nativecodec"
)

// NativeCodecsEnvVar, set to 0 (or off, false, no), makes every image go
// through Go's decoders even where libjpeg-turbo and libspng are installed.
const NativeCodecsEnvVar = "SEGTUNE_NATIVE_CODECS"

// nativeOff is read from NativeCodecsEnvVar once; tests set it directly.
var nativeOff = func() bool {
	switch strings.ToLower(os.Getenv(NativeCodecsEnvVar)) {
	case "0", "off", "false", "no":
		return true
	}
	return false
}()

// DecoderInfo says, in one line, which decoders read JPEG and PNG images:
// libjpeg-turbo and libspng where they are installed (loaded at run time,
// see package nativecodec), else Go's, with what to install.
func DecoderInfo() string {
	if nativeOff {
		return fmt.Sprintf("image decoders: Go's (native codecs turned off by %s)", NativeCodecsEnvVar)
	}
	jl, pl := nativecodec.JPEGLibrary(), nativecodec.PNGLibrary()
	jpeg, png := "Go's image/jpeg", "Go's image/png"
	var missing []string
	if jl.Err == nil {
		jpeg = "libjpeg-turbo (" + jl.Name + ")"
	} else {
		missing = append(missing, "libturbojpeg0")
	}
	if pl.Err == nil {
		png = "libspng (" + pl.Name + ")"
	} else {
		missing = append(missing, "libspng0")
	}
	s := fmt.Sprintf("image decoders: JPEG %s, PNG %s", jpeg, png)
	if len(missing) > 0 {
		s += fmt.Sprintf(" (faster with %s installed: scripts/install-codecs.sh)", strings.Join(missing, " and "))
	}
	return s
}

// fileBufs recycles the buffers whole image files are read into for the
// native decoders.
var fileBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeNative decodes the image at rs's current position with
// libjpeg-turbo or libspng when one is loaded and takes this image; ok is
// false when it did not (and rs is then back at its position), so that
// Go's decoder decides, errors included: a file a native decoder refuses
// or warns about is decoded (or refused) by Go exactly as before.
func decodeNative(rs io.ReadSeeker, format string, cfg image.Config) (img image.Image, ok bool) {
	if nativeOff || (format != "jpeg" && format != "png") {
		return nil, false
	}
	if format == "jpeg" && nativecodec.JPEGLibrary().Err != nil ||
		format == "png" && nativecodec.PNGLibrary().Err != nil {
		return nil, false
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false
	}
	buf := fileBufs.Get().(*bytes.Buffer)
	defer fileBufs.Put(buf)
	buf.Reset()
	// The native decoders take the whole file in memory: a file far larger
	// than its pixels could need (trailing chunks, a hostile file) is left
	// to Go's decoder, which streams it.
	limit := nativeFileLimit(cfg)
	var n int64
	if n, err = buf.ReadFrom(io.LimitReader(rs, limit+1)); err == nil && n > limit {
		err = errNotNative
	}
	if err == nil {
		img, err = decodeNativeBytes(buf.Bytes(), format, cfg)
	}
	if _, serr := rs.Seek(start, io.SeekStart); serr != nil && err != nil {
		return nil, false // cannot happen for files and readers in memory
	}
	if err != nil {
		return nil, false
	}
	return img, true
}

// nativeFileLimit bounds the file size the native decoders read: twice
// the image's 8-bit RGBA pixels and 1 MiB of headers and metadata.
func nativeFileLimit(cfg image.Config) int64 {
	return 2*4*int64(cfg.Width)*int64(cfg.Height) + 1<<20
}

// errNotNative marks images the native decoders leave to Go.
var errNotNative = errors.New("left to Go's decoder")

func decodeNativeBytes(data []byte, format string, cfg image.Config) (image.Image, error) {
	if format == "jpeg" {
		return nativecodec.JPEG(data, cfg.Width, cfg.Height)
	}
	ct, err := pngNativeType(data)
	if err != nil {
		return nil, err
	}
	return nativecodec.PNG(data, ct, cfg.Width, cfg.Height)
}

// pngNativeType returns the colour type of a PNG that libspng decodes to
// exactly what image/png gives: 8-bit grey, truecolour or truecolour with
// alpha, with no tRNS chunk before the image data (image/png turns tRNS
// into alpha; libspng is not asked to). Anything else is left to Go.
func pngNativeType(data []byte) (int, error) {
	const sig = "\x89PNG\r\n\x1a\n"
	if len(data) < 33 || string(data[:8]) != sig || string(data[12:16]) != "IHDR" {
		return 0, errNotNative
	}
	depth, ct := data[24], data[25]
	if depth != 8 || (ct != nativecodec.PNGGray && ct != nativecodec.PNGTruecolor && ct != nativecodec.PNGTrueAlpha) {
		return 0, errNotNative
	}
	for i := 8; i+8 <= len(data); {
		n := binary.BigEndian.Uint32(data[i:])
		switch string(data[i+4 : i+8]) {
		case "tRNS":
			return 0, errNotNative
		case "IDAT":
			return int(ct), nil
		}
		if uint64(n) > uint64(len(data)) {
			return 0, errNotNative
		}
		i += 12 + int(n)
	}
	return 0, errNotNative
}
