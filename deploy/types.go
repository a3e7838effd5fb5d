package deploy

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
)

// typeNumbers maps runtime's element type names back to ONNX types.
var typeNumbers = map[string]onnx.DataType{
	"float32": onnx.Float32, "float64": onnx.Float64, "float16": onnx.Float16,
	"bfloat16": onnx.BFloat16, "int64": onnx.Int64, "int32": onnx.Int32,
	"int16": onnx.Int16, "int8": onnx.Int8, "uint8": onnx.Uint8,
	"uint16": onnx.Uint16, "uint32": onnx.Uint32, "uint64": onnx.Uint64,
	"bool": onnx.Bool, "string": onnx.String,
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
		types[t.GetName()] = onnx.DataType(t.GetDataType())
	}
	listed := map[string]bool{}
	for _, v := range g.GetInput() {
		if tt := v.GetType().GetTensorType(); tt != nil {
			if _, init := types[v.GetName()]; !init {
				types[v.GetName()] = onnx.DataType(tt.GetElemType())
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
				g.Output = append(g.Output, &onnx.ValueInfoProto{Name: proto.String(o)})
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
			dt = onnx.Undefined
		}
		types[o.Name] = dt
	}
	return types, nil
}
