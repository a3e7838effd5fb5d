package stats

import (
	"math"
	"testing"
)

func TestTInterval(t *testing.T) {
	// 5 pairs, differences 1..5: mean 3, sd √2.5, t(0.975, 4) = 2.776.
	p := TInterval([]float64{1, 2, 3, 4, 5})
	h := 2.7764451051977987 * math.Sqrt(2.5) / math.Sqrt(5)
	if math.Abs(p.Mean-3) > 1e-12 || math.Abs(p.Lo-(3-h)) > 1e-9 || math.Abs(p.Hi-(3+h)) > 1e-9 {
		t.Fatalf("interval %+v, want 3 ± %v", p, h)
	}
	if p.Verdict() != "gain" {
		t.Errorf("verdict %q for an interval above 0", p.Verdict())
	}
	if v := TInterval([]float64{-1, 1, 0.5}).Verdict(); v != "no detectable difference" {
		t.Errorf("verdict %q for an interval across 0", v)
	}
	if v := TInterval([]float64{-1, -1.2, -0.9}).Verdict(); v != "loss" {
		t.Errorf("verdict %q for an interval below 0", v)
	}
	if v := TInterval([]float64{2}).Verdict(); v != "too few pairs" {
		t.Errorf("verdict %q for one pair", v)
	}
	// Two seeds: t(0.975, 1) = 12.706.
	p = TInterval([]float64{0.01, 0.03})
	if h := 12.706204736174698 * math.Sqrt(0.0002) / math.Sqrt(2); math.Abs(p.Hi-p.Mean-h) > 1e-9 {
		t.Fatalf("two-seed half-width %v, want %v", p.Hi-p.Mean, h)
	}
	if s := MeanSD([]float64{1, 3}); s != "2.000 ± 1.414" {
		t.Errorf("MeanSD %q", s)
	}
}

func TestMeanSD(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want string
	}{
		{nil, "—"},
		{[]float64{0.5}, "0.500"},
		{[]float64{0.5, 0.7, 0.9}, "0.700 ± 0.200"}, // sample std
	} {
		if got := MeanSD(c.in); got != c.want {
			t.Errorf("MeanSD(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
