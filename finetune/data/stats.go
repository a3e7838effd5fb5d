package data

import (
	"slices"

	"github.com/segtune/segtune/metrics"
)

// ClassCounts returns the number of pixels of each class in example id's
// mask (the ignore label excluded), or nil for an unknown id.
func (d *Dataset) ClassCounts(id int) []int64 {
	if id < 0 || id >= len(d.examples) {
		return nil
	}
	return slices.Clone(d.examples[id].counts)
}

// Fraction returns the share of example id's labelled (non-ignore) pixels
// that belong to any of classes: the "object size" of those classes
// (metrics.ObjectFraction). It is 0 for an unknown id, an unknown class or a mask
// without labelled pixels.
func (d *Dataset) Fraction(id int, classes ...int) float64 {
	if id < 0 || id >= len(d.examples) {
		return 0
	}
	x := &d.examples[id]
	return metrics.ObjectFraction(x.counts, x.labelled, classes)
}

// ClassFractions returns, for every example, the share of its labelled
// pixels in each class: out[id][class]. Each row sums to 1, or is all 0
// when the mask is entirely ignored.
func (d *Dataset) ClassFractions() [][]float64 {
	out := make([][]float64, len(d.examples))
	flat := make([]float64, len(d.examples)*d.numClasses)
	for id := range d.examples {
		x := &d.examples[id]
		row := flat[id*d.numClasses : (id+1)*d.numClasses : (id+1)*d.numClasses]
		if x.labelled > 0 {
			for c, n := range x.counts {
				row[c] = float64(n) / float64(x.labelled)
			}
		}
		out[id] = row
	}
	return out
}
