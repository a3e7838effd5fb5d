package preprocsearch

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/resolve"
)

// thresholdModel writes a model whose class-1 logit is its first input
// channel minus t (class 0's is 0): a pixel is class 1 where that
// channel's tensor value exceeds t, so the labels it gives depend on the
// channel order and the value mapping it is fed with.
func thresholdModel(t testing.TB, path string, threshold float32) string {
	t.Helper()
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, []float32{0, 0, 0, 1, 0, 0}))
	bias := b.Initializer(onnx.NewFloat32Tensor("b", []int64{2}, []float32{0, -threshold}))
	b.Emit("Conv", "conv", []string{"input", w, bias}, []string{"logits"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("threshold",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// labelledNoise writes n w×h images of random colours into dir/images and
// the labels the threshold model gives them under pre into dir/masks:
// the data of a model trained with pre.
func labelledNoise(t testing.TB, dir string, pre imageio.Preprocess, threshold float32, n, w, h int) (images, masks string) {
	t.Helper()
	images, masks = filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	for _, d := range []string{images, masks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 43))
	x := make([]float32, 3*w*h)
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for xx := range w {
				img.Set(xx, y, color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
			}
		}
		if _, err := pre.Tensor(img, x); err != nil {
			t.Fatal(err)
		}
		labels := make([]uint8, w*h)
		for p := range labels {
			if x[p] > threshold { // the first channel, NCHW
				labels[p] = 1
			}
		}
		name := fmt.Sprintf("%02d.png", i)
		if err := imageio.WritePNG(filepath.Join(images, name), img); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WriteMaskPNG(filepath.Join(masks, name), labels, w, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	return images, masks
}

// The search finds, from 8 labelled images, the preprocessing each of
// four models was made for, ahead of the others beyond the noise: the
// threshold sits at byte 200 under the model's own mapping, which every
// other mapping of the same channel puts 27 or more byte values away.
func TestSearchFindsTheTrainedContract(t *testing.T) {
	testassets.RequireORT(t)
	cases := []struct {
		want string
		pre  imageio.Preprocess
	}{
		{"BGR -1..1", imageio.Preprocess{ChannelOrder: imageio.BGR, ValueScale: 1 / 127.5, ValueOffset: -1}},
		{"RGB ImageNet mean/std", imageio.Preprocess{Mean: imagenetMean, Std: imagenetStd}},
		{"RGB 0..1", imageio.Preprocess{ValueScale: 1.0 / 255}},
		{"BGR 0..255", imageio.Preprocess{ChannelOrder: imageio.BGR}},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			res := searchThreshold(t, tc.pre, 200)
			if res.Images != 8 || res.Available != 10 {
				t.Errorf("scored %d of %d images; want 8 of 10", res.Images, res.Available)
			}
			best := res.Scores[0]
			if best.Name != tc.want+", own size" || best.MeanIoU != 1 || best.Tie || len(res.Tied()) != 0 {
				t.Errorf("best %q (mIoU %v, tie %v); want %q alone at 1\n%+v", best.Name, best.MeanIoU, best.Tie, tc.want, res.Scores)
			}
			if got := res.Scores[res.Chosen]; got.Name != best.Name {
				t.Errorf("chose %q", got.Name)
			}
		})
	}
}

// Two mappings that label the images alike tie, and the search says so:
// a model thresholding red at byte 160 on 0..1 values gives the labels
// that ImageNet mean/std (threshold 160.3) gives.
func TestSearchSaysTies(t *testing.T) {
	testassets.RequireORT(t)
	res := searchThreshold(t, imageio.Preprocess{ValueScale: 1.0 / 255}, 160)
	tied := res.Tied()
	if len(tied) != 2 || tied[0].MeanIoU != 1 || tied[1].MeanIoU != 1 {
		t.Fatalf("tied %+v; want RGB 0..1 and RGB ImageNet mean/std at 1", tied)
	}
	names := map[string]bool{tied[0].Name: true, tied[1].Name: true}
	if !names["RGB 0..1, own size"] || !names["RGB ImageNet mean/std, own size"] {
		t.Errorf("tied %v", names)
	}
}

// searchThreshold searches the preprocessing of a thresholdModel made for
// pre, its threshold the tensor value of byte b under pre, on 8 of 10
// labelled noise images, from the default settings.
func searchThreshold(t *testing.T, pre imageio.Preprocess, b uint8) *Result {
	t.Helper()
	dir := t.TempDir()
	probe := image.NewRGBA(image.Rect(0, 0, 1, 1))
	probe.Set(0, 0, color.RGBA{b, b, b, 255})
	x := make([]float32, 3)
	if _, err := pre.Tensor(probe, x); err != nil {
		t.Fatal(err)
	}
	model := thresholdModel(t, filepath.Join(dir, "m.onnx"), x[0])
	images, masks := labelledNoise(t, dir, pre, x[0], 10, 24, 16)
	ctx := context.Background()
	imgs, err := storage.OpenFolder(ctx, images)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imgs.Close() })
	mks, err := storage.OpenFolder(ctx, masks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mks.Close() })
	open := func(m string, s imageio.Sidecar) (*inference.Segmenter, error) {
		return resolve.OpenSegmenter(m, s, resolve.SegmenterOptions{})
	}
	res, err := Search(ctx, Request{Model: model, Images: imgs, Masks: mks, Sample: 8, Open: open}, Candidates(imageio.Preprocess{}, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Candidates cover both channel orders and four value mappings at the
// current geometry and the other one, and keep the current settings
// as one of them (found, not repeated).
func TestCandidates(t *testing.T) {
	scale := imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2, ValueScale: 1 / 127.5, ValueOffset: -1}
	cs := Candidates(scale, 0, 0)
	if len(cs) != 16 {
		t.Fatalf("%d candidates for a dynamic model at ×2; want 2 geometries × 2 orders × 4 mappings", len(cs))
	}
	current := 0
	for _, c := range cs {
		if c.Current {
			current++
			if c.Name != "RGB -1..1, ×2" || c.Preprocess.ScaleFactor != 2 {
				t.Errorf("current candidate %+v", c)
			}
		}
		if err := c.Preprocess.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	if current != 1 {
		t.Errorf("%d candidates are the current settings; want 1", current)
	}
	fixed := Candidates(imageio.Preprocess{Height: 64, Width: 64, Resize: imageio.ResizeLetterbox, MeanStdRange: imageio.RangeByte, Mean: []float64{1, 2, 3}}, 64, 64)
	if len(fixed) != 17 || !fixed[16].Current || fixed[0].Name != "RGB 0..1, 64x64 letterboxed" || fixed[8].Name != "RGB 0..1, 64x64 stretched" {
		t.Errorf("fixed-size model letterboxed with its own mean: %d candidates, first %q, ninth %q, last %+v", len(fixed), fixed[0].Name, fixed[8].Name, fixed[len(fixed)-1])
	}
}
