package onnx

import "github.com/segtune/segtune/onnx/onnxpb"

// The ONNX message types under the names the ONNX specification gives
// them, so that packages building or editing graphs need not import the
// generated code in onnx/onnxpb. They are aliases: a *NodeProto is an
// *onnxpb.NodeProto.
type (
	ModelProto             = onnxpb.ModelProto
	GraphProto             = onnxpb.GraphProto
	NodeProto              = onnxpb.NodeProto
	TensorProto            = onnxpb.TensorProto
	AttributeProto         = onnxpb.AttributeProto
	ValueInfoProto         = onnxpb.ValueInfoProto
	TypeProto              = onnxpb.TypeProto
	TensorShapeProto       = onnxpb.TensorShapeProto
	OperatorSetIdProto     = onnxpb.OperatorSetIdProto
	StringStringEntryProto = onnxpb.StringStringEntryProto
	SparseTensorProto      = onnxpb.SparseTensorProto

	// TensorTypeProto is TypeProto.Tensor: a tensor's element type and shape.
	TensorTypeProto = onnxpb.TypeProto_Tensor
	// TensorTypeValue wraps a TensorTypeProto as a TypeProto's Value.
	TensorTypeValue = onnxpb.TypeProto_TensorType
	// Dimension is one dimension of a TensorShapeProto, whose Value is a
	// DimValue (a size) or a DimParam (a symbolic name).
	Dimension = onnxpb.TensorShapeProto_Dimension
	DimValue  = onnxpb.TensorShapeProto_Dimension_DimValue
	DimParam  = onnxpb.TensorShapeProto_Dimension_DimParam
)

// DataType is a tensor's element type (TensorProto.DataType); its String
// method gives the specification's name ("FLOAT"), DataTypeName the short
// one ("float32").
type DataType = onnxpb.TensorProto_DataType

// The element types, named as DataTypeName names them.
const (
	Undefined  = onnxpb.TensorProto_UNDEFINED
	Float32    = onnxpb.TensorProto_FLOAT
	Uint8      = onnxpb.TensorProto_UINT8
	Int8       = onnxpb.TensorProto_INT8
	Uint16     = onnxpb.TensorProto_UINT16
	Int16      = onnxpb.TensorProto_INT16
	Int32      = onnxpb.TensorProto_INT32
	Int64      = onnxpb.TensorProto_INT64
	String     = onnxpb.TensorProto_STRING
	Bool       = onnxpb.TensorProto_BOOL
	Float16    = onnxpb.TensorProto_FLOAT16
	Float64    = onnxpb.TensorProto_DOUBLE
	Uint32     = onnxpb.TensorProto_UINT32
	Uint64     = onnxpb.TensorProto_UINT64
	Complex64  = onnxpb.TensorProto_COMPLEX64
	Complex128 = onnxpb.TensorProto_COMPLEX128
	BFloat16   = onnxpb.TensorProto_BFLOAT16
)

// AttributeType is an attribute's kind (AttributeProto.Type).
type AttributeType = onnxpb.AttributeProto_AttributeType

// The attribute kinds.
const (
	AttributeFloat   = onnxpb.AttributeProto_FLOAT
	AttributeInt     = onnxpb.AttributeProto_INT
	AttributeString  = onnxpb.AttributeProto_STRING
	AttributeTensor  = onnxpb.AttributeProto_TENSOR
	AttributeGraph   = onnxpb.AttributeProto_GRAPH
	AttributeFloats  = onnxpb.AttributeProto_FLOATS
	AttributeInts    = onnxpb.AttributeProto_INTS
	AttributeStrings = onnxpb.AttributeProto_STRINGS
)

// External is TensorProto.DataLocation's value for data kept in a file
// beside the model.
const External = onnxpb.TensorProto_EXTERNAL
