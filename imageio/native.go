package imageio

import (
	"bytes"
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
// through Go's decoders even where libjpeg-turbo is installed.
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
// libjpeg-turbo for JPEG where it is installed (loaded at run time, see
// package nativecodec), else Go's, with what to install; PNG is always
// Go's image/png.
func DecoderInfo() string {
	if nativeOff {
		return fmt.Sprintf("image decoders: Go's (native codecs turned off by %s)", NativeCodecsEnvVar)
	}
	if jl := nativecodec.JPEGLibrary(); jl.Err == nil {
		return "image decoders: JPEG libjpeg-turbo (" + jl.Name + "), PNG Go's image/png"
	}
	return "image decoders: JPEG Go's image/jpeg, PNG Go's image/png (faster JPEG with libturbojpeg0 installed: scripts/install-codecs.sh)"
}

// fileBufs recycles the buffers whole image files are read into for
// libjpeg-turbo.
var fileBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeNative decodes the JPEG at rs's current position with
// libjpeg-turbo when it is loaded and takes this image; ok is false when
// it did not (and rs is then back at its position), so that Go's decoder
// decides, errors included: a file libjpeg-turbo refuses or warns about is
// decoded (or refused) by Go exactly as before. Every other format,
// PNG included, is Go's alone.
func decodeNative(rs io.ReadSeeker, format string, cfg image.Config) (img image.Image, ok bool) {
	if nativeOff || format != "jpeg" || nativecodec.JPEGLibrary().Err != nil {
		return nil, false
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false
	}
	buf := fileBufs.Get().(*bytes.Buffer)
	defer fileBufs.Put(buf)
	buf.Reset()
	// libjpeg-turbo takes the whole file in memory: a file far larger
	// than its pixels could need (trailing chunks, a hostile file) is left
	// to Go's decoder, which streams it.
	limit := nativeFileLimit(cfg)
	var n int64
	if n, err = buf.ReadFrom(io.LimitReader(rs, limit+1)); err == nil && n > limit {
		err = errNotNative
	}
	if err == nil {
		img, err = nativecodec.JPEG(buf.Bytes(), cfg.Width, cfg.Height)
	}
	if _, serr := rs.Seek(start, io.SeekStart); serr != nil && err != nil {
		return nil, false // cannot happen for files and readers in memory
	}
	if err != nil {
		return nil, false
	}
	return img, true
}

// nativeFileLimit bounds the file size the native decoder reads: twice
// the image's 8-bit RGBA pixels and 1 MiB of headers and metadata.
func nativeFileLimit(cfg image.Config) int64 {
	return 2*4*int64(cfg.Width)*int64(cfg.Height) + 1<<20
}

// errNotNative marks images the native decoder leaves to Go.
var errNotNative = errors.New("left to Go's decoder")
