package setting

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Range is the valid values of a numeric setting: [Min, Max], with
// MinOpen excluding Min itself; Zero also allows 0 (meaning "default").
// No setting takes NaN or an infinity.
type Range struct {
	Min, Max float64
	MinOpen  bool
	Zero     bool
	// List marks a setting holding a list of numbers, each in the range.
	List bool
	// Why is appended to the error (e.g. "0: one per core").
	Why string
}

// Check returns an *Error of setting key when v is outside r; isInt writes
// the numbers as integers.
func (r Range) Check(key string, v float64, isInt bool) error {
	if math.IsNaN(v) {
		return &Error{Setting: key, Err: errors.New("NaN is not a valid value")}
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
	return &Error{Setting: key, Value: num(v), Err: errors.New("must be " + want)}
}

// Number is a setting's numeric value, for CheckAll: its key, its value
// and whether it is an integer (said as one).
type Number struct {
	Key string
	V   float64
	Int bool
}

// CheckAll checks each of nums against its key's range in ranges (keys
// without one are not checked): the first refused, in nums' order.
func CheckAll(ranges map[string]Range, nums []Number) error {
	for _, n := range nums {
		if r, ok := ranges[n.Key]; ok {
			if err := r.Check(n.Key, n.V, n.Int); err != nil {
				return err
			}
		}
	}
	return nil
}
