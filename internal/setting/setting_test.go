package setting

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

func TestRangeCheck(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		r     Range
		v     float64
		isInt bool
		want  string // "" for valid
	}{
		{Range{Min: 1, Max: 64, Zero: true, Why: "0 picks one per core"}, 0, true, ""},
		{Range{Min: 1, Max: 64, Zero: true, Why: "0 picks one per core"}, 65, true, "f 65: must be from 1 to 64, or 0 (0 picks one per core)"},
		{Range{Min: 0, MinOpen: true, Max: 10}, 0, false, "f 0: must be in (0, 10]"},
		{Range{Min: 0, MinOpen: true, Max: 10}, 10, false, ""},
		{Range{Min: 0, Max: inf}, inf, false, "f +Inf: must be at least 0"},
		{Range{Min: 0, MinOpen: true, Max: inf}, -1, false, "f -1: must be greater than 0"},
		{Range{Min: -inf, Max: inf}, math.NaN(), false, "f: NaN is not a valid value"},
		{Range{Min: -inf, Max: inf}, -inf, false, "f -Inf: must be a finite number"},
	} {
		err := tc.r.Check("f", tc.v, tc.isInt)
		var se *Error
		if err != nil && (!errors.As(err, &se) || se.Setting != "f") {
			t.Errorf("%+v.Check(%v) = %v, no *Error of f", tc.r, tc.v, err)
		}
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("%+v.Check(%v) = %q, want %q", tc.r, tc.v, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%+v.Check(%v) passed, want %q", tc.r, tc.v, tc.want)
		}
	}
}

// Rename names the settings of an *Error its caller's way, keeps the
// words of the errors wrapping it, and keeps it reachable.
func TestRename(t *testing.T) {
	flag := func(key string) string { return "--" + key }
	inner := &Error{Setting: "lr", Value: "0", Err: errors.New("must be positive")}
	needs := &Error{Setting: "overlap", Needs: "tile"}
	for _, c := range []struct {
		err        error
		lib, named string
	}{
		{inner, "lr 0: must be positive", "--lr 0: must be positive"},
		{fmt.Errorf("finetune: %w", inner), "finetune: lr 0: must be positive", "finetune: --lr 0: must be positive"},
		{fmt.Errorf("run: %w (see the log)", fmt.Errorf("finetune: %w", inner)),
			"run: finetune: lr 0: must be positive (see the log)", "run: finetune: --lr 0: must be positive (see the log)"},
		{needs, "overlap: needs tile", "--overlap: needs --tile"},
	} {
		if got := c.err.Error(); got != c.lib {
			t.Errorf("library message %q, want %q", got, c.lib)
		}
		got := Rename(c.err, flag)
		if got.Error() != c.named {
			t.Errorf("renamed %q, want %q", got, c.named)
		}
		var se *Error
		if !errors.As(got, &se) || !errors.Is(got, c.err) {
			t.Errorf("%q: the setting's error is not reachable", got)
		}
		again := fmt.Errorf("segtune: %w", got)
		if twice := Rename(again, flag); twice.Error() != "segtune: "+c.named {
			t.Errorf("renamed twice %q, want the names of the first", twice)
		}
	}
	plain := errors.New("no such file")
	if got := Rename(plain, flag); got != plain {
		t.Errorf("an error naming no setting came back as %v", got)
	}
}
