package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
	layout, err := pngNativeLayout(data)
	if err != nil {
		return nil, err
	}
	return nativecodec.PNG(data, layout, cfg.Width, cfg.Height)
}

// pngNativeLayout walks the chunks of a PNG that libspng decodes to
// exactly what image/png gives (8-bit grey, truecolour or truecolour with
// alpha, no PLTE or tRNS: image/png turns tRNS into alpha and libspng is
// not asked to) and checks them as image/png does, which libspng does
// not: every chunk's CRC up to IEND, IHDR first, one run of IDAT chunks
// (later IDATs are ignored), an empty IEND. Anything else is left to Go,
// which then accepts or refuses the file itself.
func pngNativeLayout(data []byte) (nativecodec.PNGLayout, error) {
	const sig = "\x89PNG\r\n\x1a\n"
	var l nativecodec.PNGLayout
	if len(data) < 33 || string(data[:8]) != sig || string(data[12:16]) != "IHDR" {
		return l, errNotNative
	}
	w, h := binary.BigEndian.Uint32(data[16:]), binary.BigEndian.Uint32(data[20:])
	depth, ct, interlace := data[24], data[25], data[28]
	if depth != 8 || (ct != nativecodec.PNGGray && ct != nativecodec.PNGTruecolor && ct != nativecodec.PNGTrueAlpha) {
		return l, errNotNative
	}
	l.ColorType = int(ct)
	l.Filtered = pngFilteredSize(int64(w), int64(h), map[byte]int64{0: 1, 2: 3, 6: 4}[ct], interlace == 1)
	idatRun := 0 // 0 before the first IDAT, 1 within the first run, 2 after it
	for i := 8; ; {
		if len(data)-i < 12 {
			return l, errNotNative // no IEND
		}
		n := binary.BigEndian.Uint32(data[i:])
		typ := string(data[i+4 : i+8])
		if n > 0x7fffffff || uint64(n) > uint64(len(data)-i-12) {
			return l, errNotNative
		}
		body := data[i+8 : i+8+int(n)]
		if binary.BigEndian.Uint32(data[i+8+int(n):]) != crc32.ChecksumIEEE(data[i+4:i+8+int(n)]) {
			return l, errNotNative
		}
		switch typ {
		case "IHDR":
			if i != 8 {
				return l, errNotNative
			}
		case "PLTE", "tRNS":
			return l, errNotNative
		case "IDAT":
			if idatRun < 2 {
				idatRun = 1
				l.IDAT = append(l.IDAT, nativecodec.Span{Off: i + 8, Len: len(body)})
			}
		case "IEND":
			if idatRun == 0 || n != 0 {
				return l, errNotNative
			}
			return l, nil
		default:
			if idatRun == 1 {
				idatRun = 2
			}
		}
		i += 12 + int(n)
	}
}

// pngFilteredSize is the length of a PNG's inflated image data: each
// scanline of each (Adam7) pass with its filter byte; empty passes have
// none.
func pngFilteredSize(w, h, bytesPerPixel int64, adam7 bool) int64 {
	if !adam7 {
		return h * (1 + w*bytesPerPixel)
	}
	var size int64
	for _, p := range [7][4]int64{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw > 0 && ph > 0 {
			size += ph * (1 + pw*bytesPerPixel)
		}
	}
	return size
}
