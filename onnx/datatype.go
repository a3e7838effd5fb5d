package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// typeNames follows the element type names ONNX Runtime uses, so that
// segtune's own messages and ORT's read the same.
var typeNames = map[int32]string{
	int32(onnxpb.TensorProto_FLOAT):      "float32",
	int32(onnxpb.TensorProto_UINT8):      "uint8",
	int32(onnxpb.TensorProto_INT8):       "int8",
	int32(onnxpb.TensorProto_UINT16):     "uint16",
	int32(onnxpb.TensorProto_INT16):      "int16",
	int32(onnxpb.TensorProto_INT32):      "int32",
	int32(onnxpb.TensorProto_INT64):      "int64",
	int32(onnxpb.TensorProto_STRING):     "string",
	int32(onnxpb.TensorProto_BOOL):       "bool",
	int32(onnxpb.TensorProto_FLOAT16):    "float16",
	int32(onnxpb.TensorProto_DOUBLE):     "float64",
	int32(onnxpb.TensorProto_UINT32):     "uint32",
	int32(onnxpb.TensorProto_UINT64):     "uint64",
	int32(onnxpb.TensorProto_COMPLEX64):  "complex64",
	int32(onnxpb.TensorProto_COMPLEX128): "complex128",
	int32(onnxpb.TensorProto_BFLOAT16):   "bfloat16",
	typeFloat8E4M3FN:                     "float8e4m3fn",
	typeFloat8E4M3FNUZ:                   "float8e4m3fnuz",
	typeFloat8E5M2:                       "float8e5m2",
	typeFloat8E5M2FNUZ:                   "float8e5m2fnuz",
	typeUint4:                            "uint4",
	typeInt4:                             "int4",
	typeFloat4E2M1:                       "float4e2m1",
	typeFloat8E8M0:                       "float8e8m0",
}

// DataTypeName returns the short name of an ONNX element type, e.g.
// "float32" for FLOAT, or "type(N)" for a number it does not know.
func DataTypeName(dt int32) string {
	if s, ok := typeNames[dt]; ok {
		return s
	}
	return fmt.Sprintf("type(%d)", dt)
}

// isFloatType reports the floating-point element types, whose initializers
// count as trainable parameters.
func isFloatType(dt int32) bool {
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16, onnxpb.TensorProto_DOUBLE:
		return true
	}
	return false
}

// TypeString describes a value's type: "float32" for a tensor, and e.g.
// "sequence<float32>", "map<int64,float32>", "optional<float32>" or
// "sparse<float32>" for the others; "?" when the type is absent.
func TypeString(t *onnxpb.TypeProto) string {
	switch v := t.GetValue().(type) {
	case *onnxpb.TypeProto_TensorType:
		return DataTypeName(v.TensorType.GetElemType())
	case *onnxpb.TypeProto_SparseTensorType:
		return "sparse<" + DataTypeName(v.SparseTensorType.GetElemType()) + ">"
	case *onnxpb.TypeProto_SequenceType:
		return "sequence<" + TypeString(v.SequenceType.GetElemType()) + ">"
	case *onnxpb.TypeProto_MapType:
		return "map<" + DataTypeName(v.MapType.GetKeyType()) + "," + TypeString(v.MapType.GetValueType()) + ">"
	case *onnxpb.TypeProto_OptionalType:
		return "optional<" + TypeString(v.OptionalType.GetElemType()) + ">"
	}
	return "?"
}

// Dims describes a tensor type's shape, one string per dimension: the size
// in decimal, a symbolic dimension by its name, "?" for an unknown one. It
// returns nil when the rank itself is unknown (no shape recorded).
func Dims(t *onnxpb.TypeProto) []string {
	var shape *onnxpb.TensorShapeProto
	switch v := t.GetValue().(type) {
	case *onnxpb.TypeProto_TensorType:
		shape = v.TensorType.GetShape()
	case *onnxpb.TypeProto_SparseTensorType:
		shape = v.SparseTensorType.GetShape()
	}
	if shape == nil {
		return nil
	}
	out := make([]string, len(shape.GetDim()))
	for i, d := range shape.GetDim() {
		switch v := d.GetValue().(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			out[i] = fmt.Sprint(v.DimValue)
			if v.DimValue < 0 { // some exporters write -1 for dynamic
				out[i] = "?"
			}
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			out[i] = v.DimParam
			if v.DimParam == "" {
				out[i] = "?"
			}
		default:
			out[i] = "?"
		}
	}
	return out
}

// TensorShape returns the dimensions a tensor value declares: each size as
// written (0 for a symbolic or unknown one, and -1 where an exporter wrote
// it for dynamic), and false when v declares no tensor shape.
func TensorShape(v *onnxpb.ValueInfoProto) ([]int64, bool) {
	shape := v.GetType().GetTensorType().GetShape()
	if shape == nil {
		return nil, false
	}
	dims := make([]int64, len(shape.GetDim()))
	for i, d := range shape.GetDim() {
		dims[i] = d.GetDimValue()
	}
	return dims, true
}
