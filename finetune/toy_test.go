package finetune

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

// toyModel writes a two-layer segmentation network (3x3 Conv, Relu, 1x1
// Conv to 2 classes) with dynamic batch and size.
func toyModel(t testing.TB, dir string) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	randn := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
	b := &onnx.Builder{}
	w1 := b.Initializer(onnx.NewFloat32Tensor("w1", []int64{8, 3, 3, 3}, randn(8*27, 0.3)))
	b1 := b.Initializer(onnx.NewFloat32Tensor("b1", []int64{8}, make([]float32, 8)))
	w2 := b.Initializer(onnx.NewFloat32Tensor("w2", []int64{2, 8, 1, 1}, randn(16, 0.3)))
	b2 := b.Initializer(onnx.NewFloat32Tensor("b2", []int64{2}, make([]float32, 2)))
	b.Emit("Conv", "conv1", []string{"input", w1, b1}, []string{"h"}, onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", 3, 3))
	b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
	b.Emit("Conv", "classifier", []string{"hr", w2, b2}, []string{"logits"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("toy",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
	path := filepath.Join(dir, "toy.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// toyData writes n images of grey noise with one red rectangle each, and
// masks labelling the rectangle 1; its size varies from small to large.
func toyData(t testing.TB, root, split string, n int, seed uint64) DataSpec {
	t.Helper()
	spec := DataSpec{Images: filepath.Join(root, "images", split), Masks: filepath.Join(root, "masks", split)}
	os.MkdirAll(spec.Images, 0o755)
	os.MkdirAll(spec.Masks, 0o755)
	rng := rand.New(rand.NewPCG(seed, 1))
	const w, h = 40, 32
	for i := 0; i < n; i++ {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		labels := make([]uint8, w*h)
		side := 3 + rng.IntN(14)
		x0, y0 := rng.IntN(w-side), rng.IntN(h-side)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				g := uint8(60 + rng.IntN(80))
				c := color.RGBA{g, g, g, 255}
				if x >= x0 && x < x0+side && y >= y0 && y < y0+side {
					c = color.RGBA{200, uint8(rng.IntN(60)), 30, 255}
					labels[y*w+x] = 1
				}
				img.Set(x, y, c)
			}
		}
		name := fmt.Sprintf("%03d.png", i)
		if err := imageio.WritePNG(filepath.Join(spec.Images, name), img); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WriteMaskPNG(filepath.Join(spec.Masks, name), labels, w, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	return spec
}

// toyConfig is a small, fast run on toy data.
func toyConfig(t testing.TB, dir string) Config {
	return Config{
		Network:    NetworkSpec{BaseModel: toyModel(t, dir)},
		Train:      toyData(t, filepath.Join(dir, "data"), "train", 12, 1),
		Val:        toyData(t, filepath.Join(dir, "data"), "val", 4, 2),
		Ignore:     255,
		ClassNames: []string{"background", "red"},
		Trainable:  "all",
		Batch:      4, Height: 24, Width: 32,
		Epochs: 4, Optimizer: "adam", LR: 0.02, Schedule: "constant", Seed: 3,
		Preprocess: imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1},
		Threads:    1,
	}
}
