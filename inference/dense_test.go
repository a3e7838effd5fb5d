package inference_test

import (
	"errors"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// open opens model with its contract read from the graph.
func open(t *testing.T, model []byte, pre imageio.Preprocess) *inference.Segmenter {
	t.Helper()
	runtimetest.Require(t)
	m, err := onnx.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := inference.Open(model, ct, pre, runtime.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// labels segments img through the pipeline, with dense inference d (nil:
// the whole image in one run).
func labels(t *testing.T, s *inference.Segmenter, d *inference.Dense, img image.Image) []uint8 {
	t.Helper()
	if err := s.SetDense(d); err != nil {
		t.Fatal(err)
	}
	var got []uint8
	st := s.StagesFrom(func(string) (image.Image, error) { return img, nil }, func(r inference.Result) error {
		if r.Width != img.Bounds().Dx() || r.Height != img.Bounds().Dy() {
			t.Errorf("label map %dx%d for an image of %v", r.Width, r.Height, img.Bounds())
		}
		got = r.Labels
		return nil
	})
	rep, err := pipeline.Run([]string{"img"}, st, pipeline.Config{})
	if err != nil || len(rep.Failures) > 0 {
		t.Fatalf("run: %v %v", err, rep.Failures)
	}
	return got
}

func agreement(a, b []uint8) float64 {
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	return float64(same) / float64(len(a))
}

// convModel writes a model of one k×k Conv (zero padding, same size out)
// from 3 channels to 2 with weights w ([2,3,k,k]), on inputs of any size.
func convModel(t *testing.T, k int64, w []float32) []byte {
	t.Helper()
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, k, k}, w))
	p := k / 2
	b.Emit("Conv", "conv", []string{"input", wt}, []string{"logits"}, onnx.IntsAttr("pads", p, p, p, p))
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// noise is a w×h image of random colours.
func noise(w, h int, seed uint64) *image.RGBA {
	r := rand.New(rand.NewPCG(seed, 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.IntN(256))
	}
	return img
}

// Flip TTA of a linear model is the model with its kernel mirrored added:
// a horizontal-gradient kernel k gives k + mirror(k), which the test runs
// whole as a model of its own; the labels must match wherever the sum is
// not a near tie.
func TestDenseFlipIsTheMirroredKernelAdded(t *testing.T) {
	const k = 5
	w := make([]float32, 2*3*k*k)
	sym := make([]float32, len(w))
	r := rand.New(rand.NewPCG(3, 4))
	for i := range w {
		w[i] = r.Float32() - 0.5
	}
	for o := 0; o < 2*3; o++ {
		for y := 0; y < k; y++ {
			for x := 0; x < k; x++ {
				sym[(o*k+y)*k+x] = w[(o*k+y)*k+x] + w[(o*k+y)*k+k-1-x]
			}
		}
	}
	pre := imageio.Preprocess{Resize: imageio.ResizeNone}
	img := noise(97, 61, 7)
	flipped := labels(t, open(t, convModel(t, k, w), pre), &inference.Dense{Flip: true}, img)
	want := labels(t, open(t, convModel(t, k, sym), pre), nil, img)
	plain := labels(t, open(t, convModel(t, k, w), pre), nil, img)
	if a := agreement(flipped, want); a < 0.999 {
		t.Errorf("flip TTA agrees with the mirrored-kernel model on %.4f of pixels, want ≥ 0.999", a)
	}
	if a := agreement(plain, want); a > 0.95 {
		t.Errorf("the plain model agrees with the mirrored-kernel one on %.4f of pixels: the test cannot tell flip from none", a)
	}
}

// A per-pixel model gives the same labels however the image is tiled or
// flipped; a model with a 7×7 context nearly so, with overlap.
func TestDenseTilesAgreeWithTheWholeImage(t *testing.T) {
	pre := imageio.Preprocess{Resize: imageio.ResizeNone}
	img := noise(150, 101, 9)
	r := rand.New(rand.NewPCG(5, 6))
	w1 := make([]float32, 2*3)
	w7 := make([]float32, 2*3*7*7)
	for i := range w1 {
		w1[i] = r.Float32() - 0.5
	}
	for i := range w7 {
		w7[i] = r.Float32() - 0.5
	}
	for _, tc := range []struct {
		name string
		k    int64
		w    []float32
		d    inference.Dense
		want float64
	}{
		{"1x1 tiles", 1, w1, inference.Dense{TileHeight: 32, TileWidth: 48, Overlap: 0.25}, 1},
		{"1x1 tiles, flip", 1, w1, inference.Dense{TileHeight: 40, TileWidth: 40, Overlap: 0.5, Flip: true}, 1},
		{"7x7 tiles", 7, w7, inference.Dense{TileHeight: 48, TileWidth: 64, Overlap: 0.25}, 0.99},
		{"7x7 tile larger than the image", 7, w7, inference.Dense{TileHeight: 512, TileWidth: 512}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, convModel(t, tc.k, tc.w), pre)
			whole := labels(t, s, nil, img)
			tiled := labels(t, s, &tc.d, img)
			if a := agreement(whole, tiled); a < tc.want {
				t.Errorf("tiled labels agree with the whole image's on %.4f of pixels, want ≥ %v", a, tc.want)
			}
		})
	}
}

// The synthetic DeepLabV3+ and the pretrained person model: tiles of half
// the image with overlap agree with the whole-image run on ≥ 99 % of
// pixels, and TTA changes little.
func TestDenseRealModelsAgreeWithTheWholeImage(t *testing.T) {
	dir := t.TempDir()
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val = 11, 1, 2
	cfg.Height, cfg.Width = 192, 256
	if _, err := synth.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	synthImages, err := imageio.ListImages(filepath.Join(dir, "images", "val"))
	if err != nil {
		t.Fatal(err)
	}
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	pre := entry.Preprocess
	pre.Resize, pre.Height, pre.Width, pre.ScaleFactor = imageio.ResizeNone, 0, 0, 0
	check := func(t *testing.T, s *inference.Segmenter, path string, d inference.Dense, want float64) {
		img, err := imageio.Decoder{}.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		whole := labels(t, s, nil, img)
		dense := labels(t, s, &d, img)
		if a := agreement(whole, dense); a < want {
			t.Errorf("%s: %+v agrees with the whole image on %.4f of pixels, want ≥ %v", filepath.Base(path), d, a, want)
		}
	}
	t.Run("synth", func(t *testing.T) {
		s := open(t, models.SynthModel, pre)
		for _, p := range synthImages {
			check(t, s, p, inference.Dense{TileHeight: 128, TileWidth: 128, Overlap: 0.5}, 0.99)
		}
	})
	t.Run("person", func(t *testing.T) {
		model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
		img := testassets.Require(t, "data", "camvid", "images", "val", "0016E5_07965.png")
		data, err := os.ReadFile(model)
		if err != nil {
			t.Fatal(err)
		}
		person, err := models.Lookup("deeplabv3plus-person-dynamic")
		if err != nil {
			t.Fatal(err)
		}
		pre := person.Preprocess
		pre.Resize, pre.ScaleFactor, pre.MultipleOf, pre.PlusOne = imageio.ResizeNone, 0, 0, false
		s := open(t, data, pre)
		check(t, s, img, inference.Dense{TileHeight: 257, TileWidth: 321, Overlap: 0.5}, 0.99)
		check(t, s, img, inference.Dense{Flip: true}, 0.99)
	})
}

func TestDenseRefusals(t *testing.T) {
	for _, d := range []inference.Dense{
		{TileHeight: 0, TileWidth: 5},
		{TileHeight: -1, TileWidth: -1},
		{TileHeight: 1 << 16, TileWidth: 8},
		{TileHeight: 8, TileWidth: 8, Overlap: 1},
		{TileHeight: 8, TileWidth: 8, Overlap: -0.1},
		{Scales: []float64{0}},
		{Scales: []float64{9}},
	} {
		if err := d.Validate(); !errors.Is(err, inference.ErrDense) {
			t.Errorf("%+v: %v, want ErrDense", d, err)
		}
	}
	s := open(t, convModel(t, 1, make([]float32, 6)), imageio.Preprocess{Resize: imageio.ResizeNone})
	if err := s.SetDense(&inference.Dense{Overlap: 2}); !errors.Is(err, inference.ErrDense) {
		t.Errorf("SetDense with overlap 2: %v", err)
	}
	// 1×1 tiles of a 150×101 image would be 15150 model runs, and far
	// more on a larger one: refused naming the window count, at once.
	if err := s.SetDense(&inference.Dense{TileHeight: 1, TileWidth: 1}); err != nil {
		t.Fatal(err)
	}
	st := s.StagesFrom(func(string) (image.Image, error) { return noise(200, 101, 1), nil }, func(inference.Result) error { return nil })
	rep, err := pipeline.Run([]string{"img"}, st, pipeline.Config{})
	if err != nil || len(rep.Failures) != 1 || !errors.Is(rep.Failures[0].Err, inference.ErrDense) ||
		!strings.Contains(rep.Failures[0].Err.Error(), "20200 windows") {
		t.Errorf("1x1 tiles: %v %+v, want the image refused for its 20200 windows", err, rep.Failures)
	}
}

// The estimate of a tiled run of a 6000×4000 image is bounded by the
// window, far below the whole-image run's.
func TestDenseEstimateIsBoundedByTheWindow(t *testing.T) {
	s := open(t, convModel(t, 1, make([]float32, 6)), imageio.Preprocess{Resize: imageio.ResizeNone})
	shape := pipeline.Shape{3, 4000, 6000}
	whole := s.Estimate(1, shape)
	if err := s.SetDense(&inference.Dense{TileHeight: 512, TileWidth: 512, Overlap: 0.25}); err != nil {
		t.Fatal(err)
	}
	st := s.StagesFrom(nil, nil)
	tiled := st.Estimate(1, shape)
	if tiled >= 1<<30 || tiled >= whole/2 {
		t.Errorf("tiled estimate %d bytes, whole-image %d", tiled, whole)
	}
}

func TestParseTTA(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		flip   bool
		scales []float64
		bad    string
	}{
		{spec: ""},
		{spec: "flip", flip: true},
		{spec: "scales=0.75,1,1.25", scales: []float64{0.75, 1, 1.25}},
		{spec: "scales=0.5, 2,flip", flip: true, scales: []float64{0.5, 2}},
		{spec: "flip,scales=1.5", flip: true, scales: []float64{1.5}},
		{spec: "flop", bad: `"flop" is neither flip nor scales=…`},
		{spec: "scales=1,x", bad: `scale "x" is not a number`},
		{spec: "1.5", bad: `"1.5" is neither flip nor scales=…`},
		{spec: "scales=100", bad: "invalid tiling"},
	} {
		var d inference.Dense
		err := d.ParseTTA(tc.spec)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseTTA(%q) = %v, want an error saying %q", tc.spec, err, tc.bad)
			}
			continue
		}
		if err != nil || d.Flip != tc.flip || !slices.Equal(d.Scales, tc.scales) {
			t.Errorf("ParseTTA(%q) = %v, flip %v, scales %v; want flip %v, scales %v", tc.spec, err, d.Flip, d.Scales, tc.flip, tc.scales)
		}
	}
}

// DenseScores hands back the blended scores: for a 1×1 Conv every window
// and its mirror see the same per-pixel scores, so their weighted mean is
// the whole-image run's scores (computed here by a plain session run);
// for a 5×5 Conv on tiles, where windows disagree, their arg-max is the
// label map segment's dense path gives.
func TestDenseScoresAreTheBlendedScores(t *testing.T) {
	pre := imageio.Preprocess{Resize: imageio.ResizeNone}
	img := noise(45, 31, 11)
	r := rand.New(rand.NewPCG(7, 8))
	w1, w5 := make([]float32, 2*3), make([]float32, 2*3*5*5)
	for _, w := range [][]float32{w1, w5} {
		for i := range w {
			w[i] = r.Float32() - 0.5
		}
	}
	tensor := func(s *inference.Segmenter) []float32 {
		p := s.Pre
		p.Layout = imageio.NCHW
		in := make([]float32, imageio.Channels*31*45)
		if _, err := p.Tensor(img, in); err != nil {
			t.Fatal(err)
		}
		return in
	}

	s := open(t, convModel(t, 1, w1), pre)
	in := tensor(s)
	outs, err := s.Session.Run(runtime.NewFloat32([]int64{1, 3, 31, 45}, in))
	if err != nil {
		t.Fatal(err)
	}
	want := outs[0].Float32
	for _, d := range []*inference.Dense{nil, {TileHeight: 64, TileWidth: 64}, {TileHeight: 8, TileWidth: 13, Overlap: 0.4, Flip: true}} {
		if err := s.SetDense(d); err != nil {
			t.Fatal(err)
		}
		got, classes, err := s.DenseScores(in, 31, 45)
		if err != nil {
			t.Fatal(err)
		}
		if classes != 2 || len(got) != len(want) {
			t.Fatalf("%+v: %d classes, %d scores; want 2, %d", d, classes, len(got), len(want))
		}
		for i := range want {
			if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-5*max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("%+v: score %d is %v, the whole-image run's %v", d, i, got[i], want[i])
			}
		}
	}
	if _, _, err := s.DenseScores(in[1:], 31, 45); err == nil {
		t.Error("an input of the wrong length was taken")
	}

	s = open(t, convModel(t, 5, w5), pre)
	d := &inference.Dense{TileHeight: 12, TileWidth: 20, Overlap: 0.25, Flip: true}
	wantLabels := labels(t, s, d, img)
	scores, classes, err := s.DenseScores(tensor(s), 31, 45)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint8, 31*45)
	if err := imageio.Argmax(scores, classes, 31, 45, got); err != nil {
		t.Fatal(err)
	}
	if a := agreement(got, wantLabels); a != 1 {
		t.Errorf("the arg-max of the blended scores agrees with the dense labels on %.4f of pixels, want all", a)
	}
}
