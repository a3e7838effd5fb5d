package inference_test

import (
	"image"
	"os"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/internal/testassets/skip"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestGraphLabelsOnCUDA runs the label graph on the CUDA provider against
// the host's arg-max over the same provider's scores: exactly on tied
// scores (CUDA's ArgMax must take the first index, as the host does) and
// on a one-Conv head; on the generated DeepLabV3+ all but a few near-tie
// pixels (two sessions may pick different cuDNN algorithms). Skipped
// without a GPU; SEGTUNE_REQUIRE_GPU makes that a failure.
func TestGraphLabelsOnCUDA(t *testing.T) {
	runtimetest.Require(t)
	if err := runtime.Init(""); err != nil {
		skip.GPU(t, err.Error())
		return
	}
	if _, err := runtime.CUDADevices(); err != nil {
		skip.GPU(t, err.Error())
		return
	}
	native := imageio.Preprocess{Resize: imageio.ResizeNone}
	opts := runtime.Options{Device: runtime.DeviceCUDA, CUDAOptions: map[string]string{"use_tf32": "0"}}
	openOn := func(t *testing.T, model []byte, labelsOnly bool) *inference.Segmenter {
		m, err := onnx.Parse(model, "")
		if err != nil {
			t.Fatal(err)
		}
		ct, err := contract.Read(m, contract.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		open := inference.Open
		if labelsOnly {
			open = inference.OpenLabels
		}
		s, err := open(model, ct, native, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if s.Session.Device != runtime.DeviceCUDA {
			t.Fatalf("the session runs on %s", s.Session.Device)
		}
		if s.LabelsInGraph() != labelsOnly {
			t.Fatalf("labels in the graph %v, want %v", s.LabelsInGraph(), labelsOnly)
		}
		return s
	}
	check := func(t *testing.T, model []byte, images map[string]image.Image, want float64) {
		host, graph := openOn(t, model, false), openOn(t, model, true)
		a, _ := segmentAll(t, host, images, 2)
		b, failed := segmentAll(t, graph, images, 2)
		for name, w := range a {
			g, ok := b[name]
			if !ok {
				t.Errorf("%s: no mask from the graph (%s)", name, failed[name])
				continue
			}
			if got := agreement(w, g); got < want {
				t.Errorf("%s: the graph's arg-max agrees with the host's on %.5f of pixels, want ≥ %v", name, got, want)
			}
		}
	}
	images := noiseImages([2]int{96, 64}, [2]int{96, 64}, [2]int{72, 56})
	t.Run("ties", func(t *testing.T) { check(t, headModel(t, 3, make([]float32, 3*27), "", false, 1), images, 1) })
	t.Run("binary", func(t *testing.T) { check(t, headModel(t, 1, weights(27, 3), "", false, 1), images, 1) })
	t.Run("deeplabv3plus", func(t *testing.T) {
		data, err := os.ReadFile(testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		check(t, data, images, 0.999)
	})
}
