package imageio

import (
	"image"
	"image/color"

	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
)

// Bounds on the memory one decoded image may take (see
// Decoder.maxBytes): an eighth of the memory limit, since several images
// are decoded at once, but at least 256 MiB and at most 2 GiB.
const (
	minImageBytes = 256 << 20
	maxImageBytes = 2 << 30
)

// tensorBytesPerPixel is the float32 RGB tensor made from each pixel at the
// image's native size, and rgbaBytesPerPixel the 8-bit RGBA view
// preprocessing converts other pixel formats to.
const (
	tensorBytesPerPixel = 3 * 4
	rgbaBytesPerPixel   = 4
)

// bytesPerPixel returns the bytes per pixel of the image the standard
// decoders allocate for a colour model: 16-bit and alpha formats take more
// than the 8-bit RGB a pixel count suggests.
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel:
		return 3 // 4:4:4 at worst
	case color.NYCbCrAModel, color.RGBAModel, color.NRGBAModel, color.CMYKModel:
		return 4
	case color.RGBA64Model, color.NRGBA64Model:
		return 8
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8 // unknown: assume the widest
}

// DecodedBytes estimates the memory decoding an image with header cfg in
// format takes until it is a float tensor: the decoded pixels (twice for
// TIFF, whose decoder holds the whole uncompressed raster too), the 8-bit
// RGBA view and the float32 tensor at native size.
func DecodedBytes(cfg image.Config, format string) int64 {
	decoded := bytesPerPixel(cfg.ColorModel)
	if format == "tiff" {
		decoded *= 2
	}
	perPixel := decoded + tensorBytesPerPixel
	if cfg.ColorModel != color.RGBAModel {
		perPixel += rgbaBytesPerPixel
	}
	return memlimit.Product(int64(cfg.Width), int64(cfg.Height), perPixel)
}

func (d Decoder) maxBytes() int64 {
	if d.MaxBytes > 0 {
		return d.MaxBytes
	}
	limit, _ := memlimit.Limit()
	return min(max(limit/8, minImageBytes), maxImageBytes)
}

// checkBytes refuses an image whose decoding would take more memory than
// the per-image budget, from its header alone.
func (d Decoder) checkBytes(cfg image.Config, format string) error {
	need, limit := DecodedBytes(cfg, format), d.maxBytes()
	if need <= limit {
		return nil
	}
	return setting.Messagef("%w: %dx%d %s pixels would take about %s decoded (with the float tensor), more than the %s allowed per image (an eighth of the memory limit, set by "+string(memlimit.HowToSet())+")",
		ErrTooLarge, cfg.Width, cfg.Height, modelName(cfg.ColorModel), memlimit.Human(need), memlimit.Human(limit))
}

func modelName(m color.Model) string {
	switch m {
	case color.GrayModel:
		return "8-bit grey"
	case color.Gray16Model:
		return "16-bit grey"
	case color.RGBA64Model, color.NRGBA64Model:
		return "16-bit RGBA"
	case color.RGBAModel, color.NRGBAModel:
		return "8-bit RGBA"
	case color.YCbCrModel:
		return "YCbCr"
	case color.CMYKModel:
		return "CMYK"
	}
	if _, ok := m.(color.Palette); ok {
		return "palette"
	}
	return "colour"
}
