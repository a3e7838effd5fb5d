package onnx

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

func summaryModel() *Model {
	m := ifModel()
	m.Path = "tiny.onnx"
	g := m.Graph()
	g.Initializer = append(g.Initializer,
		typedTensor(onnxpb.TensorProto_FLOAT16, []float64{1, 2, 3, 4}), // 4 params, 8 bytes
		NewInt64Tensor("shape", []int64{2}, []int64{1, 3}),             // not a parameter
	)
	g.Node = append(g.Node, &onnxpb.NodeProto{OpType: str("FusedConv"), Domain: str("com.microsoft")})
	unknown := &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: i32(1)}}}
	g.Input = append(g.Input, valueInfo("any", unknown), valueInfo("img", TensorType(onnxpb.TensorProto_UINT8, 1, nil, -1, "W")))
	g.Output = append(g.Output, valueInfo("seq", &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{
		SequenceType: &onnxpb.TypeProto_Sequence{ElemType: TensorType(onnxpb.TensorProto_INT64)}}}))
	return m
}

func TestSummary(t *testing.T) {
	s := summaryModel().Summary()
	if s.IRVersion != 8 || s.ProducerName != "segtune-test" || s.ProducerVersion != "1" || s.Graph != "tiny" {
		t.Errorf("header fields wrong: %+v", s)
	}
	if len(s.Opsets) != 1 || s.Opsets[0] != (Opset{"", 17}) {
		t.Errorf("opsets = %v", s.Opsets)
	}
	if s.Nodes != 9 {
		t.Errorf("nodes = %d, want 9 (6 in the main graph, 3 in subgraphs)", s.Nodes)
	}
	if s.Ops[0] != (OpStat{"Mul", 2}) || s.Ops[1] != (OpStat{"Add", 1}) {
		t.Errorf("op histogram not sorted by count then name: %v", s.Ops)
	}
	found := false
	for _, o := range s.Ops {
		found = found || o.Op == "com.microsoft.FusedConv"
	}
	if !found {
		t.Errorf("domain-qualified op missing: %v", s.Ops)
	}
	if s.Initializers != 4 || s.InitializerBytes != 12+12+8+16 {
		t.Errorf("initializers = %d (%d bytes)", s.Initializers, s.InitializerBytes)
	}
	if s.Parameters != 3+3+4 || s.ParameterBytes != 12+12+8 {
		t.Errorf("parameters = %d (%d bytes)", s.Parameters, s.ParameterBytes)
	}
	ins := map[string]string{}
	for _, v := range s.Inputs {
		ins[v.Name] = v.Type + shapeString(v.Dims)
	}
	for name, want := range map[string]string{"x": "float32[N, 3]", "any": "float32?", "img": "uint8[1, ?, ?, W]"} {
		if ins[name] != want {
			t.Errorf("input %s = %q, want %q", name, ins[name], want)
		}
	}
	if o := s.Outputs[1]; o.Type != "sequence<int64>" || o.Dims != nil {
		t.Errorf("sequence output = %+v", o)
	}
}

func TestSummaryJSON(t *testing.T) {
	b, err := json.Marshal(summaryModel().Summary())
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"path", "ir_version", "opsets", "producer_name", "inputs", "outputs", "nodes", "ops", "parameters", "parameter_bytes", "initializer_bytes"} {
		if _, ok := back[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, b)
		}
	}
	if !strings.Contains(string(b), `{"name":"x","type":"float32","dims":["N","3"]}`) {
		t.Errorf("input x not encoded as expected: %s", b)
	}
	// An empty model still gives arrays, not nulls, for list fields.
	b, _ = json.Marshal((&Model{Proto: &onnxpb.ModelProto{}}).Summary())
	if strings.Contains(string(b), `"inputs":null`) || strings.Contains(string(b), `"ops":null`) || strings.Contains(string(b), `"opsets":null`) {
		t.Errorf("empty model: %s", b)
	}
}

func TestSummaryText(t *testing.T) {
	text := summaryModel().Summary().String()
	for _, want := range []string{
		"path          tiny.onnx\n",
		"opsets        ai.onnx 17\n",
		"parameters    10 (32 B)\n",
		"input   x     float32          [N, 3]\n",
		"output  seq   sequence<int64>  ?\n",
		"Mul                      2\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if got := groupDigits(1234567); got != "1,234,567" {
		t.Errorf("groupDigits = %s", got)
	}
	if got := groupDigits(-1000); got != "-1,000" {
		t.Errorf("groupDigits(-1000) = %s", got)
	}
	if got := humanBytes(9 << 20); got != "9.0 MiB" {
		t.Errorf("humanBytes = %s", got)
	}
}

// TestSummaryTrainable: the trainable count follows the parameter rule (a
// MatMul weight and its Linear bias), not every float initializer (an eps).
func TestSummaryTrainable(t *testing.T) {
	b := &Builder{}
	b.Initializer(NewFloat32Tensor("W", []int64{3, 4}, make([]float32, 12)))
	b.Initializer(NewFloat32Tensor("bias", []int64{4}, make([]float32, 4)))
	b.Initializer(NewFloat32Tensor("eps", []int64{1}, []float32{1e-5}))
	b.Emit("MatMul", "fc", []string{"x", "W"}, []string{"m"})
	b.Emit("Add", "fc_bias", []string{"m", "bias"}, []string{"y"})
	b.Emit("Add", "eps", []string{"y", "eps"}, []string{"z"})
	s := NewModel(b.Graph("linear", nil, nil), 17).Summary()
	if s.Parameters != 17 || s.Trainable != 16 || s.TrainableTensors != 2 {
		t.Errorf("parameters %d, trainable %d in %d tensors; want 17, 16 in 2", s.Parameters, s.Trainable, s.TrainableTensors)
	}
	if text := s.String(); !strings.Contains(text, "trainable     16 in 2 tensors\n") {
		t.Errorf("text lacks the trainable line:\n%s", text)
	}
}
