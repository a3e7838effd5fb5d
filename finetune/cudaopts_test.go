package finetune

import (
	"maps"
	"testing"

	"github.com/segtune/segtune/runtime"
)

// TestCUDAOptionsByPrecision: the options a training session gets on a
// GPU: TF32 but under fp32, cuDNN's heuristic search under fp16 and bf16
// (its exhaustive search re-ran every step there), and CUDAOptions over
// both.
func TestCUDAOptionsByPrecision(t *testing.T) {
	for _, c := range []struct {
		precision string
		own       map[string]string
		want      map[string]string
	}{
		{"fp32", nil, map[string]string{"use_tf32": "0"}},
		{"tf32", nil, map[string]string{"use_tf32": "1"}},
		{"fp16", nil, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "HEURISTIC"}},
		{"BF16", nil, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "HEURISTIC"}},
		{"fp16", map[string]string{runtime.CUDAConvSearch: "EXHAUSTIVE"}, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "EXHAUSTIVE"}},
		{"fp32", map[string]string{"use_tf32": "1", "prefer_nhwc": "1"}, map[string]string{"use_tf32": "1", "prefer_nhwc": "1"}},
	} {
		own := maps.Clone(c.own)
		if got := cudaOptions(Config{Precision: c.precision, CUDAOptions: c.own}); !maps.Equal(got, c.want) {
			t.Errorf("precision %s, CUDAOptions %v: %v, want %v", c.precision, c.own, got, c.want)
		}
		if !maps.Equal(own, c.own) {
			t.Errorf("precision %s: CUDAOptions changed to %v", c.precision, c.own)
		}
	}
}
