package onnx_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

func TestParameterNames(t *testing.T) {
	n := func(op string, ins ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Input: ins, Output: []string{op + "_out"}}
	}
	f := func(name string) *onnxpb.TensorProto { return onnx.NewFloat32Tensor(name, []int64{1}, []float32{1}) }
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			n("Conv", "x", "w", "b"),
			n("BatchNormalization", "c", "scale", "bias", "mean", "var"),
			n("Resize", "r", "", "scales"),
			n("Mul", "m", "k"),
			n("MatMul", "a", "mw"),
			n("Gemm", "g", "gb", "gc"),
			n("PRelu", "p", "slope"),
			n("Reshape", "s", "shape"),
		},
		Initializer: []*onnxpb.TensorProto{f("w"), f("b"), f("scale"), f("bias"), f("mean"), f("var"), f("scales"), f("k"), f("mw"), f("gb"), f("gc"), f("slope"),
			onnx.NewInt64Tensor("shape", []int64{1}, []int64{-1})},
	}
	var got []string
	for name := range onnx.ParameterNames(g) {
		got = append(got, name)
	}
	slices.Sort(got)
	want := []string{"b", "bias", "gb", "gc", "mw", "scale", "slope", "w"}
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
