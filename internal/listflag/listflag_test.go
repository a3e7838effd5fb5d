package listflag

import (
	"slices"
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
