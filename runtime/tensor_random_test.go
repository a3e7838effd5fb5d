package runtime

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// A random-normal tensor has its shape's number of values, drawn from the
// generator in order (the same seed gives the same tensor), with a
// standard normal's mean and variance.
func TestNewRandomNormal(t *testing.T) {
	x := NewRandomNormal(rand.New(rand.NewPCG(3, 4)), 2, 50, 100)
	if !slices.Equal(x.Shape, []int64{2, 50, 100}) || len(x.Float32) != 10000 || x.Len() != 10000 {
		t.Fatalf("shape %v, %d values", x.Shape, len(x.Float32))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var sum, sq float64
	for i, v := range x.Float32 {
		if want := float32(rng.NormFloat64()); v != want {
			t.Fatalf("value %d = %v, want %v", i, v, want)
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean := sum / 10000
	if variance := sq/10000 - mean*mean; math.Abs(mean) > 0.05 || math.Abs(variance-1) > 0.05 {
		t.Errorf("mean %v, variance %v of 10000 standard-normal draws", mean, variance)
	}
	if e := NewRandomNormal(rand.New(rand.NewPCG(1, 1)), 0, 3); len(e.Float32) != 0 {
		t.Errorf("an empty shape holds %d values", len(e.Float32))
	}
}
