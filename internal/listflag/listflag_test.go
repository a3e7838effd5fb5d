package listflag

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	if got := Split(" 1, 3,,10 ,"); !slices.Equal(got, []string{"1", "3", "10"}) {
		t.Errorf("Split: %q", got)
	}
	if got := Split(" "); len(got) != 0 {
		t.Errorf("Split of blank: %q", got)
	}
}

func TestNumbers(t *testing.T) {
	if got, err := Floats(" 0.485,0.456 , 1e-3"); err != nil || !slices.Equal(got, []float64{0.485, 0.456, 0.001}) {
		t.Errorf("Floats: %v, %v", got, err)
	}
	if got, err := Ints("1, 11"); err != nil || !slices.Equal(got, []int{1, 11}) {
		t.Errorf("Ints: %v, %v", got, err)
	}
	if got, err := Floats("  "); got != nil || err != nil {
		t.Errorf("Floats of blank: %v, %v; want none", got, err)
	}
	for in, want := range map[string]string{"1,x": `"x" is not a number`, "1,,2": `"" is not a number`, "0.5 ,": `"" is not a number`} {
		if _, err := Floats(in); err == nil || err.Error() != want {
			t.Errorf("Floats(%q): %v; want %q", in, err, want)
		}
	}
	if _, err := Ints("1,2.5"); err == nil || !strings.Contains(err.Error(), `"2.5" is not an integer`) {
		t.Errorf("Ints(1,2.5): %v", err)
	}
}
