package onnx

import "github.com/segtune/segtune/onnx/onnxpb"

// IntAttr returns an INT attribute, for nodes built in code.
func IntAttr(name string, v int64) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_INT
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, I: &v}
}

// TensorValueInfo describes a tensor of element type dt and static dims,
// for graph inputs and outputs built in code.
func TensorValueInfo(name string, dt onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
	et := int32(dt)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: &name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et, Shape: shape}}}}
}

// IntsAttr returns an INTS attribute, for nodes built in code.
func IntsAttr(name string, v ...int64) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_INTS
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, Ints: append([]int64(nil), v...)}
}

// StringAttr returns a STRING attribute, for nodes built in code.
func StringAttr(name, v string) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_STRING
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, S: []byte(v)}
}

// FloatAttr returns a FLOAT attribute, for nodes built in code.
func FloatAttr(name string, v float32) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_FLOAT
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, F: &v}
}
