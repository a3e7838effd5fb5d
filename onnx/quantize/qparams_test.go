package quantize

import (
	"math"
	"testing"
)

func TestBounds(t *testing.T) {
	cases := []struct {
		q                 QType
		symmetric, reduce bool
		wantMin, wantMax  int32
	}{
		{Uint8, false, false, 0, 255},
		{Uint8, false, true, 0, 127},
		{Int8, false, false, -128, 127},
		{Int8, true, false, -127, 127},
		{Int8, true, true, -64, 64},
	}
	for _, c := range cases {
		lo, hi := c.q.Bounds(c.symmetric, c.reduce)
		if lo != c.wantMin || hi != c.wantMax {
			t.Errorf("%v symmetric=%v reduce=%v: [%d, %d], want [%d, %d]", c.q, c.symmetric, c.reduce, lo, hi, c.wantMin, c.wantMax)
		}
	}
}

// Scales and zero points worked out by hand from onnxruntime's formulas.
func TestComputeParams(t *testing.T) {
	cases := []struct {
		name       string
		lo, hi     float32
		qmin, qmax int32
		symmetric  bool
		scale      float64
		zp         int32
	}{
		// (3 − (−1)) / 255; zero point round(0 − (−1)/scale) = round(63.75).
		{"uint8 asymmetric", -1, 3, 0, 255, false, 4.0 / 255, 64},
		// A range above 0 is widened to contain it: [0, 5].
		{"range widened to 0", 2, 5, 0, 255, false, 5.0 / 255, 0},
		// After a Relu: zero point 0, all 256 levels for [0, 6].
		{"relu output", 0, 6, 0, 255, false, 6.0 / 255, 0},
		// Below 0 only: [−2, 0] → zero point at the top.
		{"negative only", -2, -0.5, 0, 255, false, 2.0 / 255, 255},
		// int8 activations: zero point round(−128 + 1/scale·1).
		{"int8 asymmetric", -1, 3, -128, 127, false, 4.0 / 255, -64},
		// Symmetric weights: max |w| = 2 over 127 levels each side.
		{"int8 symmetric", -0.5, 2, -127, 127, true, 4.0 / 254, 0},
		// Symmetric uint8 puts the zero point in the middle.
		{"uint8 symmetric", -1, 1, 0, 255, true, 2.0 / 255, 128},
	}
	for _, c := range cases {
		p, err := ComputeParams(c.lo, c.hi, c.qmin, c.qmax, c.symmetric)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Scale != float32(c.scale) || p.ZeroPoint != c.zp {
			t.Errorf("%s: scale %v zero point %d, want %v and %d", c.name, p.Scale, p.ZeroPoint, float32(c.scale), c.zp)
		}
		// The range's ends and 0 are representable within half a step.
		for _, x := range []float32{max(c.lo, float32(min(0, c.lo))), 0} {
			q := QuantizeValue(x, p, c.qmin, c.qmax)
			if d := math.Abs(float64(Dequantize(q, p) - x)); d > float64(p.Scale)/2+1e-7 {
				t.Errorf("%s: %v comes back as %v", c.name, x, Dequantize(q, p))
			}
		}
		if q := QuantizeValue(0, p, c.qmin, c.qmax); Dequantize(q, p) != 0 {
			t.Errorf("%s: 0 is not exact: %v", c.name, Dequantize(q, p))
		}
	}
}

func TestComputeParamsDegenerate(t *testing.T) {
	p, err := ComputeParams(0, 0, 0, 255, false)
	if err != nil || p.Scale != 1 || p.ZeroPoint != 0 {
		t.Errorf("zero range: %+v, %v; want scale 1 zero point 0", p, err)
	}
	for _, r := range [][2]float32{{float32(math.NaN()), 1}, {0, float32(math.Inf(1))}, {2, 1}} {
		if _, err := ComputeParams(r[0], r[1], 0, 255, false); err == nil {
			t.Errorf("range %v accepted", r)
		}
	}
	if _, err := ComputeParams(0, 1, 5, 5, false); err == nil {
		t.Error("empty integer range accepted")
	}
}

func TestQuantizeValueRoundsHalfToEvenAndSaturates(t *testing.T) {
	p := Params{Scale: 1, ZeroPoint: 0}
	for x, want := range map[float32]int32{2.5: 2, 3.5: 4, -2.5: -2, -0.5: 0, 0.5: 0, 1.5: 2, 300: 127, -300: -128} {
		if got := QuantizeValue(x, p, -128, 127); got != want {
			t.Errorf("QuantizeValue(%v) = %d, want %d", x, got, want)
		}
	}
	p = Params{Scale: 0.5, ZeroPoint: 10}
	if got := QuantizeValue(-4, p, 0, 255); got != 2 { // −4/0.5 + 10
		t.Errorf("with zero point 10: %d, want 2", got)
	}
	if got := QuantizeValue(-100, p, 0, 255); got != 0 {
		t.Errorf("below the range: %d, want 0", got)
	}
}

func TestParseNames(t *testing.T) {
	if q, err := ParseQType("int8"); err != nil || q != Int8 {
		t.Errorf("int8: %v %v", q, err)
	}
	if _, err := ParseQType("int4"); err == nil {
		t.Error("int4 accepted")
	}
	if m, err := ParseMethod("Entropy"); err != nil || m != Entropy {
		t.Errorf("Entropy: %v %v", m, err)
	}
	if _, err := ParseMethod("kl"); err == nil {
		t.Error("kl accepted")
	}
}
