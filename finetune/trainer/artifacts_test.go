package trainer

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx"
)

// convNet is a one-convolution model with parameters "w" and "b.1" and an
// input of the given shape.
func convNet(in ...int64) *onnx.Model {
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, make([]float32, 6)))
	bias := b.Initializer(onnx.NewFloat32Tensor("b.1", []int64{2}, make([]float32, 2)))
	b.Emit("Conv", "conv", []string{"input", w, bias}, []string{"logits"})
	dims := make([]any, len(in))
	for i, d := range in {
		dims[i] = d
	}
	f32 := onnx.Float32
	return onnx.NewModel(b.Graph("net",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, dims...)},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
}

// Several specs select each parameter once, as a pattern that matches
// its name exactly (the "." of b.1 included).
func TestTrainablePatterns(t *testing.T) {
	got, err := TrainablePatterns(convNet(1, 3, 8, 8), "all", "w")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`re:b\.1`, "re:w"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("patterns %v, want %v", got, want)
	}
	if _, err := TrainablePatterns(convNet(1, 3, 8, 8), "nothing-matches-*"); err == nil {
		t.Error("a spec that selects nothing was accepted")
	}
}

// A named input is trained NCHW or NHWC by where its channels are.
func TestNamedInput(t *testing.T) {
	for _, c := range []struct {
		in   []int64
		want []int64
	}{
		{[]int64{1, 3, 64, 64}, []int64{2, 3, 16, 24}},
		{[]int64{1, 64, 64, 3}, []int64{2, 16, 24, 3}},
	} {
		got, err := NamedInput(convNet(c.in...), "input", 2, 16, 24)
		if err != nil || !slices.Equal(got.Shape, c.want) || got.Height != 16 || got.Width != 24 {
			t.Errorf("input %v: %+v, %v; want shape %v", c.in, got, err, c.want)
		}
	}
	if _, err := NamedInput(convNet(1, 3, 8, 8), "image", 1, 8, 8); err == nil {
		t.Error("a missing input was accepted")
	}
	if _, err := NamedInput(convNet(1, 64, 64), "input", 1, 8, 8); err == nil {
		t.Error("an input that is no image tensor was accepted")
	}
}
