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
