package runtime

import (
	"reflect"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// graphIO agrees with the onnx package's reading: initializers listed as
// inputs are not data inputs, symbolic dims read -1, element types are named.
func TestGraphIOReadsDataInputs(t *testing.T) {
	g := &onnx.Builder{}
	w := g.ConstFloat("w", onnxpb.TensorProto_FLOAT, []int64{1}, 2)
	g.Node("Mul", "y", []string{"x", w})
	g.Node("Cast", "n", []string{"k"}, onnx.IntAttr("to", int64(onnxpb.TensorProto_FLOAT)))
	x := onnx.TensorValueInfo("x", onnxpb.TensorProto_FLOAT, 1, 3, 4, 4)
	x.Type.GetTensorType().Shape.Dim[0] = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}}
	m := onnx.NewModel(g.Graph("g",
		[]*onnxpb.ValueInfoProto{x, onnx.TensorValueInfo("k", onnxpb.TensorProto_INT64, 2), onnx.TensorValueInfo(w, onnxpb.TensorProto_FLOAT, 1)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", onnxpb.TensorProto_FLOAT, 1, 3, 4, 4), onnx.TensorValueInfo("n", onnxpb.TensorProto_FLOAT, 2)}), 17)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	in, out, err := graphIO(data)
	if err != nil {
		t.Fatal(err)
	}
	wantIn := []IOInfo{{Name: "x", Shape: []int64{-1, 3, 4, 4}, Type: "float32"}, {Name: "k", Shape: []int64{2}, Type: "int64"}}
	wantOut := []IOInfo{{Name: "y", Shape: []int64{1, 3, 4, 4}, Type: "float32"}, {Name: "n", Shape: []int64{2}, Type: "float32"}}
	if !reflect.DeepEqual(in, wantIn) || !reflect.DeepEqual(out, wantOut) {
		t.Errorf("graphIO = %+v, %+v; want %+v, %+v", in, out, wantIn, wantOut)
	}
	if n := len(onnx.DataInputs(m.Graph())); n != len(in) {
		t.Errorf("onnx.DataInputs finds %d data inputs, graphIO %d", n, len(in))
	}
	// Every truncation of the model is refused or read, never a panic.
	for i := range data {
		graphIO(data[:i]) //nolint:errcheck // only the absence of a panic is checked
	}
	if _, _, err := graphIO([]byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("garbage read as a model")
	}
}
