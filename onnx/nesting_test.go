package onnx

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func nestedModel(depth int) []byte {
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	f32 := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: str(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}}}}}}}}
	}
	// innermost: Identity of outer x
	g := &onnxpb.GraphProto{Name: str("g0"), Node: []*onnxpb.NodeProto{{OpType: str("Identity"), Input: []string{"x"}, Output: []string{"y0"}}}, Output: []*onnxpb.ValueInfoProto{vi("y0")}}
	for i := 1; i <= depth; i++ {
		out := "y" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		node := &onnxpb.NodeProto{OpType: str("If"), Input: []string{"c"}, Output: []string{out}, Attribute: []*onnxpb.AttributeProto{
			{Name: str("then_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g},
			{Name: str("else_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: &onnxpb.GraphProto{Name: str("e"), Node: []*onnxpb.NodeProto{{OpType: str("Identity"), Input: []string{"x"}, Output: []string{"e" + out}}}, Output: []*onnxpb.ValueInfoProto{vi("e" + out)}}},
		}}
		g = &onnxpb.GraphProto{Name: str("g"), Node: []*onnxpb.NodeProto{node}, Output: []*onnxpb.ValueInfoProto{vi(out)}}
	}
	g.Input = []*onnxpb.ValueInfoProto{vi("x")}
	b := int32(onnxpb.TensorProto_BOOL)
	g.Input = append(g.Input, &onnxpb.ValueInfoProto{Name: str("c"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &b, Shape: &onnxpb.TensorShapeProto{}}}}})
	m := &onnxpb.ModelProto{IrVersion: i64(8), OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: str(""), Version: i64(17)}}, Graph: g}
	data, _ := proto.Marshal(m)
	return data
}

// ONNX Runtime says only "protobuf parsing failed" for deeply nested
// graphs: Parse refuses them first, with the reason.
func TestDeepNestingIsExplained(t *testing.T) {
	if _, err := Parse(nestedModel(5), ""); err != nil {
		t.Fatalf("shallow nesting: %v", err)
	}
	_, err := Parse(nestedModel(40), "")
	if err == nil || !strings.Contains(err.Error(), "more than the 100 levels") {
		t.Fatalf("err = %v", err)
	}
	// The limit is ONNX Runtime's: it refuses what Parse refuses, and opens
	// what Parse accepts.
	runtimetest.Require(t)
	s, err := runtime.NewSession(nestedModel(5), runtime.Options{Threads: 1})
	if err != nil {
		t.Fatalf("shallow nesting in ONNX Runtime: %v", err)
	}
	s.Close()
	if _, err := runtime.NewSession(nestedModel(40), runtime.Options{Threads: 1}); err == nil || !strings.Contains(err.Error(), "protobuf parsing failed") {
		t.Fatalf("ONNX Runtime on 40 nested Ifs: %v", err)
	}
}
