package data

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/imageio/datalayout"
)

// Dataset is an opened, validated data set. Its methods are safe for
// concurrent use.
type Dataset struct {
	cfg        Config
	numClasses int
	ignore     uint8
	examples   []example
	cached     int
	cacheBytes int64
}

// example is one image/mask pair with its statistics and, when it fits the
// cache, its decoded pixels.
type example struct {
	sample        datalayout.Sample
	width, height int
	counts        []int64 // pixels of each class
	labelled      int64   // pixels not equal to the ignore label
	rgb, labels   []uint8 // nil when not cached
}

// Example describes one example of a Dataset.
type Example struct {
	ID            int
	Image, Mask   string
	Width, Height int
	// Cached reports whether its pixels are held in memory.
	Cached bool
}

// Sample is an example's decoded pixels. Slices returned from the cache
// are shared: treat them as read-only.
type Sample struct {
	Width, Height int
	// RGB holds packed 8-bit R, G, B triples, row by row (3·Width·Height).
	RGB []uint8
	// Labels holds one mapped label per pixel (Width·Height).
	Labels []uint8
}

// Len returns the number of examples.
func (d *Dataset) Len() int { return len(d.examples) }

// NumClasses returns the number of classes (configured or inferred).
func (d *Dataset) NumClasses() int { return d.numClasses }

// Ignore returns the ignore label.
func (d *Dataset) Ignore() int { return int(d.ignore) }

// ClassNames returns the configured class names, or nil.
func (d *Dataset) ClassNames() []string { return slices.Clone(d.cfg.ClassNames) }

// Cached returns how many examples are held in memory and the bytes they use.
func (d *Dataset) Cached() (examples int, bytes int64) { return d.cached, d.cacheBytes }

// Example returns example id's description; ok is false for an unknown id.
func (d *Dataset) Example(id int) (e Example, ok bool) {
	if id < 0 || id >= len(d.examples) {
		return Example{}, false
	}
	x := &d.examples[id]
	return Example{ID: id, Image: x.sample.Image, Mask: x.sample.Mask, Width: x.width, Height: x.height, Cached: x.rgb != nil}, true
}

// Load returns example id's pixels, from the cache or decoded afresh.
func (d *Dataset) Load(id int) (Sample, error) {
	if id < 0 || id >= len(d.examples) {
		return Sample{}, fmt.Errorf("data set: example %d out of range 0..%d", id, len(d.examples)-1)
	}
	x := &d.examples[id]
	if x.rgb != nil {
		return Sample{Width: x.width, Height: x.height, RGB: x.rgb, Labels: x.labels}, nil
	}
	s, err := decodePair(&d.cfg, x.sample)
	if err != nil {
		return Sample{}, err
	}
	if s.Width != x.width || s.Height != x.height {
		return Sample{}, fmt.Errorf("data set: %s changed size since it was opened (%dx%d, now %dx%d)",
			x.sample.Image, x.width, x.height, s.Width, s.Height)
	}
	return s, nil
}
