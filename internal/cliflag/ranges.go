package cliflag

import (
	"fmt"
	"math"
	"strconv"

	"github.com/segtune/segtune/internal/listflag"
	"github.com/urfave/cli/v2"
)

// Range is the valid range of a numeric flag: [Min, Max], with MinOpen
// excluding Min itself; Zero also allows 0 (meaning "default"). No flag
// takes NaN or an infinity.
type Range struct {
	Min, Max float64
	MinOpen  bool
	Zero     bool
	// List marks a string flag holding comma-separated numbers.
	List bool
	// Why is appended to the error (e.g. "0: one per core").
	Why string
}

// CheckRanges checks every numeric flag of c's command that ranges gives a
// Range for (by flag name), defaults included: a NaN, an infinity or a
// value out of range is an error naming the flag.
func CheckRanges(c *cli.Context, ranges func(name string) (Range, bool)) error {
	if c.Command == nil {
		return nil
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		r, ok := ranges(name)
		if !ok {
			continue
		}
		vals, isInt, err := numbers(c.Value(name), r.List)
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		for _, v := range vals {
			if err := r.Check(name, v, isInt); err != nil {
				return err
			}
		}
	}
	return nil
}

// numbers are the numeric values of a flag's value, and whether its type
// is an integer: none for a type that holds none (or a string, unless
// list).
func numbers(value any, list bool) ([]float64, bool, error) {
	switch v := value.(type) {
	case int:
		return []float64{float64(v)}, true, nil
	case int64:
		return []float64{float64(v)}, true, nil
	case float64:
		return []float64{v}, false, nil
	case string:
		if !list {
			return nil, false, nil
		}
		vals, err := listflag.Floats(v)
		return vals, false, err
	}
	return nil, false, nil
}

// Check returns an error naming flag name when v is outside r; isInt
// writes the numbers as integers.
func (r Range) Check(name string, v float64, isInt bool) error {
	if math.IsNaN(v) {
		return fmt.Errorf("--%s: NaN is not a valid value", name)
	}
	if v == 0 && r.Zero {
		return nil
	}
	if !math.IsInf(v, 0) && v <= r.Max && (v > r.Min || !r.MinOpen && v == r.Min) {
		return nil
	}
	num := func(x float64) string {
		if isInt {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	var want string
	switch {
	case math.IsInf(r.Min, -1) && math.IsInf(r.Max, 1):
		want = "a finite number"
	case math.IsInf(r.Max, 1) && r.MinOpen:
		want = "greater than " + num(r.Min)
	case math.IsInf(r.Max, 1):
		want = "at least " + num(r.Min)
	case r.MinOpen:
		want = fmt.Sprintf("in (%s, %s]", num(r.Min), num(r.Max))
	default:
		want = fmt.Sprintf("from %s to %s", num(r.Min), num(r.Max))
	}
	if r.Zero {
		want += ", or 0"
	}
	if r.Why != "" {
		want += " (" + r.Why + ")"
	}
	return fmt.Errorf("--%s %s: must be %s", name, num(v), want)
}
