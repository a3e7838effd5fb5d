// Package stats holds the one statistical test segtune's experiments and
// its demo report: the mean of paired differences with its two-sided 95 %
// Student-t interval, and what that interval supports.
package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Interval is the mean of n paired differences with its 95 % interval
// (Student's t with n−1 degrees of freedom).
type Interval struct {
	N        int
	Mean, SD float64 // SD: the sample standard deviation
	Lo, Hi   float64 // the 95 % interval; NaN with fewer than 2 pairs
}

// TInterval is the mean of xs with its two-sided 95 % t interval.
func TInterval(xs []float64) Interval {
	p := Interval{N: len(xs), Mean: math.NaN(), SD: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if len(xs) == 0 {
		return p
	}
	p.Mean = 0
	for _, x := range xs {
		p.Mean += x
	}
	p.Mean /= float64(len(xs))
	if len(xs) < 2 {
		return p
	}
	v := 0.0
	for _, x := range xs {
		v += (x - p.Mean) * (x - p.Mean)
	}
	p.SD = math.Sqrt(v / float64(len(xs)-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(xs) - 1)}.Quantile(0.975)
	h := t * p.SD / math.Sqrt(float64(len(xs)))
	p.Lo, p.Hi = p.Mean-h, p.Mean+h
	return p
}

// Verdict says what the interval supports: a gain or a loss only when it
// excludes zero.
func (p Interval) Verdict() string {
	switch {
	case p.N < 2 || math.IsNaN(p.Lo):
		return "too few pairs"
	case p.Lo > 0:
		return "gain"
	case p.Hi < 0:
		return "loss"
	}
	return "no detectable difference"
}

func (p Interval) String() string {
	if p.N == 0 {
		return "—"
	}
	if p.N < 2 {
		return fmt.Sprintf("%+.3f (1 pair)", p.Mean)
	}
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", p.Mean, p.Lo, p.Hi)
}

// MeanSD formats the mean ± sample standard deviation of xs.
func MeanSD(xs []float64) string {
	p := TInterval(xs)
	switch p.N {
	case 0:
		return "—"
	case 1:
		return fmt.Sprintf("%.3f", p.Mean)
	}
	return fmt.Sprintf("%.3f ± %.3f", p.Mean, p.SD)
}
