package inference_test

import (
	"image"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// segmentAll runs images (by name) through s's pipeline in batches of
// batch and returns each image's label map, and the failures by name.
func segmentAll(t *testing.T, s *inference.Segmenter, images map[string]image.Image, batch int) (map[string][]uint8, map[string]string) {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]uint8{}
	st := s.StagesFrom(func(p string) (image.Image, error) { return images[p], nil }, func(r inference.Result) error {
		mu.Lock()
		defer mu.Unlock()
		got[r.Path] = slices.Clone(r.Labels)
		return nil
	})
	var paths []string
	for p := range images {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	rep, err := pipeline.Run(paths, st, pipeline.Config{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, f := range rep.Failures {
		failed[f.Path] = f.Err.Error()
	}
	return got, failed
}

// openBoth opens model as Open and as OpenLabels, with its contract read
// from the graph under o.
func openBoth(t *testing.T, model []byte, o contract.Overrides, pre imageio.Preprocess) (host, graph *inference.Segmenter) {
	t.Helper()
	runtimetest.Require(t)
	for _, labelsOnly := range []bool{false, true} {
		m, err := onnx.Parse(model, "")
		if err != nil {
			t.Fatal(err)
		}
		ct, err := contract.Read(m, o)
		if err != nil {
			t.Fatal(err)
		}
		open := inference.Open
		if labelsOnly {
			open = inference.OpenLabels
		}
		s, err := open(model, ct, pre, runtime.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if labelsOnly {
			graph = s
		} else {
			host = s
		}
	}
	return host, graph
}

// sameMasks checks that the graph's arg-max gives, image for image and
// byte for byte, the masks the host's gives, in batches of 1 and 2.
func sameMasks(t *testing.T, host, graph *inference.Segmenter, images map[string]image.Image) {
	t.Helper()
	for _, batch := range []int{1, 2} {
		want, wantFailed := segmentAll(t, host, images, batch)
		got, gotFailed := segmentAll(t, graph, images, batch)
		for name, w := range want {
			g, ok := got[name]
			switch {
			case !ok:
				t.Errorf("batch %d, %s: no mask from the graph's arg-max (%s)", batch, name, gotFailed[name])
			case !slices.Equal(g, w):
				diff := 0
				for i := range w {
					if g[i] != w[i] {
						diff++
					}
				}
				t.Errorf("batch %d, %s: the graph's arg-max differs from the host's at %d of %d pixels", batch, name, diff, len(w))
			}
		}
		for name := range wantFailed {
			if _, ok := gotFailed[name]; !ok {
				t.Errorf("batch %d, %s: the host path failed (%s), the graph's did not", batch, name, wantFailed[name])
			}
		}
		if len(got) != len(want) {
			t.Errorf("batch %d: %d masks from the graph, %d from the host (failures %v)", batch, len(got), len(want), gotFailed)
		}
	}
}

// noiseImages are random images of a few sizes (odd ones included).
func noiseImages(sizes ...[2]int) map[string]image.Image {
	out := map[string]image.Image{}
	for i, s := range sizes {
		out[string(rune('a'+i))+".png"] = noise(s[0], s[1], uint64(i+1))
	}
	return out
}

// headModel writes a model of one 3×3 Conv from 3 channels to ch, with
// after it op (e.g. Sigmoid; "" none) and, with nhwc, a Transpose to NHWC;
// stride 4 gives scores at a quarter of the input's size.
func headModel(t *testing.T, ch int64, w []float32, op string, nhwc bool, stride int64) []byte {
	t.Helper()
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{ch, 3, 3, 3}, w))
	x := b.Node("Conv", "conv", []string{"input", wt}, onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("strides", stride, stride))
	switch op {
	case "":
	case "Softmax": // over the channels, as the contract reads it
		x = b.Node(op, "head", []string{x}, onnx.IntAttr("axis", 1))
	default:
		x = b.Node(op, "head", []string{x})
	}
	dims := []any{"n", ch, "h", "w"}
	if nhwc {
		x = b.Node("Transpose", "nhwc", []string{x}, onnx.IntsAttr("perm", 0, 2, 3, 1))
		dims = []any{"n", "h", "w", ch}
	}
	b.Emit("Identity", "out", []string{x}, []string{"scores"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("head",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("scores", f32, dims...)}), 17)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// weights are n deterministic Conv weights in [-1, 1).
func weights(n int, seed int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32((i*7919+seed*104729)%2000)/1000 - 1
	}
	return w
}

// TestGraphLabelsAreTheHostLabels: OpenLabels appends the arg-max to the
// graph where that gives the host's masks exactly (softmax logits, a
// one-channel binary head, a multi-channel sigmoid head, an NHWC head,
// tied scores, the generated DeepLabV3+ and the shared person model), and
// keeps the scores where it would not (scores at a lower resolution,
// images resized), the masks byte-identical to Open's either way.
func TestGraphLabelsAreTheHostLabels(t *testing.T) {
	native := imageio.Preprocess{Resize: imageio.ResizeNone}
	images := noiseImages([2]int{48, 32}, [2]int{48, 32}, [2]int{37, 23}, [2]int{64, 40})
	cases := []struct {
		name    string
		model   []byte
		o       contract.Overrides
		pre     imageio.Preprocess
		inGraph bool
	}{
		{"logits", headModel(t, 5, weights(5*27, 1), "", false, 1), contract.Overrides{}, native, true},
		{"softmax", headModel(t, 4, weights(4*27, 2), "Softmax", false, 1), contract.Overrides{}, native, true},
		{"binary", headModel(t, 1, weights(27, 3), "", false, 1), contract.Overrides{}, native, true},
		{"sigmoid", headModel(t, 3, weights(3*27, 4), "Sigmoid", false, 1), contract.Overrides{Threshold: 0.6}, native, true},
		{"nhwc", headModel(t, 4, weights(4*27, 5), "", true, 1), contract.Overrides{OutputLayout: contract.NHWC}, native, true},
		{"ties", headModel(t, 3, make([]float32, 3*27), "", false, 1), contract.Overrides{}, native, true},
		{"stride", headModel(t, 3, weights(3*27, 6), "", false, 4), contract.Overrides{}, native, false},
		{"resized", headModel(t, 3, weights(3*27, 7), "", false, 1), contract.Overrides{},
			imageio.Preprocess{Resize: imageio.ResizeStretch, Height: 40, Width: 56}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			host, graph := openBoth(t, c.model, c.o, c.pre)
			if host.LabelsInGraph() {
				t.Fatal("Open put the arg-max into the graph")
			}
			if graph.LabelsInGraph() != c.inGraph {
				t.Fatalf("OpenLabels: labels in the graph %v, want %v", graph.LabelsInGraph(), c.inGraph)
			}
			sameMasks(t, host, graph, images)
		})
	}
	t.Run("deeplabv3plus", func(t *testing.T) {
		data, err := os.ReadFile(testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		host, graph := openBoth(t, data, contract.Overrides{}, native)
		if !graph.LabelsInGraph() {
			t.Fatal("OpenLabels kept the scores of DeepLabV3+")
		}
		sameMasks(t, host, graph, noiseImages([2]int{96, 64}, [2]int{96, 64}, [2]int{72, 56}))
	})
	t.Run("person", func(t *testing.T) {
		model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
		path := testassets.Require(t, "data", "camvid", "images", "val", "0016E5_07965.png")
		data, err := os.ReadFile(model)
		if err != nil {
			t.Fatal(err)
		}
		img, err := imageio.Decoder{}.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		person, err := models.Lookup("deeplabv3plus-person-dynamic")
		if err != nil {
			t.Fatal(err)
		}
		pre := person.Preprocess
		pre.Resize, pre.ScaleFactor, pre.MultipleOf, pre.PlusOne = imageio.ResizeNone, 0, 0, false
		host, graph := openBoth(t, data, contract.Overrides{}, pre)
		if !graph.LabelsInGraph() {
			t.Fatal("OpenLabels kept the scores of the person model")
		}
		sameMasks(t, host, graph, map[string]image.Image{"camvid.png": img})
	})
}

// TestGraphLabelsRefuseNonFiniteScores: a NaN score fails the image in the
// graph's path as in the host's, and a labels-only segmenter refuses what
// needs scores.
func TestGraphLabelsRefuseNonFiniteScores(t *testing.T) {
	// Log of a Conv's output: NaN wherever the output is negative.
	model := headModel(t, 2, weights(2*27, 8), "Log", false, 1)
	host, graph := openBoth(t, model, contract.Overrides{}, imageio.Preprocess{Resize: imageio.ResizeNone})
	if !graph.LabelsInGraph() {
		t.Fatal("OpenLabels kept the scores")
	}
	images := noiseImages([2]int{16, 16})
	for _, s := range []*inference.Segmenter{host, graph} {
		got, failed := segmentAll(t, s, images, 1)
		if len(got) != 0 || !strings.Contains(failed["a.png"], "non-finite") {
			t.Errorf("labels in the graph %v: masks %d, failure %q; want the image failed for its non-finite scores", s.LabelsInGraph(), len(got), failed["a.png"])
		}
	}
	if err := graph.SetDense(&inference.Dense{Flip: true}); err == nil {
		t.Error("a labels-only segmenter took TTA")
	}
	if _, _, err := graph.DenseScores(make([]float32, 3*4*4), 4, 4); err == nil {
		t.Error("a labels-only segmenter gave scores")
	}
}

// BenchmarkGraphLabels times one image's label map both ways, alternated
// within each iteration so that load drifts hit both alike: the host's
// (Infer, then the arg-max over the scores in Labels) and the graph's
// (OpenLabels: Infer returns the labels). The shared person model on a
// CamVid image (480×360); host-ms/img and graph-ms/img are the metrics.
//
//	go test -run '^$' -bench GraphLabels -benchtime 20x ./inference
func BenchmarkGraphLabels(b *testing.B) {
	model := testassets.Require(b, "models", "deeplabv3plus_person_dynamic.onnx")
	path := testassets.Require(b, "data", "camvid", "images", "val", "0016E5_07965.png")
	data, err := os.ReadFile(model)
	if err != nil {
		b.Fatal(err)
	}
	img, err := imageio.Decoder{}.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	person, err := models.Lookup("deeplabv3plus-person-dynamic")
	if err != nil {
		b.Fatal(err)
	}
	pre := person.Preprocess
	pre.Resize, pre.ScaleFactor, pre.MultipleOf, pre.PlusOne = imageio.ResizeNone, 0, 0, false
	runtimetest.Require(b)
	var segs [2]*inference.Segmenter
	for i, open := range []func([]byte, *contract.Contract, imageio.Preprocess, runtime.Options) (*inference.Segmenter, error){inference.Open, inference.OpenLabels} {
		m, err := onnx.Parse(data, "")
		if err != nil {
			b.Fatal(err)
		}
		ct, err := contract.Read(m, contract.Overrides{})
		if err != nil {
			b.Fatal(err)
		}
		if segs[i], err = open(data, ct, pre, runtime.Options{}); err != nil {
			b.Fatal(err)
		}
		defer segs[i].Close()
	}
	var spent [2]time.Duration
	label := func(i int) {
		s := segs[i]
		p, err := s.Prepare(img)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		outs, err := s.Infer(p.Input, 1, p.Shape)
		if err == nil {
			_, err = s.Labels(p, outs[0])
		}
		spent[i] += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		s.Recycle(p.Input)
	}
	label(0) // warm-up
	label(1)
	spent = [2]time.Duration{}
	b.ResetTimer()
	for range b.N {
		label(0)
		label(1)
	}
	b.ReportMetric(float64(spent[0].Microseconds())/1e3/float64(b.N), "host-ms/img")
	b.ReportMetric(float64(spent[1].Microseconds())/1e3/float64(b.N), "graph-ms/img")
}

// TestInFlight: two batches in flight on a GPU once the channel count is
// known, one on the CPU.
func TestInFlight(t *testing.T) {
	for _, c := range []struct {
		device   string
		channels int
		kind     contract.Kind
		want     int
	}{
		{runtime.DeviceCUDA, 3, contract.Logits, 2},
		{runtime.DeviceCUDA, 0, contract.Labels, 2},
		{runtime.DeviceCUDA, 0, contract.Logits, 1},
		{runtime.DeviceCPU, 3, contract.Logits, 1},
	} {
		s := &inference.Segmenter{Session: &runtime.Session{Device: c.device}, Contract: &contract.Contract{Channels: c.channels, Kind: c.kind}}
		if got := s.InFlight(); got != c.want {
			t.Errorf("%s, %d channels of %s: %d batches in flight, want %d", c.device, c.channels, c.kind, got, c.want)
		}
	}
}
