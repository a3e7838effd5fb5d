package preprocsearch

import (
	"context"
	"image"
	"image/color"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/evaluate/preprocsearch/searchtest"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The search finds, from 8 labelled images, the preprocessing each of
// four models was made for, ahead of the others beyond the noise: the
// threshold sits at byte 200 under the model's own mapping, which every
// other mapping of the same channel puts 27 or more byte values away.
func TestSearchFindsTheTrainedContract(t *testing.T) {
	runtimetest.Require(t)
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
			res := searchThreshold(t, tc.pre, 200, imageio.Preprocess{})
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
// that ImageNet mean/std (threshold 160.3) gives; with the latter the
// current settings, they stay.
func TestSearchSaysTies(t *testing.T) {
	runtimetest.Require(t)
	imagenet := imageio.Preprocess{Mean: imagenetMean, Std: imagenetStd}
	res := searchThreshold(t, imageio.Preprocess{ValueScale: 1.0 / 255}, 160, imagenet)
	tied := res.Tied()
	if len(tied) != 2 || tied[0].MeanIoU != 1 || tied[1].MeanIoU != 1 {
		t.Fatalf("tied %+v; want RGB 0..1 and RGB ImageNet mean/std at 1", tied)
	}
	names := map[string]bool{tied[0].Name: true, tied[1].Name: true}
	if !names["RGB 0..1, own size"] || !names["RGB ImageNet mean/std, own size"] {
		t.Errorf("tied %v", names)
	}
	// Nothing shows a change from the current settings would help.
	if c := res.Scores[res.Chosen]; !c.Current || c.Name != "RGB ImageNet mean/std, own size" {
		t.Errorf("chose %+v; want the current settings, which tie with the best", c.Candidate)
	}
}

// searchThreshold searches the preprocessing of a searchtest.ThresholdModel made for
// pre (its threshold the tensor value of byte b under pre) on 8 of 10
// labelled noise images, from the current settings.
func searchThreshold(t *testing.T, pre imageio.Preprocess, b uint8, current imageio.Preprocess) *Result {
	t.Helper()
	dir := t.TempDir()
	probe := image.NewRGBA(image.Rect(0, 0, 1, 1))
	probe.Set(0, 0, color.RGBA{b, b, b, 255})
	x := make([]float32, 3)
	if _, err := pre.Tensor(probe, x); err != nil {
		t.Fatal(err)
	}
	model := searchtest.ThresholdModel(t, filepath.Join(dir, "m.onnx"), x[0])
	images, masks := searchtest.LabelledNoise(t, dir, pre, x[0], 10, 24, 16)
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
	res, err := Search(ctx, Request{Model: model, Images: imgs, Masks: mks, Sample: 8, Open: open}, Candidates(current, 0, 0))
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
