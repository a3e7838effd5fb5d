package main

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// paired is the mean paired difference of n seeds with its 95 % interval
// (Student's t with n−1 degrees of freedom).
type paired struct {
	N        int
	Mean, SD float64
	Lo, Hi   float64 // the 95 % interval; NaN with fewer than 2 pairs
}

// pairedDiff returns the paired difference arm − base over the seeds both
// have (keys of the maps), in seed order.
func pairedDiff(arm, base map[int]float64) paired {
	var d []float64
	for _, s := range sortedSeeds(arm) {
		if b, ok := base[s]; ok {
			d = append(d, arm[s]-b)
		}
	}
	return tInterval(d)
}

// tInterval is the mean of xs with its two-sided 95 % t interval.
func tInterval(xs []float64) paired {
	p := paired{N: len(xs), Mean: math.NaN(), SD: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
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

// verdict says what the interval supports: a gain or a loss only when it
// excludes zero.
func (p paired) verdict() string {
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

func (p paired) String() string {
	if p.N == 0 {
		return "—"
	}
	if p.N < 2 {
		return fmt.Sprintf("%+.3f (1 pair)", p.Mean)
	}
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", p.Mean, p.Lo, p.Hi)
}

// meanSD formats the mean ± sample standard deviation of xs.
func meanSD(xs []float64) string {
	p := tInterval(xs)
	switch p.N {
	case 0:
		return "—"
	case 1:
		return fmt.Sprintf("%.3f", p.Mean)
	}
	return fmt.Sprintf("%.3f ± %.3f", p.Mean, p.SD)
}
