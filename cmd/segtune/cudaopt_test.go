package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune"
)

// TestParseCUDAOptions: --cuda-opt's K=V,K=V, and a bad pair refused
// naming the flag.
func TestParseCUDAOptions(t *testing.T) {
	got, err := finetune.ParseCUDAOptions("cudnn_conv_algo_search=EXHAUSTIVE, use_tf32=0")
	if want := map[string]string{"cudnn_conv_algo_search": "EXHAUSTIVE", "use_tf32": "0"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if got, err := finetune.ParseCUDAOptions(""); got != nil || err != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"use_tf32", "=1", "use_tf32=", "a=1,,b=2"} {
		if _, err := finetune.ParseCUDAOptions(bad); err == nil || !strings.HasPrefix(withFlagNames(err).Error(), "--cuda-opt") {
			t.Errorf("%q: %v, want an error naming --cuda-opt", bad, err)
		}
	}
}
