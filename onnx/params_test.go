package onnx_test

import (
	"slices"
	"testing"

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
