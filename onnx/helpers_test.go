package onnx

import (
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

func str(s string) *string { return &s }
func i64(v int64) *int64   { return &v }
func i32(v int32) *int32   { return &v }

func valueInfo(name string, typ *onnxpb.TypeProto) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{Name: str(name), Type: typ}
}

// node is a node for a graph literal (subgraph bodies and the like).
func node(name, op string, inputs, outputs []string) *onnxpb.NodeProto {
	return new(Builder).Emit(op, name, inputs, outputs)
}

// tinyModel computes y = Relu(x + c) * w for x of shape [N, 3].
func tinyModel() *Model {
	b := &Builder{}
	c := b.Initializer(NewFloat32Tensor("c", []int64{3}, []float32{1, -2, 3}))
	w := b.Initializer(NewFloat32Tensor("w", []int64{3}, []float32{0.5, 0.25, 2}))
	b.Emit("Add", "add", []string{"x", c}, []string{"s"})
	b.Emit("Relu", "relu", []string{"s"}, []string{"r"})
	b.Emit("Mul", "mul", []string{"r", w}, []string{"y"})
	m := NewModel(b.Graph("tiny",
		[]*onnxpb.ValueInfoProto{SymbolicValueInfo("x", onnxpb.TensorProto_FLOAT, "N", 3)},
		[]*onnxpb.ValueInfoProto{SymbolicValueInfo("y", onnxpb.TensorProto_FLOAT, "N", 3)}), 17)
	m.Proto.ProducerName, m.Proto.ProducerVersion = str("segtune-test"), str("1")
	return m
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
