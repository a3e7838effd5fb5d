package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"

	// Registered formats: everything the standard library and x/image decode
	// without cgo.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"github.com/segtune/segtune/internal/regfile"
)

// DefaultMaxPixels is the pixel limit used by [ReadImage] and [DecodeImage]:
// 100 megapixels, far above any segmentation input yet small enough that a
// crafted file cannot make the decoder allocate tens of gigabytes.
const DefaultMaxPixels = 100_000_000

// ErrTooLarge is wrapped by errors for images whose header declares more
// pixels than the decoder's limit.
var ErrTooLarge = errors.New("image exceeds pixel limit")

// Decoder decodes images after checking their declared size.
type Decoder struct {
	// MaxPixels is the largest width×height accepted; 0 means DefaultMaxPixels.
	MaxPixels int64
	// MaxBytes is the most memory one image may take from decoding to
	// float tensor (see DecodedBytes); 0 means an eighth of the memory
	// limit (internal/memlimit), between 256 MiB and 2 GiB.
	MaxBytes int64
}

// ReadImage decodes the image file at path with the default pixel limit.
func ReadImage(path string) (image.Image, error) { return Decoder{}.ReadFile(path) }

// DecodeImage decodes an image from r with the default pixel limit; name is
// used in error messages (typically the file name).
func DecodeImage(r io.Reader, name string) (image.Image, error) { return Decoder{}.Decode(r, name) }

// ReadFile decodes the image file at path.
func (d Decoder) ReadFile(path string) (image.Image, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	defer f.Close()
	return d.Decode(f, path)
}

// Decode decodes an image from r. The header is checked first with
// image.DecodeConfig so oversized images are refused before any pixel
// memory is allocated. Errors name the image by name.
func (d Decoder) Decode(r io.Reader, name string) (image.Image, error) {
	if name == "" {
		name = "<input>"
	}
	rs, ok := r.(io.ReadSeeker)
	var start int64
	if ok {
		pos, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			ok = false
		} else {
			start = pos
		}
	}
	if !ok {
		// Two passes (header, then pixels) need a rewindable source.
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", name, err)
		}
		rs = bytes.NewReader(data)
	}
	cfg, format, err := decodeConfig(rs)
	if err != nil {
		return nil, fmt.Errorf("decode image %s: %w", name, err)
	}
	if err := d.checkSize(cfg.Width, cfg.Height); err != nil {
		return nil, fmt.Errorf("decode image %s (%s): %w", name, format, err)
	}
	if err := d.checkBytes(cfg, format); err != nil {
		return nil, fmt.Errorf("decode image %s (%s): %w", name, format, err)
	}
	if format == "jpeg" {
		if _, err := rs.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("read image %s: %w", name, err)
		}
		if err := d.checkJPEGScans(rs, cfg.Width, cfg.Height, DecodedBytes(cfg, format)); err != nil {
			return nil, fmt.Errorf("decode image %s (%s): %w", name, format, err)
		}
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read image %s: %w", name, err)
	}
	if img, ok := decodeNative(rs, format, cfg); ok {
		return img, nil
	}
	img, _, err := decode(rs)
	if err != nil {
		return nil, fmt.Errorf("decode image %s (%s): %w", name, format, err)
	}
	return img, nil
}

// Config reads only the header of the image in r (its size and format),
// with the decoder's size check; name is used in errors. Reading stops
// after the header, so a streamed download can be abandoned there.
func (d Decoder) Config(r io.Reader, name string) (image.Config, string, error) {
	cfg, format, err := decodeConfig(r)
	if err != nil {
		return cfg, format, fmt.Errorf("decode image %s: %w", name, err)
	}
	if err := d.checkSize(cfg.Width, cfg.Height); err != nil {
		return cfg, format, fmt.Errorf("decode image %s (%s): %w", name, format, err)
	}
	return cfg, format, nil
}

func (d Decoder) maxPixels() int64 {
	if d.MaxPixels > 0 {
		return d.MaxPixels
	}
	return DefaultMaxPixels
}

func (d Decoder) checkSize(w, h int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("invalid size %dx%d", w, h)
	}
	// Divide rather than multiply: w*h can overflow for hostile headers.
	if limit := d.maxPixels(); int64(w) > limit/int64(h) {
		return fmt.Errorf("%w: %dx%d is more than %d pixels", ErrTooLarge, w, h, limit)
	}
	return nil
}

// decodeConfig and decode turn a panic inside a third-party decoder into an
// error: hostile input must never crash a long-running pipeline.
func decodeConfig(r io.Reader) (cfg image.Config, format string, err error) {
	r, isTIFF := sniffTIFF(r)
	if isTIFF {
		return decodeTIFFConfig(r)
	}
	defer recoverDecode(&err)
	return image.DecodeConfig(r)
}

func decode(r io.Reader) (img image.Image, format string, err error) {
	r, isTIFF := sniffTIFF(r)
	if isTIFF {
		return decodeTIFF(r)
	}
	defer recoverDecode(&err)
	return image.Decode(r)
}

func recoverDecode(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("malformed image (decoder panic: %v)", p)
	}
}
