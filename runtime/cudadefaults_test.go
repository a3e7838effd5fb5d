package runtime

import (
	"maps"
	"testing"
)

// TestHalfPrecisionCUDAOptions: half precision adds the heuristic search,
// a caller's own search is kept, other precisions get opts unchanged, and
// the caller's map is never written.
func TestHalfPrecisionCUDAOptions(t *testing.T) {
	if got := HalfPrecisionCUDAOptions(nil, true); got[CUDAConvSearch] != "HEURISTIC" || len(got) != 1 {
		t.Errorf("half precision, no options: %v, want only %s=HEURISTIC", got, CUDAConvSearch)
	}
	own := map[string]string{"use_tf32": "1"}
	got := HalfPrecisionCUDAOptions(own, true)
	if want := map[string]string{"use_tf32": "1", CUDAConvSearch: "HEURISTIC"}; !maps.Equal(got, want) {
		t.Errorf("half precision: %v, want %v", got, want)
	}
	if len(own) != 1 {
		t.Errorf("the caller's options were changed: %v", own)
	}
	exhaustive := map[string]string{CUDAConvSearch: "EXHAUSTIVE"}
	if got := HalfPrecisionCUDAOptions(exhaustive, true); got[CUDAConvSearch] != "EXHAUSTIVE" {
		t.Errorf("an explicit search was overridden: %v", got)
	}
	if got := HalfPrecisionCUDAOptions(own, false); !maps.Equal(got, own) {
		t.Errorf("full precision: %v, want the options as given %v", got, own)
	}
	if got := HalfPrecisionCUDAOptions(nil, false); got != nil {
		t.Errorf("full precision, no options: %v, want nil", got)
	}
}
