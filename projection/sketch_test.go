package projection

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// estimateThreshold estimates ō = ε* from m elements of gamma drawn
// uniformly with replacement (docs/method.md §7; the paper calls it "sketching"). Each drawn element
// stands for n/m elements, so the estimate is the root θ̂ of
//
//	θ − δ = (n/m) Σ_{sampled s} max(γ_s − θ, 0),
//
// clipped at 0, computed by sorting the sample: O(m log m) time and O(m)
// scratch, independent of n apart from the random reads.
//
// Bias. The right-hand side is an unbiased estimate of Σ_i max(γ_i − θ, 0)
// for every fixed θ, but the root of a noisy decreasing convex function is
// not an unbiased estimate of the true root. A first-order expansion gives
// θ̂ − θ* ≈ e/(1 + k̂), where e is the (zero-mean) error of the sampled sum
// at θ* and k̂ = (n/m)·(number of sampled elements above θ*) the estimated
// active count. Samples that over-represent the top of γ have both e > 0
// and a large k̂, so positive errors are shrunk and negative ones are not:
// the estimate is biased low, by O(1/m) relative to the spread of the
// active elements, and the bias is largest when the active set is a small
// fraction of n (a sample of m then often holds no active element and θ̂
// collapses towards δ). TestEstimateThresholdBias measures it. The naive
// alternative — projecting the sample alone, without the n/m weight — is
// far worse: it solves the problem for m instead of n elements and is
// biased towards δ by a factor that does not vanish as m grows.
//
// It lives in the tests: training projects exactly (ProjectPivot costs
// about one pass over the data, bench/projection), and the estimate is
// kept to measure the paper's sketching claim (docs/method.md §7).
//
// m ≤ 0 or m ≥ len(gamma) computes the exact threshold. scratch with
// capacity ≥ m avoids allocation.
func estimateThreshold[T Float](delta T, gamma []T, m int, rng *rand.Rand, scratch []T) (T, error) {
	n := len(gamma)
	if m <= 0 || m >= n {
		return ThresholdSort(delta, gamma, scratch)
	}
	if rng == nil {
		return 0, errors.New("projection: estimateThreshold needs a random source")
	}
	s := scratchFor(scratch, m)
	for j := range s {
		s[j] = gamma[rng.IntN(n)]
	}
	theta, err := thetaSort(float64(delta), s, s, float64(n)/float64(m))
	if err != nil {
		return 0, err
	}
	return T(math.Max(0, theta)), nil
}

// TestEstimateThresholdBias measures the sketch estimator: it must be close
// to the exact threshold when the active set is a sizable fraction of n,
// and its mean error over seeds is negative (biased low) as documented.
func TestEstimateThresholdBias(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 200000
	g := make([]float64, n)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	// δ chosen so that θ* sits near the 90th percentile: ~10% active.
	delta := -20000.0
	exact, _ := ThresholdSort(delta, g, nil)
	m := 2000
	var sum, sumSq float64
	const reps = 200
	scratch := make([]float64, m)
	for range reps {
		est, err := estimateThreshold(delta, g, m, r, scratch)
		if err != nil {
			t.Fatal(err)
		}
		d := est - exact
		sum += d
		sumSq += d * d
	}
	mean := sum / reps
	rmse := math.Sqrt(sumSq / reps)
	t.Logf("exact ō = %.5f, m = %d: mean error %.2e, rmse %.2e", exact, m, mean, rmse)
	if rmse > 0.05*math.Abs(exact) {
		t.Errorf("sketch rmse %g too large vs ō %g", rmse, exact)
	}
	if mean > 0 {
		t.Errorf("expected a low bias, got mean error %g", mean)
	}
	// m ≥ n is exact.
	if e, _ := estimateThreshold(delta, g, n, r, nil); e != exact {
		t.Errorf("m = n: %v != %v", e, exact)
	}
}
