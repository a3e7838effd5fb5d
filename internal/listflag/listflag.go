// Package listflag reads comma-separated lists as flags give them
// (segtune's --keep-float, --mean, --size-classes, the experiment
// commands' lists).
package listflag

import (
	"fmt"
	"strconv"
	"strings"
)

// Split returns the comma-separated fields of s, trimmed, empty ones
// dropped: "1, 3,,10" is [1 3 10], "" is none.
func Split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Floats returns the comma-separated numbers of s: "0.5, 1e-3" is
// [0.5 0.001], a blank s none. A field that is not a number, an empty one
// included, is an error naming it.
func Floats(s string) ([]float64, error) {
	return parse(s, "a number", func(f string) (float64, error) { return strconv.ParseFloat(f, 64) })
}

// Ints is Floats for integers.
func Ints(s string) ([]int, error) {
	return parse(s, "an integer", strconv.Atoi)
}

func parse[T any](s, what string, conv func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []T
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := conv(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not %s", f, what)
		}
		out = append(out, v)
	}
	return out, nil
}
