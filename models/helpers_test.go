package models_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

// session opens an ONNX Runtime session on m.
func session(t testing.TB, m *onnx.Model) *runtime.Session {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// randomFloats returns n values uniform in [-1, 1).
func randomFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 2*r.Float32() - 1
	}
	return v
}

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// stats returns the mean and standard deviation of v, failing on a
// non-finite value.
func stats(t testing.TB, name string, v []float32) (mean, std float64) {
	t.Helper()
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s[%d] = %v", name, i, x)
		}
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}
