package quantize

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxtest"
)

// headNet is tinyNet's Conv → Relu → Conv followed by a 2× Resize (scales
// an initializer) and a Softmax, with the Relu's output also a graph
// output.
func headNet() (*onnx.Model, ElemTypes) {
	m, types := tinyNet(13)
	g := m.Graph()
	g.Node[2].Output[0] = "logits"
	g.Initializer = append(g.Initializer, onnx.NewFloat32Tensor("scales", []int64{4}, []float32{1, 1, 2, 2}))
	g.Node = append(g.Node,
		node("Resize", "up", []string{"logits", "", "scales"}, []string{"up"}, onnx.StringAttr("mode", "linear")),
		node("Softmax", "softmax", []string{"up"}, []string{"Y"}, onnx.IntAttr("axis", 1)))
	g.Output = append(g.Output, onnx.TensorValueInfo("r1", onnx.Float32, 1, 4, 8, 8))
	g.ValueInfo = append(g.ValueInfo, onnx.TensorValueInfo("logits", onnx.Float32, 1, 2, 8, 8))
	for _, n := range []string{"logits", "scales", "up"} {
		types[n] = onnx.Float32
	}
	return m, types
}

func TestToFloat16(t *testing.T) {
	m, types := headNet()
	h, sum, err := ToFloat16(m, types, Float16Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := h.Graph()
	// The contract: inputs and outputs are float32 as before.
	for _, v := range append(append([]*onnx.ValueInfoProto{}, g.GetInput()...), g.GetOutput()...) {
		if v.GetType().GetTensorType().GetElemType() != int32(onnx.Float32) {
			t.Errorf("graph input/output %s changed type", v.GetName())
		}
	}
	if sum.Float16Nodes["Conv"] != 2 || sum.Float16Nodes["Relu"] != 1 || sum.Float16Nodes["Resize"] != 1 || sum.Float16Nodes["Softmax"] != 0 {
		t.Errorf("float16 nodes %v", sum.Float16Nodes)
	}
	// Weights are float16; Resize's scales stay float32 (the operator
	// takes float32 scales whatever its data type).
	for _, name := range []string{"W1", "B1", "W2", "B2"} {
		if tt := initializer(g, name); tt == nil || tt.GetDataType() != int32(onnx.Float16) {
			t.Errorf("%s is not float16", name)
		}
	}
	if initializer(g, "scales").GetDataType() != int32(onnx.Float32) {
		t.Error("Resize scales converted")
	}
	w16, _ := onnx.Float32s(initializer(g, "W1"))
	w32, _ := onnx.Float32s(initializer(m.Graph(), "W1"))
	for i := range w32 {
		if d := w16[i] - w32[i]; d > 1e-3 || d < -1e-3 {
			t.Fatalf("W1[%d] %v became %v", i, w32[i], w16[i])
		}
	}
	// Casts: X → float16 at the input, up → float32 before the Softmax,
	// the float16 Relu output → float32 for the graph output r1.
	cast := func(out string) *onnx.NodeProto {
		p := producer(g, out)
		if p == nil || p.GetOpType() != "Cast" {
			return nil
		}
		return p
	}
	conv1 := consumerOf(g, "W1")
	if c := cast(conv1.GetInput()[0]); c == nil || c.GetInput()[0] != "X" || attr(c, "to") != int64(onnx.Float16) {
		t.Errorf("conv1 reads %s, not a float16 Cast of X", conv1.GetInput()[0])
	}
	sm := producer(g, "Y")
	if sm.GetOpType() != "Softmax" {
		t.Fatalf("Y is produced by %s", sm.GetOpType())
	}
	if c := cast(sm.GetInput()[0]); c == nil || attr(c, "to") != int64(onnx.Float32) {
		t.Errorf("the Softmax reads %s, not a float32 Cast", sm.GetInput()[0])
	}
	if c := cast("r1"); c == nil || attr(c, "to") != int64(onnx.Float32) {
		t.Error("graph output r1 is not a float32 Cast of the float16 Relu")
	}
	if sum.Casts != 3 {
		t.Errorf("%d Casts, want 3", sum.Casts)
	}
	// value_info follows: logits is now float16.
	if vi := onnx.ValueInfo(g, "logits"); vi.GetType().GetTensorType().GetElemType() != int32(onnx.Float16) {
		t.Error("value_info of logits not updated")
	}
	if _, err := onnx.TopoSort(g); err != nil {
		t.Error(err)
	}
}

func TestToFloat16Keep(t *testing.T) {
	m, types := headNet()
	h, sum, err := ToFloat16(m, types, Float16Options{Keep: []string{"conv2", "Resize"}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Float16Nodes["Conv"] != 1 || sum.Float16Nodes["Resize"] != 0 {
		t.Errorf("float16 nodes %v", sum.Float16Nodes)
	}
	if initializer(h.Graph(), "W2").GetDataType() != int32(onnx.Float32) {
		t.Error("the kept Conv's weight was converted")
	}
	var kept []string
	for _, k := range sum.Float32Nodes {
		if k.Reason == KeptOnRequest {
			kept = append(kept, k.Op)
		}
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"Conv", "Resize"}) {
		t.Errorf("kept %v", kept)
	}
	_, _, err = ToFloat16(m, types, Float16Options{Keep: []string{"Sotfmax"}})
	var ke *UnmatchedKeepError
	if !errors.As(err, &ke) || !slices.Equal(ke.Names, []string{"Sotfmax"}) || !strings.Contains(err.Error(), "Sotfmax") {
		t.Errorf("a misspelt --keep-float entry: %v", err)
	}
}

func TestToFloat16RefusesSubgraphs(t *testing.T) {
	m, types := tinyNet(13)
	ty := onnx.AttributeGraph
	m.Graph().Node[1].Attribute = append(m.Graph().Node[1].Attribute,
		&onnx.AttributeProto{Name: proto.String("then_branch"), Type: &ty, G: &onnx.GraphProto{}})
	if _, _, err := ToFloat16(m, types, Float16Options{}); err == nil || !strings.Contains(err.Error(), "subgraph") {
		t.Errorf("subgraph: %v", err)
	}
}

func TestFloat16SaturatesLargeWeights(t *testing.T) {
	m, types := tinyNet(13)
	w := initializer(m.Graph(), "W2")
	vals, _ := onnx.Float32s(w)
	vals[0] = 1e6
	*w = *onnx.NewFloat32Tensor("W2", w.GetDims(), vals)
	h, sum, err := ToFloat16(m, types, Float16Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := onnx.Float32s(initializer(h.Graph(), "W2"))
	if sum.Saturated != 1 || got[0] != 65504 {
		t.Errorf("saturated %d, value %v", sum.Saturated, got[0])
	}
}

// TestToFloat16ReadsHalfWeightsAsStored: weights stored in float16 behind
// the model's own Casts to float32 are read by the float16 layers as
// stored, with no Cast back to float16 and the model's Cast gone; a
// widened weight that a float32 node reads too keeps its Cast for it.
func TestToFloat16ReadsHalfWeightsAsStored(t *testing.T) {
	m, types := tinyNet(13)
	g := m.Graph()
	for _, name := range []string{"W1", "B1", "W2"} {
		w := initializer(g, name)
		v, _ := onnx.Float32s(w)
		w.DataType = proto.Int32(int32(onnx.Float16))
		if err := onnx.SetFloat32s(w, v); err != nil {
			t.Fatal(err)
		}
		types[name], types[name+"_f32"] = onnx.Float16, onnx.Float32
		g.Node = append([]*onnx.NodeProto{node("Cast", name+"_cast", []string{name}, []string{name + "_f32"}, onnx.IntAttr("to", int64(onnx.Float32)))}, g.Node...)
		replaceInput(g, name, name+"_f32")
		g.Node[0].Input[0] = name
	}
	// W2's float32 form is a graph output as well: its Cast stays.
	g.Output = append(g.Output, onnx.TensorValueInfo("W2_f32", onnx.Float32, 2, 4, 1, 1))
	h, sum, err := ToFloat16(m, types, Float16Options{})
	if err != nil {
		t.Fatal(err)
	}
	hg := h.Graph()
	for name, conv := range map[string]string{"W1": "conv1", "B1": "conv1", "W2": "conv2"} {
		for _, n := range hg.GetNode() {
			if n.GetName() == conv && !slices.Contains(n.GetInput(), name) {
				t.Errorf("%s reads %v, want %s as stored", conv, n.GetInput(), name)
			}
		}
	}
	if producer(hg, "W1_f32") != nil || producer(hg, "B1_f32") != nil {
		t.Error("the model's Casts of W1 and B1 are left with nothing reading them")
	}
	if p := producer(hg, "W2_f32"); p == nil || p.GetOpType() != "Cast" {
		t.Error("the Cast making the graph output W2_f32 was dropped")
	}
	if sum.Casts != 2 { // X in, Y out
		t.Errorf("%d Casts added, want 2 (the input's and the output's)", sum.Casts)
	}
	if _, err := onnx.TopoSort(hg); err != nil {
		t.Error(err)
	}
}

// TestToFloat16CountsAFloat16ModelsOwn: a model that computes in float16
// already (its weights read in float16 between Casts of its input and
// output) is left as it is, and the summary counts its float16 operators
// rather than saying nothing is in float16.
func TestToFloat16CountsAFloat16ModelsOwn(t *testing.T) {
	m := onnxtest.Build(onnxtest.HalfGraph)
	types := ElemTypes{"input": onnx.Float32, "logits": onnx.Float32}
	for _, name := range []string{"x16", "w1", "b1", "h", "hr", "w2", "b2", "logits16"} {
		types[name] = onnx.Float16
	}
	h, sum, err := ToFloat16(m, types, Float16Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(sum.Float16Nodes, map[string]int{"Conv": 2, "Relu": 1}) || sum.Casts != 0 || sum.Initializers != 0 {
		t.Errorf("summary %+v; want Conv 2, Relu 1 in float16 and nothing changed", sum)
	}
	if len(h.Graph().GetNode()) != len(m.Graph().GetNode()) {
		t.Errorf("%d nodes, the model had %d", len(h.Graph().GetNode()), len(m.Graph().GetNode()))
	}
}
