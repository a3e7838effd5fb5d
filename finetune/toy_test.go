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
	"github.com/segtune/segtune/onnx/onnxpb"
)

// toyModel writes a two-layer segmentation network (3x3 Conv, Relu, 1x1
// Conv to 2 classes) with dynamic batch and size.
func toyModel(t testing.TB, dir string) string {
	t.Helper()
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dims := func(ds ...any) *onnxpb.TensorShapeProto {
		sp := &onnxpb.TensorShapeProto{}
		for _, d := range ds {
			x := &onnxpb.TensorShapeProto_Dimension{}
			switch v := d.(type) {
			case int:
				x.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(v)}
			case string:
				x.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: v}
			}
			sp.Dim = append(sp.Dim, x)
		}
		return sp
	}
	vi := func(name string, s *onnxpb.TensorShapeProto) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: str(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: s}}}}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	randn := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
	attr := func(name string, ints ...int64) *onnxpb.AttributeProto {
		ty := onnxpb.AttributeProto_INTS
		return &onnxpb.AttributeProto{Name: str(name), Type: &ty, Ints: ints}
	}
	m := &onnx.Model{Proto: &onnxpb.ModelProto{
		IrVersion:   i64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: str(""), Version: i64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: str("toy"),
			Node: []*onnxpb.NodeProto{
				{Name: str("conv1"), OpType: str("Conv"), Input: []string{"input", "w1", "b1"}, Output: []string{"h"},
					Attribute: []*onnxpb.AttributeProto{attr("pads", 1, 1, 1, 1), attr("kernel_shape", 3, 3)}},
				{Name: str("relu"), OpType: str("Relu"), Input: []string{"h"}, Output: []string{"hr"}},
				{Name: str("classifier"), OpType: str("Conv"), Input: []string{"hr", "w2", "b2"}, Output: []string{"logits"}},
			},
			Initializer: []*onnxpb.TensorProto{
				onnx.NewFloat32Tensor("w1", []int64{8, 3, 3, 3}, randn(8*27, 0.3)),
				onnx.NewFloat32Tensor("b1", []int64{8}, make([]float32, 8)),
				onnx.NewFloat32Tensor("w2", []int64{2, 8, 1, 1}, randn(16, 0.3)),
				onnx.NewFloat32Tensor("b2", []int64{2}, make([]float32, 2)),
			},
			Input:  []*onnxpb.ValueInfoProto{vi("input", dims("n", 3, "h", "w"))},
			Output: []*onnxpb.ValueInfoProto{vi("logits", dims("n", 2, "h", "w"))},
		},
	}}
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
