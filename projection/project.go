package projection

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Float is the element type accepted by the projections.
type Float interface{ ~float32 | ~float64 }

// ErrNonFinite is returned (wrapped, with the offending position) when δ or
// an element of γ is NaN or ±Inf: the projection of such a point is not
// defined, and silently propagating NaN into τ would corrupt training state.
var ErrNonFinite = errors.New("projection: non-finite input")

// bigMag bounds the magnitudes that may be summed without rescaling: with
// |x| ≤ 2^900 and fewer than 2^100 terms no float64 sum can overflow.
var bigMag = math.Ldexp(1, 900)

func nonFinite(where string, i int, x float64) error {
	if i < 0 {
		return fmt.Errorf("%w: %s = %v", ErrNonFinite, where, x)
	}
	return fmt.Errorf("%w: %s[%d] = %v", ErrNonFinite, where, i, x)
}

func isFinite(x float64) bool { return x-x == 0 }

// scratchFor returns scratch[:n], allocating when scratch is too short.
func scratchFor[T Float](scratch []T, n int) []T {
	if cap(scratch) >= n {
		return scratch[:n]
	}
	return make([]T, n)
}

// ThresholdSort returns ō = ε* = max(0, θ*) for the projection of (delta,
// gamma) onto C, by sorting a copy of gamma (O(n log n)). gamma is not
// modified. scratch, if it has capacity ≥ len(gamma), is used for the copy
// and no allocation happens.
func ThresholdSort[T Float](delta T, gamma, scratch []T) (T, error) {
	theta, err := thetaSort(float64(delta), gamma, scratch, 1)
	if err != nil {
		return 0, err
	}
	return T(math.Max(0, theta)), nil
}

// ThresholdPivot returns ō = ε* like ThresholdSort, in O(n) expected time
// without a full sort (filtering pass plus pivoting search). gamma is not
// modified; scratch (capacity ≥ len(gamma)) avoids allocation. In the common
// case only a small fraction of scratch is touched.
func ThresholdPivot[T Float](delta T, gamma, scratch []T) (T, error) {
	theta, err := thetaPivot(float64(delta), gamma, scratch)
	if err != nil {
		return 0, err
	}
	return T(math.Max(0, theta)), nil
}

// ProjectSort projects (delta, gamma) onto C in place: on return gamma holds
// τ* and the returned value is ε* (= ō). Sort-based, O(n log n). On error
// gamma is left unchanged.
func ProjectSort[T Float](delta T, gamma, scratch []T) (T, error) {
	eps, err := ThresholdSort(delta, gamma, scratch)
	if err != nil {
		return 0, err
	}
	Clamp(eps, gamma)
	return eps, nil
}

// ProjectPivot projects (delta, gamma) onto C in place like ProjectSort, in
// O(n) expected time. On error gamma is left unchanged.
func ProjectPivot[T Float](delta T, gamma, scratch []T) (T, error) {
	eps, err := ThresholdPivot(delta, gamma, scratch)
	if err != nil {
		return 0, err
	}
	Clamp(eps, gamma)
	return eps, nil
}

// Project is the allocating convenience form: it returns ε* and a new slice
// τ* without touching gamma (pivoting algorithm).
func Project[T Float](delta T, gamma []T) (eps T, tau []T, err error) {
	tau = slices.Clone(gamma)
	eps, err = ProjectPivot(delta, tau, nil)
	if err != nil {
		return 0, nil, err
	}
	return eps, tau, nil
}

// Clamp applies the relu form of Π_C for a known threshold ō (docs/method.md §8):
// tau[i] = min(o, tau[i]) = −max(−o, −tau[i]), in place. Only elements above
// o are written, so the pass is read-mostly.
func Clamp[T Float](o T, tau []T) {
	i := 0
	for ; i+4 <= len(tau); i += 4 {
		// Blocks with nothing above o (the common case) cost 4 compares.
		if tau[i] <= o && tau[i+1] <= o && tau[i+2] <= o && tau[i+3] <= o {
			continue
		}
		for j := i; j < i+4; j++ {
			if tau[j] > o {
				tau[j] = o
			}
		}
	}
	for ; i < len(tau); i++ {
		if tau[i] > o {
			tau[i] = o
		}
	}
}

// ClampTo writes min(o, tau[i]) into dst[i] (len(dst) must be ≥ len(tau)).
func ClampTo[T Float](dst []T, o T, tau []T) {
	dst = dst[:len(tau)]
	for i, x := range tau {
		dst[i] = min(o, x)
	}
}

// thetaSort returns the root θ* of θ − δ = w·Σ max(γ_i − θ, 0) (w = 1 for the
// projection; w = n/m for the sampled estimate of sketch_test.go).
func thetaSort[T Float](delta float64, gamma, scratch []T, w float64) (float64, error) {
	if !isFinite(delta) {
		return 0, nonFinite("delta", -1, delta)
	}
	s := scratchFor(scratch, len(gamma))
	for i, x := range gamma {
		if !isFinite(float64(x)) {
			return 0, nonFinite("gamma", i, float64(x))
		}
		s[i] = x
	}
	slices.Sort(s) // ascending; no NaN, so the order is total
	theta, big := topKAverage(delta, s, w)
	if big {
		scale := rescale(delta, gamma)
		sc := make([]float64, len(s))
		for i, x := range s {
			sc[i] = float64(x) * scale
		}
		theta, _ = topKAverage(delta*scale, sc, w)
		theta /= scale
	}
	return theta, nil
}

// topKAverage scans the ascending slice s from its top, growing the active
// set while the next value exceeds the current (weighted) average. It
// reports big when a summed magnitude could overflow.
func topKAverage[T Float](delta float64, s []T, w float64) (theta float64, big bool) {
	big = math.Abs(delta) > bigMag
	sum, k := delta, 0.0
	theta = delta
	for j := len(s) - 1; j >= 0; j-- {
		g := float64(s[j])
		if g <= theta {
			break
		}
		if g > bigMag || g < -bigMag {
			big = true
		}
		sum += w * g
		k++
		theta = sum / (1 + w*k)
	}
	return theta, big
}

// rescale returns an exact power of two that brings the largest magnitude of
// δ and γ to at most 1. Tiny elements may lose precision (underflow), which
// is below the rounding error of the large ones.
func rescale[T Float](delta float64, gamma []T) float64 {
	m := math.Abs(delta)
	for _, x := range gamma {
		m = math.Max(m, math.Abs(float64(x)))
	}
	_, e := math.Frexp(m)
	return math.Ldexp(1, -e)
}

// thetaPivot returns θ* by filtering then pivoting.
func thetaPivot[T Float](delta float64, gamma, scratch []T) (float64, error) {
	if !isFinite(delta) {
		return 0, nonFinite("delta", -1, delta)
	}
	buf := scratchFor(scratch, len(gamma))
	theta, big, bad := pivotCore(delta, gamma, buf)
	if bad >= 0 {
		return 0, nonFinite("gamma", bad, float64(gamma[bad]))
	}
	if big || math.Abs(delta) > bigMag {
		for i, x := range gamma {
			if !isFinite(float64(x)) {
				return 0, nonFinite("gamma", i, float64(x))
			}
		}
		scale := rescale(delta, gamma)
		sc := make([]float64, len(gamma))
		for i, x := range gamma {
			sc[i] = float64(x) * scale
		}
		theta, _, _ = pivotCore(delta*scale, sc, make([]float64, len(gamma)))
		theta /= scale
	}
	return theta, nil
}

// pivotCore is the O(n) expected-time search for θ*. bad is the index of a
// non-finite element found (−1 if none); big reports a candidate too large
// to sum safely (the caller then rescales and calls again).
func pivotCore[T Float](delta float64, gamma, buf []T) (theta float64, big bool, bad int) {
	// Pass 1 (filter). rho is the average of δ and the candidates kept so
	// far: a lower bound of θ* that only grows. An element ≤ rho when seen is
	// ≤ θ*, hence inactive (max(γ_i−θ*, 0) = 0), and needs no storing.
	rho, sum, k, m := delta, delta, 0.0, 0
	lowest := -math.MaxFloat64
	for i := 0; i < len(gamma); {
		end := i + 4
		if end <= len(gamma) {
			// Fast path: a block of 4 that is finite and ≤ rho needs no work
			// (NaN fails "≤ rho", −Inf fails "≥ lowest").
			x0, x1, x2, x3 := float64(gamma[i]), float64(gamma[i+1]), float64(gamma[i+2]), float64(gamma[i+3])
			if x0 <= rho && x1 <= rho && x2 <= rho && x3 <= rho &&
				x0 >= lowest && x1 >= lowest && x2 >= lowest && x3 >= lowest {
				i = end
				continue
			}
		} else {
			end = len(gamma)
		}
		for ; i < end; i++ {
			x := gamma[i]
			xf := float64(x)
			if xf > rho {
				if !(xf <= bigMag) { // also catches +Inf
					if !isFinite(xf) {
						return 0, false, i
					}
					big = true
				}
				buf[m] = x
				m++
				sum += xf
				k++
				rho = sum / (k + 1)
			} else if !isFinite(xf) { // NaN, −Inf
				return 0, false, i
			}
		}
	}
	if big {
		return 0, true, -1
	}

	// Pass 2 (pivoting) on the m candidates. Invariants: F (sum sF incl. δ,
	// count kF) holds elements known active, all ≥ every element of U;
	// every element outside F ∪ U is ≤ lb ≤ θ*; so for p ≥ lb,
	// h(p) = (kF + |{u ∈ U: u ≥ p}| + 1)·p − sF − Σ{u ∈ U: u ≥ p}.
	u := buf[:0]
	for _, x := range buf[:m] {
		if float64(x) > rho { // candidates overtaken by the final bound are inactive
			u = append(u, x)
		}
	}
	sF, kF := delta, 0.0
	rng := uint64(len(u))*0x9E3779B97F4A7C15 + 1
	for len(u) > 0 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		p := u[rng%uint64(len(u))]
		pf := float64(p)
		// Partition u into [≥ p | < p].
		g, sG := 0, 0.0
		for j, x := range u {
			if x >= p {
				u[g], u[j] = x, u[g]
				sG += float64(x)
				g++
			}
		}
		if (kF+float64(g)+1)*pf-(sF+sG) >= 0 {
			// h(p) ≥ 0 ⇒ θ* ≤ p: everything ≥ p is active.
			sF += sG
			kF += float64(g)
			u = u[g:]
		} else {
			// θ* > p: everything ≤ p is inactive; keep only u > p.
			gt := u[:0]
			for _, x := range u[:g] {
				if x > p {
					gt = append(gt, x)
				}
			}
			u = gt
		}
	}
	return sF / (kF + 1), false, -1
}
