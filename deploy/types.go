package deploy

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
)

// typeNumbers maps runtime's element type names back to ONNX types.
var typeNumbers = map[string]onnxpb.TensorProto_DataType{
	"float32": onnxpb.TensorProto_FLOAT, "float64": onnxpb.TensorProto_DOUBLE, "float16": onnxpb.TensorProto_FLOAT16,
	"bfloat16": onnxpb.TensorProto_BFLOAT16, "int64": onnxpb.TensorProto_INT64, "int32": onnxpb.TensorProto_INT32,
	"int16": onnxpb.TensorProto_INT16, "int8": onnxpb.TensorProto_INT8, "uint8": onnxpb.TensorProto_UINT8,
	"uint16": onnxpb.TensorProto_UINT16, "uint32": onnxpb.TensorProto_UINT32, "uint64": onnxpb.TensorProto_UINT64,
	"bool": onnxpb.TensorProto_BOOL, "string": onnxpb.TensorProto_STRING,
}

// ElemTypes returns the element type of every tensor of m's main graph:
// initializers and inputs from the file, node outputs as ONNX Runtime
// infers them (the model is opened once with every node output listed as
// a graph output; nothing is run).
func ElemTypes(m *onnx.Model) (quantize.ElemTypes, error) {
	types := quantize.ElemTypes{}
	c := m.Clone()
	g := c.Graph()
	for _, t := range g.GetInitializer() {
		types[t.GetName()] = onnxpb.TensorProto_DataType(t.GetDataType())
	}
	listed := map[string]bool{}
	for _, v := range g.GetInput() {
		if tt := v.GetType().GetTensorType(); tt != nil {
			if _, init := types[v.GetName()]; !init {
				types[v.GetName()] = onnxpb.TensorProto_DataType(tt.GetElemType())
			}
		}
	}
	for _, v := range g.GetOutput() {
		listed[v.GetName()] = true
	}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			if o != "" && !listed[o] {
				listed[o] = true
				g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
			}
		}
	}
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	_, outs, err := runtime.ReadIO(data)
	if err != nil {
		return nil, fmt.Errorf("reading the element types of the model's tensors: %w", err)
	}
	for _, o := range outs {
		dt, ok := typeNumbers[o.Type]
		if !ok {
			dt = onnxpb.TensorProto_UNDEFINED
		}
		types[o.Name] = dt
	}
	return types, nil
}
