package metrics

import (
	"slices"

	"github.com/segtune/segtune/internal/setting"
)

// SizeThresholdRange is an object size threshold as a user gives it: a
// share of an image (ObjectFraction), 0 for the data's mean.
var SizeThresholdRange = setting.Range{Min: 0, Max: 1, Why: "a fraction of the image"}

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
	counts, labelled := LabelCounts(labels, ignore)
	return ObjectFraction(counts[:], labelled, classes)
}

// LabelCounts returns per-class pixel counts, the ignore label's left at
// 0, and the number of pixels that are not ignore (an ignore outside
// 0..255 ignores none).
func LabelCounts(labels []uint8, ignore int) (counts [256]int64, labelled int64) {
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
