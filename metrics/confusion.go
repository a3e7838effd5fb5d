// Package metrics computes segmentation quality: a confusion matrix over
// pixels, and from it per-class IoU, Dice (F1), precision, recall and
// support, their means, and pixel accuracy. Every command that scores
// (eval, finetune's validation, export's check, the demo) counts here.
package metrics

import (
	"fmt"
	"math"
)

// Confusion counts pixels by (true class, predicted class). Targets equal to
// Ignore are skipped. The zero value is not usable; call NewConfusion.
type Confusion struct {
	Classes int
	Ignore  int
	// Counts[t*Classes+p] is the number of pixels of true class t predicted p.
	Counts []int64
}

// NewConfusion returns an empty matrix for classes 0..classes-1.
func NewConfusion(classes, ignore int) *Confusion {
	return &Confusion{Classes: classes, Ignore: ignore, Counts: make([]int64, classes*classes)}
}

// Add accumulates one image. pred and target are label maps of equal length.
// A target label outside 0..Classes-1 (other than Ignore) or a prediction
// outside that range is an error: it means the label map and the model
// disagree on the classes.
func (m *Confusion) Add(pred, target []uint8) error {
	if len(pred) != len(target) {
		return fmt.Errorf("prediction has %d pixels, mask %d", len(pred), len(target))
	}
	k := m.Classes
	for i, t := range target {
		if int(t) == m.Ignore {
			continue
		}
		p := pred[i]
		if int(t) >= k {
			return fmt.Errorf("mask label %d at pixel %d is outside the %d classes", t, i, k)
		}
		if int(p) >= k {
			return fmt.Errorf("predicted class %d at pixel %d is outside the %d classes", p, i, k)
		}
		m.Counts[int(t)*k+int(p)]++
	}
	return nil
}

// ScoreImage is one image's confusion matrix: its predicted labels pred
// against its mask's labels target, over classes 0..classes-1, pixels
// labelled ignore skipped. Every command scores an image with it and
// sums the images' matrices with Merge.
func ScoreImage(pred, target []uint8, classes, ignore int) (*Confusion, error) {
	m := NewConfusion(classes, ignore)
	if err := m.Add(pred, target); err != nil {
		return nil, err
	}
	return m, nil
}

// Merge adds another matrix of the same shape.
func (m *Confusion) Merge(o *Confusion) {
	for i, c := range o.Counts {
		m.Counts[i] += c
	}
}

// IoU returns each class's intersection over union; NaN for a class that
// appears in neither the targets nor the predictions.
func (m *Confusion) IoU() []float64 {
	k := m.Classes
	out := make([]float64, k)
	for c := 0; c < k; c++ {
		tp := m.Counts[c*k+c]
		var rowSum, colSum int64
		for j := 0; j < k; j++ {
			rowSum += m.Counts[c*k+j]
			colSum += m.Counts[j*k+c]
		}
		union := rowSum + colSum - tp
		if union == 0 {
			out[c] = math.NaN()
			continue
		}
		out[c] = float64(tp) / float64(union)
	}
	return out
}

// MeanIoU averages IoU over the classes that appear (NaN entries skipped).
func (m *Confusion) MeanIoU() float64 { return nanMean(m.IoU()) }

// PixelAccuracy is the fraction of non-ignored pixels predicted correctly.
func (m *Confusion) PixelAccuracy() float64 {
	var right, all int64
	k := m.Classes
	for t := 0; t < k; t++ {
		for p := 0; p < k; p++ {
			c := m.Counts[t*k+p]
			all += c
			if t == p {
				right += c
			}
		}
	}
	if all == 0 {
		return math.NaN()
	}
	return float64(right) / float64(all)
}

// Pixels returns the number of non-ignored pixels counted.
func (m *Confusion) Pixels() int64 {
	var all int64
	for _, c := range m.Counts {
		all += c
	}
	return all
}

// Support returns each class's true pixels (the matrix's row sums).
func (m *Confusion) Support() []int64 {
	k := m.Classes
	out := make([]int64, k)
	for t := 0; t < k; t++ {
		for p := 0; p < k; p++ {
			out[t] += m.Counts[t*k+p]
		}
	}
	return out
}

// Predicted returns each class's predicted pixels (the column sums).
func (m *Confusion) Predicted() []int64 {
	k := m.Classes
	out := make([]int64, k)
	for t := 0; t < k; t++ {
		for p := 0; p < k; p++ {
			out[p] += m.Counts[t*k+p]
		}
	}
	return out
}

// Precision returns each class's true positives over its predicted pixels;
// NaN for a class never predicted.
func (m *Confusion) Precision() []float64 {
	return m.ratios(func(tp, _, pred int64) (int64, int64) { return tp, pred })
}

// Recall returns each class's true positives over its true pixels; NaN for
// a class absent from the masks.
func (m *Confusion) Recall() []float64 {
	return m.ratios(func(tp, support, _ int64) (int64, int64) { return tp, support })
}

// Dice returns each class's Dice coefficient (F1), 2·TP / (true + predicted);
// NaN where IoU is NaN.
func (m *Confusion) Dice() []float64 {
	return m.ratios(func(tp, support, pred int64) (int64, int64) { return 2 * tp, support + pred })
}

// ratios computes num/den per class from its true positives, support and
// predicted count; a zero denominator gives NaN.
func (m *Confusion) ratios(f func(tp, support, pred int64) (num, den int64)) []float64 {
	support, pred := m.Support(), m.Predicted()
	out := make([]float64, m.Classes)
	for c := range out {
		num, den := f(m.Counts[c*m.Classes+c], support[c], pred[c])
		if den == 0 {
			out[c] = math.NaN()
			continue
		}
		out[c] = float64(num) / float64(den)
	}
	return out
}

// RowNormalized returns the matrix with each row divided by its sum: row t
// is where class t's pixels went. A row with no pixels is all zero.
func (m *Confusion) RowNormalized() [][]float64 {
	k := m.Classes
	support := m.Support()
	out := make([][]float64, k)
	for t := range out {
		out[t] = make([]float64, k)
		if support[t] == 0 {
			continue
		}
		for p := range out[t] {
			out[t][p] = float64(m.Counts[t*k+p]) / float64(support[t])
		}
	}
	return out
}

// Rows returns the counts as a k×k slice of rows (true class, predicted).
func (m *Confusion) Rows() [][]int64 {
	k := m.Classes
	out := make([][]int64, k)
	for t := range out {
		out[t] = append([]int64(nil), m.Counts[t*k:(t+1)*k]...)
	}
	return out
}

// nanMean averages the finite entries of v; NaN when there are none.
func nanMean(v []float64) float64 {
	var sum float64
	var n int
	for _, x := range v {
		if !math.IsNaN(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}
