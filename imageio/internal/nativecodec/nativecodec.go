// Package nativecodec decodes JPEG with libjpeg-turbo (its TurboJPEG API,
// libturbojpeg.so.0), loaded at run time with dlopen, like onnxruntime_go
// loads ONNX Runtime: segtune builds and runs without it (the callers fall
// back to Go's decoder), and no header or development package is needed
// to build it. The prototypes are TurboJPEG 2.x's stable C API, kept by
// 3.x. PNG has no native path: with the checks Go's image/png makes,
// libspng was no faster on CamVid frames (README, "Image decoders").
//
// Debian and Ubuntu: apt-get install libturbojpeg0
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

// JPEGLibrary loads libjpeg-turbo (once) and says which file was loaded,
// or why none was.
func JPEGLibrary() Library { err := loadJPEG(); return Library{Name: jpegName(), Err: err} }
