package quantize

import (
	"math"
	"math/rand/v2"
	"testing"
)

func collect(t *testing.T, o CalibOptions, batches ...[]float32) Range {
	t.Helper()
	c, err := NewCalibrator(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := c.Collect("x", b); err != nil {
			t.Fatal(err)
		}
	}
	return c.Ranges()["x"]
}

func TestMinMaxOverBatches(t *testing.T) {
	r := collect(t, CalibOptions{Method: MinMax}, []float32{-1, 2, 0}, []float32{0.5, 3}, []float32{float32(math.NaN()), 1})
	if r.Min != -1 || r.Max != 3 {
		t.Errorf("range %+v, want [-1, 3]", r)
	}
}

func TestCollectRefusesInfinity(t *testing.T) {
	c, _ := NewCalibrator(CalibOptions{Method: Entropy})
	if err := c.Collect("t", []float32{1, float32(math.Inf(-1))}); err == nil {
		t.Error("infinite value accepted")
	}
}

// 100 000 values uniform in [0, 1) and 5 outliers at 50: percentile
// calibration keeps the bulk and drops the outliers; min-max keeps them.
func TestPercentileClipsOutliers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, 100000)
	for i := range xs {
		xs[i] = r.Float32()
	}
	outliers := []float32{50, 50, 50, 50, 50}
	got := collect(t, CalibOptions{Method: Percentile, Percentile: 99.99}, xs, outliers)
	if got.Min != 0 && got.Min > 1e-4 {
		t.Errorf("min %v: a non-negative tensor keeps 0 as its lower end", got.Min)
	}
	// The absolute values fill 1024 bins of 0.049 over [0, 50]: the 99.99th
	// percentile lies in the bin holding 1.
	if got.Max < 0.99 || got.Max > 1.05 {
		t.Errorf("max %v, want about 1", got.Max)
	}
	mm := collect(t, CalibOptions{Method: MinMax}, xs, outliers)
	if mm.Max != 50 {
		t.Errorf("min-max max %v, want 50", mm.Max)
	}
	// Signed values: symmetric threshold, clamped to what was seen.
	signed := make([]float32, len(xs))
	for i, x := range xs {
		signed[i] = 2*x - 1
	}
	got = collect(t, CalibOptions{Method: Percentile, Percentile: 99.99}, signed, []float32{-40})
	if got.Min > -0.95 || got.Min < -1.1 || got.Max < 0.95 || got.Max > 1.0 {
		t.Errorf("signed range %+v, want about [-1, 1]", got)
	}
}

// Entropy calibration of a Gaussian with a long tail cuts the tail but
// keeps the body; on uniform values it keeps (nearly) all of the range.
func TestEntropyRange(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	xs := make([]float32, 200000)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	xs = append(xs, 40, -40)
	fine := CalibOptions{Method: Entropy, Bins: 2048}
	got := collect(t, fine, xs)
	if got.Max < 2.5 || got.Max > 20 || got.Min > -2.5 || got.Min < -20 {
		t.Errorf("gaussian: range %+v, want the tail (±40) cut and ±2.5σ kept", got)
	}
	u := make([]float32, 100000)
	for i := range u {
		u[i] = r.Float32()*2 - 1
	}
	got = collect(t, fine, u)
	if got.Max < 0.9 || got.Min > -0.9 {
		t.Errorf("uniform: range %+v, want nearly [-1, 1]", got)
	}
	// onnxruntime's defaults (128 bins, 128 levels): one batch leaves a
	// single window, the whole histogram.
	got = collect(t, CalibOptions{Method: Entropy}, xs)
	if got.Min != -40 || got.Max != 40 {
		t.Errorf("default entropy on one batch: %+v, want the min-max range", got)
	}
}

// A histogram whose first batch is tiny keeps every count when a later
// batch is a million times wider, and stays within its bin budget.
func TestHistogramGrowth(t *testing.T) {
	h := newHistogram(64)
	h.add([]float32{1e-3, -1e-3, 0}, false)
	h.add([]float32{1e3, 5, -7}, false)
	h.add([]float32{0, 0}, false)
	var total float64
	for _, c := range h.counts {
		total += c
	}
	if total != 8 {
		t.Errorf("%v values counted, want 8", total)
	}
	if len(h.counts) > h.maxBins {
		t.Errorf("%d bins, budget %d", len(h.counts), h.maxBins)
	}
	if top := float64(h.half) * h.stride; top < 1e3 {
		t.Errorf("histogram reaches %v, not the largest value 1000", top)
	}
	// All zeros first, then values: zeros are kept in the zero bin.
	h = newHistogram(8)
	h.add([]float32{0, 0, 0}, false)
	h.add([]float32{1, -1}, false)
	total = 0
	for _, c := range h.counts {
		total += c
	}
	if total != 5 {
		t.Errorf("%v values counted, want 5", total)
	}
}

func TestCalibOptionsValidation(t *testing.T) {
	for _, o := range []CalibOptions{
		{Method: "median"},
		{Method: Percentile, Percentile: 101},
		{Method: Percentile, Percentile: -1},
		{Method: Entropy, Bins: 64, QuantizedBins: 128},
	} {
		if _, err := NewCalibrator(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	c, err := NewCalibrator(CalibOptions{})
	if err != nil || c.Options().Method != MinMax || c.Options().Percentile != DefaultPercentile {
		t.Errorf("defaults: %+v %v", c.Options(), err)
	}
}

// A histogram that grew wide (here 4×2048 bins) is coarsened before the quadratic entropy
// search, which then still cuts the outliers.
func TestEntropyOnGrownHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c, _ := NewCalibrator(CalibOptions{Method: Entropy, Bins: 2048})
	for b := 0; b < 4; b++ {
		xs := make([]float32, 50000)
		for i := range xs {
			xs[i] = float32(r.NormFloat64())
		}
		xs[0] = float32(10 * (b + 1)) // each batch stretches the histogram
		if err := c.Collect("x", xs); err != nil {
			t.Fatal(err)
		}
	}
	h := c.hists["x"]
	if len(h.counts) <= maxEntropyBins {
		t.Fatalf("histogram has %d bins: the test needs one wider than %d", len(h.counts), maxEntropyBins)
	}
	got := c.Ranges()["x"]
	if len(h.counts) > maxEntropyBins || got.Max > 20 || got.Max < 2.5 {
		t.Errorf("%d bins, range %+v", len(h.counts), got)
	}
}
