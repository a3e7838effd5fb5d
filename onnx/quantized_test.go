package onnx

import "testing"

func TestQuantized(t *testing.T) {
	var nodes []*NodeProto
	b := &Builder{Nodes: &nodes}
	b.Emit("DynamicQuantizeLinear", "q0", []string{"x"}, []string{"xq", "s", "z"})
	b.Emit("ConvInteger", "c0", []string{"xq", "w", "z"}, []string{"y0"})
	b.Emit("ConvInteger", "c1", []string{"y0", "w", "z"}, []string{"y1"})
	b.Emit("Relu", "r", []string{"y1"}, []string{"y"})
	q := Quantized(NewModel(b.Graph("g", nil, nil), 13))
	if got := q.String(); got != "ConvInteger ×2, DynamicQuantizeLinear ×1" {
		t.Errorf("Quantized = %q", got)
	}
	nodes = nodes[3:]
	if q := Quantized(NewModel(b.Graph("g", nil, nil), 13)); len(q) != 0 {
		t.Errorf("a float model: %v", q)
	}
}
