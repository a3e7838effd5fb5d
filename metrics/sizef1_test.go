package metrics_test

import (
	"testing"

	"github.com/segtune/segtune/metrics"
)

// SizeF1 counts a positive prediction of the true class as a hit, any
// other positive prediction as a false alarm and a missed positive as a
// miss; unseen examples do not count; with several heads the arg-max head
// predicts.
func TestSizeF1(t *testing.T) {
	// One head, scores > 0 predict 1: id 0 a hit, id 1 a false alarm, id 2
	// a miss, id 3 a true negative, id 4 unseen (a second miss if counted).
	scores := []float64{2, 1, -1, -3, -1}
	classes := []int{1, 0, 1, 0, 1}
	f1, ok := metrics.SizeF1(scores, []bool{true, true, true, true, false}, classes, 1)
	if !ok || f1 != 2.0/4 {
		t.Fatalf("one head: F1 %v, %v; want 0.5, true", f1, ok)
	}
	if all, _ := metrics.SizeF1(scores, nil, classes, 1); all != 2.0/5 {
		t.Fatalf("seen nil: F1 %v, want 0.4 (every example counted)", all)
	}
	// Three heads: example 0 predicts 2 (true 2: a hit), example 1 predicts
	// 1 (true 2: a false alarm), example 2 predicts 0 (true 1: a miss).
	f1, ok = metrics.SizeF1([]float64{0, 1, 3, 0, 2, 1, 5, 1, 1}, nil, []int{2, 2, 1}, 3)
	if !ok || f1 != 2.0/4 {
		t.Fatalf("three heads: F1 %v, %v; want 0.5, true", f1, ok)
	}
	if f1, ok := metrics.SizeF1([]float64{-1, -2}, nil, []int{0, 0}, 1); ok || f1 != 0 {
		t.Fatalf("no positives: F1 %v, %v; want 0, false", f1, ok)
	}
}
