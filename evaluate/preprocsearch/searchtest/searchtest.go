// Package searchtest makes models that expect a known preprocessing, and
// their labelled images, for tests of preprocsearch and its command.
package searchtest

import (
	"fmt"
	"image"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/onnx"
)

// ThresholdModel writes a model whose class-1 logit is its first input
// channel minus t (class 0's is 0): a pixel is class 1 where that
// channel's tensor value exceeds t, so the labels it gives depend on the
// channel order and the value mapping it is fed with.
func ThresholdModel(t testing.TB, path string, threshold float32) string {
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

// LabelledNoise writes n w×h images of random colours into dir/images and
// the labels the threshold model gives them under pre into dir/masks:
// the data of a model trained with pre.
func LabelledNoise(t testing.TB, dir string, pre imageio.Preprocess, threshold float32, n, w, h int) (images, masks string) {
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
