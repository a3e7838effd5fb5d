// Package nativecodec decodes JPEG with libjpeg-turbo (its TurboJPEG API,
// libturbojpeg.so.0) and PNG with libspng (libspng.so.0), both loaded at
// run time with dlopen, like onnxruntime_go loads ONNX Runtime: segtune
// builds and runs without them (the callers fall back to Go's decoders),
// and no header or development package is needed to build it. The
// prototypes below are the libraries' stable C APIs (TurboJPEG 2.x, kept
// by 3.x; libspng 0.7).
//
// Debian and Ubuntu: apt-get install libturbojpeg0 libspng0
// (scripts/install-codecs.sh).
package nativecodec

import (
	"errors"
	"fmt"
	"image"
)

// ErrUnavailable is returned when the library is not loaded.
var ErrUnavailable = errors.New("native codec not available")

// Library is one loaded (or missing) native library.
type Library struct {
	Name string // the file name it was loaded from, or the names tried
	Err  error  // why it is not available; nil when loaded
}

// WarningError reports that the library decoded the image but flagged it
// (e.g. libjpeg-turbo's "Premature end of JPEG file", after which the rest
// of the image is grey): callers should not trust the pixels.
type WarningError struct{ Msg string }

func (e *WarningError) Error() string { return "warning: " + e.Msg }

// PNG colour types (the IHDR field).
const (
	PNGGray      = 0
	PNGTruecolor = 2
	PNGTrueAlpha = 6
)

// JPEG decodes a JPEG held in data to 8-bit RGBA (opaque), with the
// chroma planes upsampled by replication like Go's YCbCr-to-RGBA
// conversion. Only baseline and progressive JPEGs in YCbCr, RGB or grey
// are decoded; CMYK/YCCK are refused (an error), as are images whose
// header does not give wantW×wantH.
func JPEG(data []byte, wantW, wantH int) (*image.RGBA, error) {
	if err := loadJPEG(); err != nil {
		return nil, err
	}
	if len(data) == 0 || wantW <= 0 || wantH <= 0 {
		return nil, errors.New("libjpeg-turbo: empty input")
	}
	w, h, cs, err := jpegHeader(data)
	if err != nil {
		return nil, err
	}
	if w != wantW || h != wantH {
		return nil, fmt.Errorf("libjpeg-turbo: header gives %dx%d, expected %dx%d", w, h, wantW, wantH)
	}
	if cs != tjcsRGB && cs != tjcsYCbCr && cs != tjcsGray {
		return nil, fmt.Errorf("libjpeg-turbo: colour space %d is not decoded natively", cs)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	if err := jpegDecode(data, img.Pix, w, h); err != nil {
		return nil, err
	}
	return img, nil
}

// Span is a byte range of a file: data[Off : Off+Len].
type Span struct{ Off, Len int }

// PNGLayout is what the caller read from a PNG's chunks: its colour type
// (PNGGray, PNGTruecolor or PNGTrueAlpha), the data of its consecutive
// IDAT chunks, in order, and the length their zlib stream must inflate
// to (the filtered scanlines of every pass).
type PNGLayout struct {
	ColorType int
	IDAT      []Span
	Filtered  int64
}

// PNG decodes a non-interlaced or interlaced 8-bit PNG laid out as l, held
// in data, without applying tRNS, gamma or colour profiles (as Go's
// image/png does not); the caller checks there is no tRNS chunk and that
// every chunk's CRC is right. The image data stream is first inflated
// once to check what libspng does not and image/png does: that it ends
// exactly where the pixels and an IDAT chunk end, with a valid Adler-32.
// It returns the image type Go's decoder returns for the same file:
// *image.Gray, *image.RGBA (truecolour, alpha 255) or *image.NRGBA.
func PNG(data []byte, l PNGLayout, wantW, wantH int) (image.Image, error) {
	if err := loadPNG(); err != nil {
		return nil, err
	}
	if len(data) == 0 || wantW <= 0 || wantH <= 0 {
		return nil, errors.New("libspng: empty input")
	}
	if err := pngStreamCheck(data, l.IDAT, l.Filtered); err != nil {
		return nil, err
	}
	r := image.Rect(0, 0, wantW, wantH)
	switch l.ColorType {
	case PNGGray:
		img := image.NewGray(r)
		return img, pngDecode(data, img.Pix, spngFmtPNG, wantW, wantH)
	case PNGTruecolor:
		img := image.NewRGBA(r)
		return img, pngDecode(data, img.Pix, spngFmtRGBA8, wantW, wantH)
	case PNGTrueAlpha:
		img := image.NewNRGBA(r)
		return img, pngDecode(data, img.Pix, spngFmtPNG, wantW, wantH)
	}
	return nil, fmt.Errorf("libspng: colour type %d is not decoded natively", l.ColorType)
}

// JPEGLibrary and PNGLibrary load the libraries (once) and say which file
// was loaded, or why none was.
func JPEGLibrary() Library { err := loadJPEG(); return Library{Name: jpegName(), Err: err} }

// PNGLibrary: see JPEGLibrary.
func PNGLibrary() Library { err := loadPNG(); return Library{Name: pngName(), Err: err} }
