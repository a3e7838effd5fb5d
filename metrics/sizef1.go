package metrics

// SizeF1 is the F1 of a size predictor over the examples seen (all when
// seen is nil): with one head a score > 0 predicts size class 1 ("large",
// S+), with several the arg-max head's class; class 0 is the negative.
// scores holds heads values per example, classes each example's true size
// class. ok is false (and the F1 0) when no example is predicted or
// labelled positive. Fine-tuning's size-head log and the S-MNIST study
// both report it.
func SizeF1(scores []float64, seen []bool, classes []int, heads int) (f1 float64, ok bool) {
	var tp, fp, fn float64
	for i, c := range classes {
		if seen != nil && !seen[i] {
			continue
		}
		pred := 0
		if heads == 1 {
			if scores[i] > 0 {
				pred = 1
			}
		} else {
			for h := 1; h < heads; h++ {
				if scores[i*heads+h] > scores[i*heads+pred] {
					pred = h
				}
			}
		}
		switch {
		case pred != 0 && pred == c:
			tp++
		case pred != 0:
			fp++
		case c != 0:
			fn++
		}
	}
	if tp+fp+fn == 0 {
		return 0, false
	}
	return 2 * tp / (2*tp + fp + fn), true
}
