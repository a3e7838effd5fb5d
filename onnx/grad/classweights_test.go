package grad

import (
	"slices"
	"strings"
	"testing"
)

func TestParseClassWeights(t *testing.T) {
	got, err := ParseClassWeights(" 1, 4.5,0")
	if err != nil || !slices.Equal(got, []float64{1, 4.5, 0}) {
		t.Errorf("got %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"1,x":   `"x" is not a number`,
		"1,-2":  "not negative",
		"NaN,1": "finite",
		"0,0":   "every weight",
		"":      "no weights",
	} {
		if _, err := ParseClassWeights(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}
