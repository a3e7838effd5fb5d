package demo

import (
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/stats"
)

// The verdict claims a difference only when the interval excludes zero.
func TestDemoVerdict(t *testing.T) {
	for _, tc := range []struct {
		diffs []float64
		want  string
	}{
		{[]float64{0.02, 0.03, 0.025, 0.04}, "segments these images better"},
		{[]float64{-0.02, -0.03, -0.025, -0.04}, "segments these images worse"},
		{[]float64{0.05, -0.04, 0.01, -0.02}, "changed nothing detectable"},
		{[]float64{0.05}, "too few validation images"},
	} {
		got := Verdict(stats.TInterval(tc.diffs))
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "one training seed") {
			t.Errorf("%v: %q, want it to say %q", tc.diffs, got, tc.want)
		}
	}
}
