package trainingraph

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string][2]int64{"33x41": {33, 41}, "64": {64, 64}, "8X16": {8, 16}, "32768x1": {32768, 1}} {
		h, w, err := ParseSize(s)
		if err != nil || h != want[0] || w != want[1] {
			t.Errorf("%q: %dx%d, %v; want %v", s, h, w, err, want)
		}
	}
	for _, s := range []string{"", "x", "1x2x3", "0x4", "-3x4", "32769x1", "axb", "4x"} {
		if _, _, err := ParseSize(s); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
}

func TestParseLoss(t *testing.T) {
	if k, err := ParseLoss("bce"); err != nil || k != grad.LossSigmoidBCE {
		t.Errorf("bce: %v, %v", k, err)
	}
	if k, err := ParseLoss("ce"); err != nil || k != grad.LossCrossEntropy {
		t.Errorf("ce: %v, %v", k, err)
	}
	if _, err := ParseLoss("mse"); !errors.Is(err, ErrLossKind) {
		t.Errorf("mse: %v", err)
	}
}

// A named input the model lacks, a model that is no segmenter with no
// input named, and a trainable pattern that selects nothing valid are
// SpecErrors naming their field, found before anything is compiled.
func TestCompileSpecErrors(t *testing.T) {
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, make([]float32, 6)))
	b.Emit("Conv", "conv", []string{"input", w}, []string{"logits"})
	// Two inputs: no segmentation contract can pick the image.
	m := onnx.NewModel(b.Graph("net",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", onnx.Float32, 1, 3, "h", "w"), onnx.SymbolicValueInfo("extra", onnx.Float32, 1, 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", onnx.Float32, 1, 2, "h", "w")}), 17)
	path := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Model: path, Trainable: []string{"all"}, Batch: 1, Height: 8, Width: 8}
	for _, tc := range []struct {
		field string
		edit  func(*Spec)
	}{
		{"Input", func(s *Spec) { s.Input = "nope" }},
		{"Contract", func(s *Spec) {}},
		{"Trainable", func(s *Spec) { s.Input, s.Trainable = "input", []string{"re:("} }},
	} {
		s := spec
		tc.edit(&s)
		var se *SpecError
		if _, err := Compile(s); !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	spec.Batch = 0
	if _, err := Compile(spec); err == nil {
		t.Error("batch 0 accepted")
	}
}
