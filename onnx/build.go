package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// IntAttr returns an INT attribute, for nodes built in code.
func IntAttr(name string, v int64) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_INT
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, I: &v}
}

// TensorType is the type of a tensor of element type dt. Each dim is an int
// or int64 (a size), a string (a symbolic name) or nil (unknown); any other
// value is a programming error and panics.
func TensorType(dt onnxpb.TensorProto_DataType, dims ...any) *onnxpb.TypeProto {
	et := int32(dt)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch v := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(v)}
		case int64:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: v}
		case nil:
		default:
			panic(fmt.Sprintf("onnx: dimension %v (%T) is neither a size nor a name", d, d))
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: &et, Shape: shape}}}
}

// TensorValueInfo describes a tensor of element type dt and static dims,
// for graph inputs and outputs built in code.
func TensorValueInfo(name string, dt onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
	ds := make([]any, len(dims))
	for i, d := range dims {
		ds[i] = d
	}
	return SymbolicValueInfo(name, dt, ds...)
}

// SymbolicValueInfo is TensorValueInfo for shapes with symbolic or unknown
// dimensions: each dim is a size, a name or nil, as in TensorType.
func SymbolicValueInfo(name string, dt onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{Name: &name, Type: TensorType(dt, dims...)}
}

// NewModel wraps g in a model of IR version 8 importing the default domain
// at opset; callers add producer fields and metadata as they need.
func NewModel(g *onnxpb.GraphProto, opset int64) *Model {
	ir, domain := int64(8), ""
	return &Model{Proto: &onnxpb.ModelProto{
		IrVersion:   &ir,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: &domain, Version: &opset}},
		Graph:       g,
	}}
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

// FloatsAttr returns a FLOATS attribute, for nodes built in code.
func FloatsAttr(name string, v ...float32) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_FLOATS
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, Floats: append([]float32(nil), v...)}
}

// TensorAttr returns a TENSOR attribute (a Constant's or ConstantOfShape's
// value), for nodes built in code.
func TensorAttr(name string, t *onnxpb.TensorProto) *onnxpb.AttributeProto {
	ty := onnxpb.AttributeProto_TENSOR
	return &onnxpb.AttributeProto{Name: &name, Type: &ty, T: t}
}
