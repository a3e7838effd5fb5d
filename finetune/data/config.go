package data

import (
	"fmt"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
)

// NumClassesRange is Config.NumClasses as a user gives it.
var NumClassesRange = setting.Range{Min: 1, Max: 65536, Zero: true, Why: "0: the largest label seen + 1"}

// DefaultCacheBytes is the default in-memory cache budget: 2 GiB, about
// 3,000 CamVid-sized (480×360) examples at 4 bytes per pixel, or a quarter
// of the memory limit where that is less.
const DefaultCacheBytes int64 = 2 << 30

// DefaultIgnore is the ignore label used when Config.Ignore is 0.
const DefaultIgnore = 255

// Config describes a data set to open.
type Config struct {
	// ImageDir and MaskDir hold the images and their masks, paired by base
	// name without extension.
	ImageDir, MaskDir string
	// Data, instead of ImageDir and MaskDir, is a data folder in any
	// layout datalayout knows (Format names it, "" detects it), of which
	// Split is read ("" for a layout without splits).
	Data, Format, Split string
	// CrowdAsClass paints COCO's crowd regions with their class instead
	// of ignoring them (datalayout.Options).
	CrowdAsClass bool
	// ValSplit, when set, divides the samples: HeldOut reads those held
	// out for validation, otherwise the rest are read.
	ValSplit *datalayout.ValSplit
	HeldOut  bool
	// LabelMap remaps mask labels after reading, e.g. "11:255" to make
	// CamVid's Unlabelled the ignore label; nil keeps them.
	LabelMap *imageio.LabelMap
	// Palette turns RGB colour masks into labels (colour i → label i);
	// single-channel and palette PNG masks do not need it.
	Palette imageio.Palette
	// NumClasses is the number of classes; every mapped label must be
	// below it or equal to Ignore. 0 infers it from the largest label seen
	// (NumClassesRange).
	NumClasses int
	// Ignore is the label excluded from training and statistics, 1..255; 0
	// means DefaultIgnore (255). It must not be below NumClasses; a data
	// set that marks "ignore" with 0 can move it with the LabelMap.
	Ignore int
	// ClassNames optionally names the classes (len NumClasses).
	ClassNames []string
	// MaxPixels is the decoder's pixel limit (0 = imageio.DefaultMaxPixels).
	MaxPixels int64
	// SkipBad turns per-example errors (undecodable image, mask of the
	// wrong size, label out of range, image without mask) into Problems
	// and skips the example instead of failing Open.
	SkipBad bool
	// CacheBytes bounds the memory kept for decoded pixels (4 bytes per
	// pixel: packed RGB and a byte label); 0 means DefaultCacheBytes and a
	// negative value disables the cache.
	CacheBytes int64
	// Workers decode in parallel at open; 0 means GOMAXPROCS.
	Workers int
}

// Problem is an example skipped by Open under Config.SkipBad.
type Problem struct {
	// Path is the file at fault (the image or the mask).
	Path string
	// Err says what is wrong; its message names the file too.
	Err error
}

// Error returns the problem's message.
func (p Problem) Error() string { return p.Err.Error() }

// Unwrap returns the underlying error.
func (p Problem) Unwrap() error { return p.Err }

func (c *Config) ignore() int {
	if c.Ignore == 0 {
		return DefaultIgnore
	}
	return c.Ignore
}

// source names the data in messages.
func (c *Config) source() string {
	if c.Data != "" {
		return c.Data
	}
	return c.ImageDir + " and " + c.MaskDir
}

func (c *Config) cacheBudget() int64 {
	switch {
	case c.CacheBytes < 0:
		return 0
	case c.CacheBytes == 0:
		// A quarter of the memory limit at most: the rest is the
		// training step's.
		limit, _ := memlimit.Limit()
		return min(DefaultCacheBytes, limit/4)
	}
	return c.CacheBytes
}

func (c *Config) validate() error {
	if c.Data != "" && (c.ImageDir != "" || c.MaskDir != "") {
		return fmt.Errorf("data set: a data folder (%s) and image and mask folders (%q, %q) are exclusive", c.Data, c.ImageDir, c.MaskDir)
	}
	if c.Data == "" && (c.ImageDir == "" || c.MaskDir == "") {
		return fmt.Errorf("data set: image and mask folders are required, have %q and %q", c.ImageDir, c.MaskDir)
	}
	ign := c.ignore()
	if ign < 0 || ign > 255 {
		return fmt.Errorf("data set: ignore label %d is outside 1..255 (masks are kept as bytes)", c.Ignore)
	}
	if c.NumClasses < 0 || c.NumClasses > ign {
		return fmt.Errorf("data set: %d classes do not fit below the ignore label %d", c.NumClasses, ign)
	}
	if len(c.ClassNames) > 0 && c.NumClasses > 0 && len(c.ClassNames) != c.NumClasses {
		return fmt.Errorf("data set: %d class names for %d classes", len(c.ClassNames), c.NumClasses)
	}
	return nil
}

func (c *Config) maskOptions(w, h int) imageio.MaskOptions {
	n := c.NumClasses
	if n == 0 {
		// Still bound labels so they fit a byte; the real count is inferred.
		n = c.ignore()
	}
	return imageio.MaskOptions{
		Decoder:    imageio.Decoder{MaxPixels: c.MaxPixels},
		Palette:    c.Palette,
		Map:        c.LabelMap,
		Width:      w,
		Height:     h,
		NumClasses: n,
		Ignore:     int32(c.ignore()),
	}
}
