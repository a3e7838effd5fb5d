package schedule

import (
	"math"
	"testing"
)

func approx(t *testing.T, s Schedule, step int64, want float64) {
	t.Helper()
	if got := s.At(step); math.Abs(got-want) > 1e-12*math.Max(1, want) {
		t.Errorf("%v.At(%d) = %.15g, want %.15g", s, step, got, want)
	}
}

func TestConstant(t *testing.T) {
	s := Schedule{Kind: Constant, Base: 0.01}
	for _, step := range []int64{-5, 0, 1, 1000} {
		approx(t, s, step, 0.01)
	}
}

func TestPolyMatchesDeepLab(t *testing.T) {
	s := Schedule{Kind: Poly, Base: 0.01, Power: 0.9, Total: 1000}
	approx(t, s, 0, 0.01)
	approx(t, s, 500, 0.01*math.Pow(0.5, 0.9))
	approx(t, s, 999, 0.01*math.Pow(0.001, 0.9))
	approx(t, s, 1000, 0)
	approx(t, s, 5000, 0)
	s.Min = 1e-4
	approx(t, s, 500, 1e-4+(0.01-1e-4)*math.Pow(0.5, 0.9))
	approx(t, s, 1000, 1e-4)
}

func TestCosine(t *testing.T) {
	s := Schedule{Kind: Cosine, Base: 0.1, Min: 0.001, Total: 100}
	approx(t, s, 0, 0.1)
	approx(t, s, 50, (0.1+0.001)/2)
	approx(t, s, 25, 0.001+0.099*(1+math.Sqrt2/2)/2)
	approx(t, s, 100, 0.001)
	approx(t, s, 101, 0.001)
}

func TestWarmup(t *testing.T) {
	s := Schedule{Kind: Poly, Base: 0.01, Power: 1, Total: 110, Warmup: 10}
	approx(t, s, 0, 0.001)
	approx(t, s, 4, 0.005)
	approx(t, s, 9, 0.01)
	approx(t, s, 10, 0.01)  // decay starts from Base
	approx(t, s, 60, 0.005) // halfway through the 100 decay steps
	approx(t, s, 110, 0)
	c := Schedule{Kind: Constant, Base: 1, Warmup: 4}
	approx(t, c, 1, 0.5)
	approx(t, c, 3, 1)
	approx(t, c, 400, 1)
}

// The rate never rises after warm-up and stays within [Min, Base].
func TestMonotoneAndBounded(t *testing.T) {
	for _, s := range []Schedule{
		{Kind: Poly, Base: 0.02, Power: 0.9, Total: 300, Warmup: 30, Min: 1e-5},
		{Kind: Cosine, Base: 0.02, Total: 300, Warmup: 30},
	} {
		prev := math.Inf(1)
		for step := s.Warmup; step <= s.Total+5; step++ {
			lr := s.At(step)
			if lr > prev || lr < s.Min || lr > s.Base {
				t.Fatalf("%v: At(%d) = %v after %v", s, step, lr, prev)
			}
			prev = lr
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		spec string
		want Schedule
	}{
		{"", Schedule{Kind: Constant, Power: 0.9}},
		{"constant", Schedule{Kind: Constant, Power: 0.9}},
		{"warmup=100", Schedule{Kind: Constant, Power: 0.9, Warmup: 100}},
		{"poly", Schedule{Kind: Poly, Power: 0.9}},
		{"poly:0.5", Schedule{Kind: Poly, Power: 0.5}},
		{"poly:0.9,warmup=100", Schedule{Kind: Poly, Power: 0.9, Warmup: 100}},
		{"poly power=2 min=1e-5", Schedule{Kind: Poly, Power: 2, Min: 1e-5}},
		{"cosine", Schedule{Kind: Cosine, Power: 0.9}},
		{"Cosine:1e-6; warmup=50", Schedule{Kind: Cosine, Power: 0.9, Min: 1e-6, Warmup: 50}},
	}
	for _, c := range cases {
		got, err := Parse(c.spec, 0.01, 1000)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		c.want.Base, c.want.Total = 0.01, 1000
		if got != c.want {
			t.Errorf("Parse(%q) = %+v, want %+v", c.spec, got, c.want)
		}
		// String gives back a spec that parses to the same schedule.
		again, err := Parse(got.String(), 0.01, 1000)
		if err != nil || again != got {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{
		"step", "poly:x", "constant:2", "warmup=-1", "warmup=1.5", "warmup=1000",
		"poly:0", "poly cosine", "cosine:0.1", "min=abc", "gamma=0.1", "poly:NaN",
	} {
		if s, err := Parse(spec, 0.01, 1000); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", spec, s)
		}
	}
	if _, err := Parse("poly", 0.01, 0); err == nil {
		t.Error("poly without a total number of steps accepted")
	}
	if _, err := Parse("constant", math.Inf(1), 0); err == nil {
		t.Error("infinite base accepted")
	}
	if _, err := Parse("constant", 0.01, 0); err != nil {
		t.Errorf("constant needs no total: %v", err)
	}
}
