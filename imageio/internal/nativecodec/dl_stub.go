//go:build !(cgo && (linux || darwin || freebsd))

package nativecodec

import "fmt"

// Without cgo there is no dlopen: Go's decoders are always used.

const (
	tjcsRGB   = 0
	tjcsYCbCr = 1
	tjcsGray  = 2
)

// JPEGNames are the library file names tried (never, here).
var JPEGNames []string

var errNoCgo = fmt.Errorf("%w: segtune was built without cgo", ErrUnavailable)

func loadJPEG() error  { return errNoCgo }
func jpegName() string { return "" }

// ResetForTest sets the names tried (nothing is loaded without cgo).
func ResetForTest(jpegNames []string) { JPEGNames = jpegNames }

func jpegHeader([]byte) (int, int, int, error) { return 0, 0, 0, errNoCgo }
func jpegDecode(_, _ []byte, _, _ int) error   { return errNoCgo }
