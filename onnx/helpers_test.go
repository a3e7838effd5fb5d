package onnx

import (
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

func str(s string) *string { return &s }
func i64(v int64) *int64   { return &v }
func i32(v int32) *int32   { return &v }

// tensorType builds a tensor TypeProto; dims are int (a size), string (a
// symbolic name) or nil (unknown).
func tensorType(elem onnxpb.TensorProto_DataType, dims ...any) *onnxpb.TypeProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch v := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(v)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: v}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: i32(int32(elem)), Shape: shape}}}
}

func valueInfo(name string, typ *onnxpb.TypeProto) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{Name: str(name), Type: typ}
}

func node(name, op string, inputs, outputs []string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: str(name), OpType: str(op), Input: inputs, Output: outputs}
}

// tinyModel computes y = Relu(x + c) * w for x of shape [N, 3].
func tinyModel() *Model {
	return &Model{Proto: &onnxpb.ModelProto{
		IrVersion:       i64(8),
		ProducerName:    str("segtune-test"),
		ProducerVersion: str("1"),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: str(""), Version: i64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: str("tiny"),
			Node: []*onnxpb.NodeProto{
				node("add", "Add", []string{"x", "c"}, []string{"s"}),
				node("relu", "Relu", []string{"s"}, []string{"r"}),
				node("mul", "Mul", []string{"r", "w"}, []string{"y"}),
			},
			Initializer: []*onnxpb.TensorProto{
				NewFloat32Tensor("c", []int64{3}, []float32{1, -2, 3}),
				NewFloat32Tensor("w", []int64{3}, []float32{0.5, 0.25, 2}),
			},
			Input:  []*onnxpb.ValueInfoProto{valueInfo("x", tensorType(onnxpb.TensorProto_FLOAT, "N", 3))},
			Output: []*onnxpb.ValueInfoProto{valueInfo("y", tensorType(onnxpb.TensorProto_FLOAT, "N", 3))},
		},
	}}
}

func marshal(t testing.TB, m *Model) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// saveTo writes m to name in a fresh temporary folder and returns the path.
func saveTo(t *testing.T, m *Model, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}
