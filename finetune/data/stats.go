package data

import "slices"

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
// (ObjectFraction). It is 0 for an unknown id, an unknown class or a mask
// without labelled pixels.
func (d *Dataset) Fraction(id int, classes ...int) float64 {
	if id < 0 || id >= len(d.examples) {
		return 0
	}
	x := &d.examples[id]
	return ObjectFraction(x.counts, x.labelled, classes)
}

// ObjectFraction is the object size of docs/method.md §1: the share of a
// mask's labelled pixels whose class is one of classes. counts[c] is the
// number of pixels of class c and labelled the number not ignored; a class
// outside counts adds nothing, one named twice counts once. It is 0 when
// nothing is labelled.
func ObjectFraction(counts []int64, labelled int64, classes []int) float64 {
	if labelled <= 0 {
		return 0
	}
	var n int64
	for i, c := range classes {
		if c < 0 || c >= len(counts) || slices.Contains(classes[:i], c) {
			continue
		}
		n += counts[c]
	}
	return float64(n) / float64(labelled)
}

// MaskObjectFraction is ObjectFraction of a mask's labels, pixels labelled
// ignore not counted (an ignore outside 0..255 ignores none).
func MaskObjectFraction(labels []uint8, ignore int, classes []int) float64 {
	counts, labelled := countLabels(labels, ignore)
	return ObjectFraction(counts[:], labelled, classes)
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

// countLabels returns per-class pixel counts, the ignore label's left at 0,
// and the number of pixels that are not ignore (an ignore outside 0..255
// ignores none).
func countLabels(labels []uint8, ignore int) (counts [256]int64, labelled int64) {
	for _, l := range labels {
		counts[l]++
	}
	labelled = int64(len(labels))
	if ignore >= 0 && ignore < len(counts) {
		labelled -= counts[ignore]
		counts[ignore] = 0
	}
	return counts, labelled
}
