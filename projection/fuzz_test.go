package projection

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// FuzzProject decodes (δ, γ) from raw bytes (float64 little endian) and
// checks that the sort, pivot and bisection thresholds agree, that both
// projections satisfy KKT, and that non-finite input is reported, not
// projected.
func FuzzProject(f *testing.F) {
	enc := func(v ...float64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b
	}
	f.Add(enc(0, 3, 1, -2))
	f.Add(enc(-1, 1, 1, 1, 1))
	f.Add(enc(1e30, -1e30, 5e29))
	f.Add(enc(0))
	f.Add(enc(2, math.NaN()))
	f.Add(enc(-5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 8 || len(data) > 8*4096 {
			return
		}
		v := make([]float64, len(data)/8)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		delta, gamma := v[0], v[1:]
		finite := !slices.ContainsFunc(v, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
		tauS, tauP := slices.Clone(gamma), slices.Clone(gamma)
		es, errS := ProjectSort(delta, tauS, nil)
		ep, errP := ProjectPivot(delta, tauP, nil)
		if !finite {
			if !errors.Is(errS, ErrNonFinite) || !errors.Is(errP, ErrNonFinite) {
				t.Fatalf("non-finite input accepted: %v %v", errS, errP)
			}
			return
		}
		if errS != nil || errP != nil {
			t.Fatalf("errors on finite input: %v %v", errS, errP)
		}
		scale := math.Max(maxAbs(delta, gamma), math.SmallestNonzeroFloat64)
		n := float64(len(gamma) + 1)
		// Sums of up to n terms: agreement to n ulps of the largest value
		// (plus an absolute floor for subnormal-range inputs).
		tol := 4 * n * 0x1p-52 * scale
		if math.Abs(es-ep) > tol+1e-300 {
			t.Fatalf("sort %v pivot %v differ", es, ep)
		}
		if scale < 1e290 { // bisection's own sums overflow beyond this
			if eb := math.Max(0, bisectTheta(delta, gamma)); math.Abs(es-eb) > tol+1e-300 {
				t.Fatalf("sort %v bisection %v differ", es, eb)
			}
		}
		if scale < 1e-290 {
			// Subnormal range: precision is absolute, relative KKT residuals
			// of a correctly rounded answer exceed any relative tolerance.
			return
		}
		for _, c := range []struct {
			e   float64
			tau []float64
		}{{es, tauS}, {ep, tauP}} {
			r, err := KKT(delta, gamma, c.e, c.tau)
			if err != nil || !r.OK(DefaultTol[float64](len(gamma))) {
				t.Fatalf("KKT %+v %v", r, err)
			}
		}
	})
}
