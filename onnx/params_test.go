package onnx_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

func TestParameterNames(t *testing.T) {
	b := &onnx.Builder{}
	for _, n := range [][]string{
		{"Conv", "x", "w", "b"},
		{"BatchNormalization", "c", "scale", "bias", "mean", "var"},
		{"Resize", "r", "", "scales"},
		{"Mul", "m", "k"},
		{"MatMul", "a", "mw"},
		{"Gemm", "g", "gb", "gc"},
		{"PRelu", "p", "slope"},
		{"LayerNormalization", "ln", "lns", "lnb"},
		{"Reshape", "s", "shape"},
	} {
		b.Emit(n[0], n[0], n[1:], []string{n[0] + "_out"})
	}
	for _, name := range []string{"w", "b", "scale", "bias", "mean", "var", "scales", "k", "mw", "gb", "gc", "slope", "lns", "lnb"} {
		b.Initializer(onnx.NewFloat32Tensor(name, []int64{1}, []float32{1}))
	}
	b.ConstInt64("shape", []int64{1}, -1)
	g := b.Graph("params", nil, nil)
	var got []string
	for name := range onnx.ParameterNames(g) {
		got = append(got, name)
	}
	slices.Sort(got)
	want := []string{"b", "bias", "gb", "gc", "lnb", "lns", "mw", "scale", "slope", "w"}
	if !slices.Equal(got, want) {
		t.Errorf("ParameterNames = %v, want %v", got, want)
	}
	if !onnx.IsParameterInput("Conv", 1) || onnx.IsParameterInput("Resize", 2) || onnx.IsParameterInput("BatchNormalization", 3) {
		t.Error("IsParameterInput disagrees with the table")
	}
	if ops := onnx.ParameterOps(); !slices.IsSorted(ops) || !slices.Contains(ops, "ConvTranspose") {
		t.Errorf("ParameterOps = %v", ops)
	}
}

// TestParameterNamesAffine: a Linear's bias, a decomposed LayerNorm's scale
// and bias, a layer scale and a Gather table are parameters; eps, a Pow
// exponent, GELU's constants, input normalisation on a graph input and a
// float LUT of rank 1 are not.
func TestParameterNamesAffine(t *testing.T) {
	b := &onnx.Builder{}
	f := func(name string, dims ...int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		b.Initializer(onnx.NewFloat32Tensor(name, dims, make([]float32, n)))
	}
	f("mean", 1, 3, 1, 1)
	f("std", 1, 3, 1, 1)
	f("W", 3, 8)
	f("bias", 8)
	f("two")
	f("eps", 1)
	f("lnw", 8)
	f("lnb", 8)
	f("half")
	f("gamma", 8)
	f("table", 49, 2)
	f("lut", 16)
	f("mask", 4, 4)
	for _, n := range [][]string{
		{"Mul", "input", "std", "x0"},     // input normalisation: no layer computed "input"
		{"Add", "x0", "mean", "x1"},       // nor x0 (a constant step on the input)
		{"MatMul", "x1", "W", "m"},        // rule 1
		{"Add", "m", "bias", "lin"},       // Linear bias
		{"ReduceMean", "lin", "mu"},       // the opset-13 LayerNorm
		{"Sub", "lin", "mu", "c"},         //
		{"Pow", "c", "two", "sq"},         // exponent: scalar
		{"ReduceMean", "sq", "var"},       //
		{"Add", "var", "eps", "ve"},       // eps: size 1
		{"Sqrt", "ve", "sd"},              //
		{"Div", "c", "sd", "nrm"},         //
		{"Mul", "nrm", "lnw", "sc"},       // LayerNorm scale
		{"Add", "sc", "lnb", "ln"},        // LayerNorm bias
		{"Mul", "ln", "half", "h"},        // GELU's 0.5: scalar
		{"Mul", "gamma", "h", "ls"},       // not after a layer (after a scalar Mul)
		{"Gather", "table", "idx", "rel"}, // relative-position bias table
		{"Gather", "lut", "idx", "look"},  // rank 1: a lookup constant
		{"Add", "rel", "mask", "masked"},  // an attention mask: not per-channel
	} {
		b.Emit(n[0], n[0]+"_"+n[len(n)-1], n[1:len(n)-1], n[len(n)-1:])
	}
	b.Emit("Mul", "scale2", []string{"gamma", "lin"}, []string{"ls2"}) // layer scale after the Linear
	var got []string
	g := b.Graph("affine", nil, nil)
	for name := range onnx.ParameterNames(g) {
		got = append(got, name)
	}
	slices.Sort(got)
	if want := []string{"W", "bias", "gamma", "lnb", "lnw", "table"}; !slices.Equal(got, want) {
		t.Errorf("ParameterNames = %v, want %v", got, want)
	}
	// The bias and the layer scale count with the Linear; the LayerNorm's
	// scale and bias with the scale's Mul.
	owners := map[string][]string{}
	for n, ps := range onnx.NodeParameters(g) {
		owners[n.GetName()] = ps
	}
	for node, want := range map[string][]string{
		"MatMul_m": {"W", "bias", "gamma"}, "Mul_sc": {"lnw", "lnb"}, "Gather_rel": {"table"},
	} {
		if !slices.Equal(owners[node], want) {
			t.Errorf("node %s owns %v, want %v (all: %v)", node, owners[node], want, owners)
		}
	}
}

// TestParameterNamesCycle: a hostile graph whose Add and Mul feed each
// other ends without an answer loop.
func TestParameterNamesCycle(t *testing.T) {
	b := &onnx.Builder{}
	b.Initializer(onnx.NewFloat32Tensor("k", []int64{4}, make([]float32, 4)))
	b.Emit("Add", "a", []string{"y", "k"}, []string{"x"})
	b.Emit("Mul", "m", []string{"x", "k"}, []string{"y"})
	if got := onnx.ParameterNames(b.Graph("cycle", nil, nil)); len(got) != 0 {
		t.Errorf("ParameterNames = %v, want none", got)
	}
}

// TestParameterNamesWeightPaths: a weight that reaches its layer through the
// ops exporters write in front of it (torch.onnx without constant folding:
// MatMul(x, Transpose(W)) + Add(b); Unsqueeze'd and Reshape'd biases; an
// fp16-stored weight behind a Cast; chains of them) is the stored
// initializer's parameter; a constant reshaped onto the input stays frozen,
// with its reason.
func TestParameterNamesWeightPaths(t *testing.T) {
	b := &onnx.Builder{}
	f := func(name string, dims ...int64) {
		b.Initializer(onnx.NewFloat32Tensor(name, dims, make([]float32, numel(dims))))
	}
	f("mean", 3)
	f("W", 8, 3) // torch's Linear weight [out, in]
	f("b", 8)
	f("convb", 4)
	f("scale", 4)
	f("bnmean", 4)
	f("bnvar", 4)
	w16 := onnx.NewFloat32Tensor("W16", []int64{4, 8, 1, 1}, make([]float32, 32))
	w16.DataType = proto.Int32(int32(onnx.Float16))
	if err := onnx.SetFloat32s(w16, make([]float32, 32)); err != nil {
		t.Fatal(err)
	}
	b.Initializer(w16)
	b.ConstInt64("shape_c11", []int64{3}, 4, 1, 1)
	b.ConstInt64("axes12", []int64{2}, 1, 2)
	b.ConstInt64("shape_mean", []int64{4}, 1, 1, 1, 3)
	for _, n := range [][]string{
		{"Reshape", "mean", "shape_mean", "mean4"}, // input normalisation, reshaped
		{"Sub", "input", "mean4", "x"},
		{"Transpose", "W", "Wt"},
		{"MatMul", "x", "Wt", "m"},
		{"Add", "b", "m", "lin"}, // torch writes the bias first
		{"Transpose", "lin", "nchw"},
		{"Cast", "W16", "W32"},
		{"Identity", "W32", "W32i"},
		{"Conv", "nchw", "W32i", "", "conv"},
		{"Unsqueeze", "convb", "axes12", "convb3"},
		{"Add", "conv", "convb3", "y"},
		{"Reshape", "scale", "shape_c11", "scale3"},
		{"Mul", "y", "scale3", "z"},
		{"BatchNormalization", "z", "scale", "convb", "bnmean", "bnvar", "out"},
	} {
		ins := append([]string(nil), n[1:len(n)-1]...)
		b.Emit(n[0], n[0]+"_"+n[len(n)-1], ins, []string{n[len(n)-1]})
	}
	g := b.Graph("paths", nil, nil)
	var got []string
	for name := range onnx.ParameterNames(g) {
		got = append(got, name)
	}
	slices.Sort(got)
	if want := []string{"W", "W16", "b", "convb", "scale"}; !slices.Equal(got, want) {
		t.Errorf("ParameterNames = %v, want %v", got, want)
	}
	frozen := map[string]string{}
	for _, f := range onnx.FrozenFloats(g) {
		frozen[f.Name] = f.Reason
	}
	if len(frozen) != 3 || !strings.Contains(frozen["mean"], "Sub operand") || !strings.Contains(frozen["bnvar"], "running statistic") {
		t.Errorf("FrozenFloats = %v, want mean (input normalisation) and the running statistics", frozen)
	}
	if txt := (onnx.Summary{Frozen: onnx.FrozenFloats(g)}).String(); !strings.Contains(txt, "2 tensors, a BatchNormalization running statistic: bnmean, bnvar") {
		t.Errorf("info text does not list the frozen tensors by reason:\n%s", txt)
	}
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}
