package metrics_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/segtune/segtune/metrics"
)

// PairedMeanIoU's per-image differences and interval are those of an
// independent numpy computation (per-class IoU over the
// classes in the mask or the prediction, ignored pixels dropped; the
// 95 % interval with t(0.975, 3) = 3.182446305284263); an image whose
// every pixel is ignored is left out.
func TestPairedMeanIoUMatchesReference(t *testing.T) {
	ign := []uint8{255, 255, 255, 255, 255, 255}
	images := []metrics.PairedPrediction{
		{"1", []uint8{0, 1, 1, 2, 0, 0}, []uint8{0, 1, 1, 1, 0, 0}, []uint8{0, 1, 1, 1, 0, 255}},
		{"2", []uint8{2, 2, 0, 0, 1, 1}, []uint8{2, 2, 0, 0, 1, 0}, []uint8{2, 2, 0, 0, 0, 0}},
		{"3", []uint8{0, 0, 0, 0, 0, 0}, []uint8{1, 1, 0, 0, 0, 0}, []uint8{1, 1, 0, 0, 0, 0}},
		{"4", []uint8{1, 2, 1, 2, 1, 2}, []uint8{1, 2, 1, 1, 1, 2}, []uint8{1, 2, 1, 1, 1, 1}},
		{"5", []uint8{0, 1, 2, 0, 1, 2}, []uint8{2, 1, 0, 2, 1, 0}, ign},
	}
	seq := func(yield func(metrics.PairedPrediction, error) bool) {
		for _, p := range images {
			if !yield(p, nil) {
				return
			}
		}
	}
	d, err := metrics.PairedMeanIoU(seq, 3, 255)
	if err != nil {
		t.Fatal(err)
	}
	const mean, lo, hi = 0.3444444444444445, -0.07450677619425272, 0.7633956650831417
	if d.N != 4 || math.Abs(d.Mean-mean) > 1e-12 || math.Abs(d.Lo-lo) > 1e-9 || math.Abs(d.Hi-hi) > 1e-9 {
		t.Fatalf("got n=%d %v [%v, %v], want n=4 %v [%v, %v]", d.N, d.Mean, d.Lo, d.Hi, mean, lo, hi)
	}

	bad := func(yield func(metrics.PairedPrediction, error) bool) {
		yield(metrics.PairedPrediction{Name: "short.png", A: []uint8{0}, B: []uint8{0, 1}, Target: []uint8{0, 1}}, nil)
	}
	if _, err := metrics.PairedMeanIoU(bad, 3, 255); err == nil || !strings.HasPrefix(err.Error(), "short.png: ") {
		t.Fatalf("a prediction of the wrong size: got %v", err)
	}
	broken := errors.New("disk gone")
	failing := func(yield func(metrics.PairedPrediction, error) bool) { yield(metrics.PairedPrediction{}, broken) }
	if _, err := metrics.PairedMeanIoU(failing, 3, 255); !errors.Is(err, broken) {
		t.Fatalf("a failing sequence: got %v", err)
	}
}
