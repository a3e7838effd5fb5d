package deploy

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
)

// A sigmoid head converted to float16 ends in Cast(Sigmoid): the contract
// still reads a sigmoid head with the same classes, so the export check
// accepts it.
func TestFloat16KeepsSigmoidContract(t *testing.T) {
	f := onnx.Float32
	g := &onnx.GraphProto{
		Name:        proto.String("sig"),
		Input:       []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", f, 1, 3, 8, 8)},
		Output:      []*onnx.ValueInfoProto{onnx.TensorValueInfo("probs", f, 1, 2, 8, 8)},
		Initializer: []*onnx.TensorProto{onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, []float32{1, 0, 0, 0, 1, 0})},
		Node: []*onnx.NodeProto{
			{OpType: proto.String("Conv"), Input: []string{"x", "w"}, Output: []string{"z"}},
			{OpType: proto.String("Sigmoid"), Name: proto.String("head"), Input: []string{"z"}, Output: []string{"probs"}},
		},
	}
	m := &onnx.Model{Proto: &onnx.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnx.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}}}
	types := quantize.ElemTypes{"x": f, "w": f, "z": f, "probs": f}
	h, sum, err := quantize.ToFloat16(m, types, quantize.Float16Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Float16Nodes["Sigmoid"] != 1 || onnx.Producers(h.Graph())["probs"].GetOpType() != "Cast" {
		t.Fatalf("the Sigmoid is not float16 behind a Cast: %+v", sum)
	}
	a, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := contract.Read(h, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind != contract.Sigmoid || sameContract(a, b) != nil {
		t.Errorf("float16 contract %+v, float32 %+v", b, a)
	}
	c := *b
	c.Classes, c.InputLayout = a.Classes+2, contract.NHWC
	want := fmt.Sprintf("contract differs from the float model's: input layout NHWC, want %s; classes %d, want %d", a.InputLayout, a.Classes+2, a.Classes)
	if err := sameContract(a, &c); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("a changed contract: %v; want it to end %q", err, want)
	}
}
