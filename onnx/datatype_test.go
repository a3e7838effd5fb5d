package onnx

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestTensorShape(t *testing.T) {
	minusOne := SymbolicValueInfo("m", Float32, 2, 3)
	minusOne.Type.GetTensorType().Shape.Dim[0].Value = &DimValue{DimValue: -1}
	for _, tc := range []struct {
		v    *ValueInfoProto
		want []int64
		ok   bool
	}{
		{TensorValueInfo("x", Float32, 1, 3, 8, 8), []int64{1, 3, 8, 8}, true},
		{SymbolicValueInfo("s", Int64, "batch", 3, nil), []int64{0, 3, 0}, true},
		{TensorValueInfo("scalar", Float64), []int64{}, true},
		{minusOne, []int64{-1, 3}, true},
		{&ValueInfoProto{Name: proto.String("untyped")}, nil, false},
		{&ValueInfoProto{Name: proto.String("rank unknown"), Type: &TypeProto{Value: &TensorTypeValue{
			TensorType: &TensorTypeProto{ElemType: proto.Int32(int32(Float32))}}}}, nil, false},
	} {
		got, ok := TensorShape(tc.v)
		if ok != tc.ok || !slices.Equal(got, tc.want) || (tc.ok && got == nil) {
			t.Errorf("%s: TensorShape = %v, %v; want %v, %v", tc.v.GetName(), got, ok, tc.want, tc.ok)
		}
	}
}

// The element type constants carry onnx.proto's numbers and the names
// DataTypeName gives them.
func TestDataTypeConstants(t *testing.T) {
	for _, tc := range []struct {
		dt   DataType
		num  int32
		name string
	}{
		{Float32, 1, "float32"}, {Uint8, 2, "uint8"}, {Int8, 3, "int8"}, {Int32, 6, "int32"}, {Int64, 7, "int64"},
		{String, 8, "string"}, {Bool, 9, "bool"}, {Float16, 10, "float16"}, {Float64, 11, "float64"}, {BFloat16, 16, "bfloat16"},
	} {
		if int32(tc.dt) != tc.num || DataTypeName(int32(tc.dt)) != tc.name {
			t.Errorf("%s: number %d, name %s; want %d, %s", tc.dt, int32(tc.dt), DataTypeName(int32(tc.dt)), tc.num, tc.name)
		}
	}
}
