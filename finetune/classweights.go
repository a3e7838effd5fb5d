package finetune

import (
	"fmt"
	"math"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/onnx/grad"
)

// ClassWeightsAuto is the Config.ClassWeights value that weights the loss
// by InverseLogFrequency of the training masks.
const ClassWeightsAuto = "auto"

// InverseLogFrequency returns ENet's class weights (Paszke et al. 2016),
// w = 1/ln(1.02 + p), p each class's share of the labelled pixels in
// counts: rare classes weigh up to 1/ln(1.02) ≈ 50, a class covering
// everything 1/ln(2.02) ≈ 1.4.
func InverseLogFrequency(counts []int64) []float64 {
	var all int64
	for _, n := range counts {
		all += n
	}
	out := make([]float64, len(counts))
	for c, n := range counts {
		p := 0.0
		if all > 0 {
			p = float64(n) / float64(all)
		}
		out[c] = 1 / math.Log(1.02+p)
	}
	return out
}

// CheckClassWeights checks a Config.ClassWeights value before any file is
// read: "", "auto" or a list of weights.
func CheckClassWeights(spec string) error {
	if spec == "" || spec == ClassWeightsAuto {
		return nil
	}
	if _, err := grad.ParseClassWeights(spec); err != nil {
		return fmt.Errorf("class weights: %w", err)
	}
	return nil
}

// resolveClassWeights turns a Config.ClassWeights value into the loss's
// weights, one per class of the training set; nil for "".
func resolveClassWeights(spec string, train *data.Dataset) ([]float64, error) {
	switch spec {
	case "":
		return nil, nil
	case ClassWeightsAuto:
		counts := make([]int64, train.NumClasses())
		for id := range train.Len() {
			for c, n := range train.ClassCounts(id) {
				if c < len(counts) {
					counts[c] += n
				}
			}
		}
		return InverseLogFrequency(counts), nil
	}
	w, err := grad.ParseClassWeights(spec)
	if err != nil {
		return nil, fmt.Errorf("class weights: %w", err)
	}
	if len(w) != train.NumClasses() {
		return nil, fmt.Errorf("%d class weights for the training set's %d classes", len(w), train.NumClasses())
	}
	return w, nil
}
