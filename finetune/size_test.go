package finetune

import (
	"slices"
	"testing"
)

// The size classes default to "everything but background" (docs/method.md §1).
func TestObjectClasses(t *testing.T) {
	if got := (SizeSpec{}).ObjectClasses(4); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("default object classes of 4 = %v, want [1 2 3]", got)
	}
	if got := (SizeSpec{Classes: []int{2}}).ObjectClasses(4); !slices.Equal(got, []int{2}) {
		t.Errorf("object classes [2] became %v", got)
	}
	if got := (SizeSpec{}).ObjectClasses(1); len(got) != 0 {
		t.Errorf("a one-class model has object classes %v", got)
	}
}
