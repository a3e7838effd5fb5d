package finetune

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/finetune/data"
)

// SizeSpec defines the object-size attribute of docs/method.md §1: the pixel
// fraction of the chosen classes in an image's mask, thresholded.
type SizeSpec struct {
	// Classes whose pixels count as the object; empty means every class
	// but 0 (background).
	Classes []int `json:"classes,omitempty"`
	// Threshold splits "small" from "large" (fraction > Threshold is
	// large); 0 means the training set's mean fraction, as in the paper.
	Threshold float64 `json:"threshold,omitempty"`
	// Vote, with several Classes, labels an image by majority vote over
	// the classes present in it, each compared with its own training-set
	// mean (the paper's experiment 3), instead of thresholding their
	// combined fraction.
	Vote bool `json:"vote,omitempty"`
	// Bins, when set, gives p−1 increasing thresholds for p > 2 size
	// values (one-vs-rest heads); it replaces Threshold.
	Bins []float64 `json:"bins,omitempty"`
}

// ObjectClasses returns the classes whose pixels count as the object in a
// model with numClasses classes: Classes, or every class but 0 when empty.
func (s SizeSpec) ObjectClasses(numClasses int) []int {
	if len(s.Classes) > 0 {
		return s.Classes
	}
	var out []int
	for c := 1; c < numClasses; c++ {
		out = append(out, c)
	}
	return out
}

// sizer assigns size classes to examples.
type sizer struct {
	spec      SizeSpec
	classes   []int
	threshold float64
	classMean []float64 // per class in classes, for Vote
}

// newSizer fits the thresholds on the training set.
func newSizer(spec SizeSpec, train *data.Dataset) (*sizer, error) {
	k := train.NumClasses()
	s := &sizer{spec: spec, classes: spec.ObjectClasses(k)}
	for _, c := range s.classes {
		if c < 0 || c >= k {
			return nil, fmt.Errorf("size class %d is outside the %d classes", c, k)
		}
	}
	if len(s.classes) == 0 {
		return nil, fmt.Errorf("no classes to measure object size with (the model has %d)", k)
	}
	if len(spec.Bins) > 0 && !slices.IsSorted(spec.Bins) {
		return nil, fmt.Errorf("size bins %v must increase", spec.Bins)
	}
	n := train.Len()
	if spec.Threshold > 0 {
		s.threshold = spec.Threshold
	} else {
		for id := 0; id < n; id++ {
			s.threshold += train.Fraction(id, s.classes...)
		}
		s.threshold /= float64(n)
	}
	if spec.Vote {
		s.classMean = make([]float64, len(s.classes))
		for j, c := range s.classes {
			present := 0
			for id := 0; id < n; id++ {
				if f := train.Fraction(id, c); f > 0 {
					s.classMean[j] += f
					present++
				}
			}
			if present > 0 {
				s.classMean[j] /= float64(present)
			}
		}
	}
	return s, nil
}

// values is the number of size values (2 for small/large).
func (s *sizer) values() int {
	if len(s.spec.Bins) > 0 {
		return len(s.spec.Bins) + 1
	}
	return 2
}

// class returns example id's size value: 0 small, 1 large (or the bin).
func (s *sizer) class(ds *data.Dataset, id int) int {
	f := ds.Fraction(id, s.classes...)
	if len(s.spec.Bins) > 0 {
		b := 0
		for b < len(s.spec.Bins) && f > s.spec.Bins[b] {
			b++
		}
		return b
	}
	if !s.spec.Vote {
		if f > s.threshold {
			return 1
		}
		return 0
	}
	large, small := 0, 0
	for j, c := range s.classes {
		if fc := ds.Fraction(id, c); fc > 0 {
			if fc > s.classMean[j] {
				large++
			} else {
				small++
			}
		}
	}
	if large > small {
		return 1
	}
	return 0
}

// group names example id's size group for reports.
func (s *sizer) group(ds *data.Dataset, id int) string {
	c := s.class(ds, id)
	if s.values() == 2 {
		return [2]string{"small", "large"}[c]
	}
	return fmt.Sprintf("size%d", c)
}
