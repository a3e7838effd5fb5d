//go:build !(cgo && (linux || darwin || freebsd))

package nativecodec

import "fmt"

// Without cgo there is no dlopen: Go's decoders are always used.

const (
	tjcsRGB   = 0
	tjcsYCbCr = 1
	tjcsGray  = 2

	spngFmtRGBA8 = 1
	spngFmtPNG   = 256
)

// JPEGNames and PNGNames are the library file names tried (never, here).
var JPEGNames, PNGNames []string

var errNoCgo = fmt.Errorf("%w: segtune was built without cgo", ErrUnavailable)

func loadJPEG() error  { return errNoCgo }
func loadPNG() error   { return errNoCgo }
func jpegName() string { return "" }
func pngName() string  { return "" }

// ResetForTest sets the names tried (nothing is loaded without cgo).
func ResetForTest(jpegNames, pngNames []string) { JPEGNames, PNGNames = jpegNames, pngNames }

func jpegHeader([]byte) (int, int, int, error)   { return 0, 0, 0, errNoCgo }
func jpegDecode(_, _ []byte, _, _ int) error     { return errNoCgo }
func pngDecode(_, _ []byte, _, _, _ int) error   { return errNoCgo }
func pngStreamCheck([]byte, []Span, int64) error { return errNoCgo }
