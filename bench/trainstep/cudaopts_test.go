package main

import (
	"maps"
	"testing"

	"github.com/segtune/segtune/runtime"
)

// TestSessionCUDAOptions: the options the step's session gets: none added
// without --precision, use_tf32 by precision, cuDNN's heuristic search
// under fp16 and bf16, and --cuda-opt over all of them.
func TestSessionCUDAOptions(t *testing.T) {
	heuristic := runtime.CUDAConvSearch
	for _, c := range []struct {
		precision string
		opts      map[string]string
		want      map[string]string
	}{
		{"", nil, nil},
		{"", map[string]string{"prefer_nhwc": "1"}, map[string]string{"prefer_nhwc": "1"}},
		{"tf32", nil, map[string]string{"use_tf32": "1"}},
		{"fp32", nil, map[string]string{"use_tf32": "0"}},
		{"fp16", nil, map[string]string{"use_tf32": "0", heuristic: "HEURISTIC"}},
		{"bf16", map[string]string{"prefer_nhwc": "1"}, map[string]string{"use_tf32": "0", "prefer_nhwc": "1", heuristic: "HEURISTIC"}},
		{"fp16", map[string]string{heuristic: "EXHAUSTIVE", "use_tf32": "1"}, map[string]string{"use_tf32": "1", heuristic: "EXHAUSTIVE"}},
	} {
		if got := SessionCUDAOptions(c.precision, c.opts); !maps.Equal(got, c.want) {
			t.Errorf("--precision %q --cuda-opt %v: %v, want %v", c.precision, c.opts, got, c.want)
		}
	}
}
