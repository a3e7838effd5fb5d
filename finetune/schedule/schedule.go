// Package schedule computes learning rates as a function of the step:
// constant, polynomial decay (DeepLab's "poly") and cosine annealing, each
// with an optional linear warm-up.
//
// Steps count from 0: At(0) is the learning rate of the first update. With
// W warm-up steps, At(s) = Base·(s+1)/W for s < W, so the first update is
// not wasted at rate 0 and step W-1 reaches Base. The decay then runs over
// the remaining Total−W steps, from Base at step W to Min at step Total:
//
//	constant: Base
//	poly:     Min + (Base−Min)·(1−p)^Power
//	cosine:   Min + (Base−Min)·(1+cos(π·p))/2
//
// with p = (s−W)/(Total−W) clamped to [0, 1]. With W = 0 and Min = 0, poly
// is exactly DeepLab's Base·(1−s/Total)^Power.
package schedule

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the shape of the decay after warm-up.
type Kind string

// The supported schedule shapes.
const (
	Constant Kind = "constant"
	Poly     Kind = "poly"
	Cosine   Kind = "cosine"
)

// DefaultPower is the poly exponent DeepLab uses.
const DefaultPower = 0.9

// Schedule is a learning-rate schedule. The zero value is invalid; build
// one with a literal or Parse, and check it with Validate.
type Schedule struct {
	Kind   Kind
	Base   float64 // peak learning rate, reached at the end of warm-up
	Min    float64 // final learning rate of poly and cosine (default 0)
	Power  float64 // poly exponent
	Total  int64   // total number of steps; needed by poly and cosine
	Warmup int64   // linear warm-up steps (0 for none)
}

// Validate reports whether s describes a usable schedule.
func (s Schedule) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch s.Kind {
	case Constant, Poly, Cosine:
	default:
		return fmt.Errorf("schedule: unknown kind %q (want constant, poly or cosine)", s.Kind)
	}
	if !finite(s.Base) || s.Base < 0 {
		return fmt.Errorf("schedule: base learning rate %v must be a non-negative number", s.Base)
	}
	if s.Warmup < 0 {
		return fmt.Errorf("schedule: warm-up %d is negative", s.Warmup)
	}
	if s.Total > 0 && s.Warmup >= s.Total {
		return fmt.Errorf("schedule: warm-up %d must be shorter than the %d total steps", s.Warmup, s.Total)
	}
	if s.Kind == Constant {
		return nil // Total is optional: the rate never decays
	}
	if !finite(s.Min) || s.Min < 0 || s.Min > s.Base {
		return fmt.Errorf("schedule: min learning rate %v must be in [0, base %v]", s.Min, s.Base)
	}
	if s.Kind == Poly && (!finite(s.Power) || s.Power <= 0) {
		return fmt.Errorf("schedule: poly power %v must be positive", s.Power)
	}
	if s.Total <= 0 {
		return fmt.Errorf("schedule: %s needs the total number of steps (got %d)", s.Kind, s.Total)
	}
	return nil
}

// At returns the learning rate for step (0-based). Steps past Total give
// Min; negative steps are treated as 0.
func (s Schedule) At(step int64) float64 {
	step = max(step, 0)
	if step < s.Warmup {
		return s.Base * float64(step+1) / float64(s.Warmup)
	}
	if s.Kind == Constant {
		return s.Base
	}
	p := 1.0
	if span := s.Total - s.Warmup; span > 0 {
		p = math.Min(float64(step-s.Warmup)/float64(span), 1)
	}
	var f float64
	switch s.Kind {
	case Poly:
		f = math.Pow(1-p, s.Power)
	case Cosine:
		f = (1 + math.Cos(math.Pi*p)) / 2
	}
	return s.Min + (s.Base-s.Min)*f
}

// String formats s in the syntax Parse reads (without base and total).
func (s Schedule) String() string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	if s.Kind == Poly {
		b.WriteString(":" + strconv.FormatFloat(s.Power, 'g', -1, 64))
	}
	if s.Kind != Constant && s.Min != 0 {
		b.WriteString(",min=" + strconv.FormatFloat(s.Min, 'g', -1, 64))
	}
	if s.Warmup != 0 {
		b.WriteString(",warmup=" + strconv.FormatInt(s.Warmup, 10))
	}
	return b.String()
}

// Parse reads a schedule from spec and returns it with the given base
// learning rate and total steps, validated. The spec is a comma- or
// space-separated list of a kind and options:
//
//	constant            the base rate throughout
//	poly                poly with power 0.9
//	poly:0.9            poly with the given power
//	cosine              cosine annealing to min (default 0)
//	cosine:1e-6         cosine annealing to the given min rate
//	warmup=100          linear warm-up over 100 steps
//	warmup=10%          linear warm-up over 10% of the run's steps
//	min=1e-5            final rate of poly or cosine
//	power=0.9           poly exponent
//
// A spec with options only (such as "warmup=100") is constant; an empty
// spec is "constant".
func Parse(spec string, base float64, total int64) (Schedule, error) {
	s := Schedule{Kind: Constant, Base: base, Total: total, Power: DefaultPower}
	fields := strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' || r == ';' })
	kindSet := false
	for _, f := range fields {
		key, val, hasVal := strings.Cut(f, "=")
		if !hasVal {
			k, arg, hasArg := strings.Cut(f, ":")
			switch kind := Kind(strings.ToLower(k)); kind {
			case Constant, Poly, Cosine:
				if kindSet {
					return Schedule{}, fmt.Errorf("schedule: %q names two kinds", spec)
				}
				kindSet = true
				s.Kind = kind
				if !hasArg {
					continue
				}
				x, err := strconv.ParseFloat(arg, 64)
				if err != nil || kind == Constant {
					return Schedule{}, fmt.Errorf("schedule: bad argument %q in %q", f, spec)
				}
				if kind == Poly {
					s.Power = x
				} else {
					s.Min = x
				}
			default:
				return Schedule{}, fmt.Errorf("schedule: unknown item %q in %q (want constant, poly[:power], cosine[:min], warmup=N, min=X, power=X)", f, spec)
			}
			continue
		}
		switch strings.ToLower(key) {
		case "warmup":
			if pct, ok := strings.CutSuffix(val, "%"); ok {
				// A share of the run, so that one default suits short
				// and long runs: at least one step, always shorter than
				// the run.
				x, err := strconv.ParseFloat(pct, 64)
				if err != nil || !(x >= 0 && x < 100) {
					return Schedule{}, fmt.Errorf("schedule: bad warm-up %q in %q: want a percentage in [0, 100)", val, spec)
				}
				if total > 1 && x > 0 {
					s.Warmup = min(max(int64(math.Round(x/100*float64(total))), 1), total-1)
				}
				continue
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return Schedule{}, fmt.Errorf("schedule: bad warm-up %q in %q: want a whole number of steps or a percentage of them", val, spec)
			}
			s.Warmup = n
		case "min", "power":
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return Schedule{}, fmt.Errorf("schedule: bad %s %q in %q", key, val, spec)
			}
			if strings.EqualFold(key, "min") {
				s.Min = x
			} else {
				s.Power = x
			}
		default:
			return Schedule{}, fmt.Errorf("schedule: unknown option %q in %q", key, spec)
		}
	}
	if err := s.Validate(); err != nil {
		return Schedule{}, err
	}
	return s, nil
}
