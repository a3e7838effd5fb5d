package onnx

import (
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

func names(nodes []*onnxpb.NodeProto) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.GetName()
	}
	return out
}

// ifModel has an If node whose branches read "r" (from the Relu before it)
// and "w" (an initializer) from the enclosing scope; the then-branch nests a
// Loop whose body reads "s" from two scopes out and defines "k" locally.
func ifModel() *Model {
	m := tinyModel()
	g := m.Graph()
	body := &onnxpb.GraphProto{
		Name:   str("body"),
		Input:  []*onnxpb.ValueInfoProto{valueInfo("i", nil), valueInfo("cond_in", nil)},
		Node:   []*onnxpb.NodeProto{node("k", "Identity", []string{"s"}, []string{"k"})},
		Output: []*onnxpb.ValueInfoProto{valueInfo("cond_in", nil), valueInfo("k", nil)},
	}
	thenG := &onnxpb.GraphProto{
		Name: str("then"),
		Node: []*onnxpb.NodeProto{
			node("t_mul", "Mul", []string{"r", "w"}, []string{"t"}),
			{Name: str("loop"), OpType: str("Loop"), Input: []string{"", "cond"}, Output: []string{"lk"},
				Attribute: []*onnxpb.AttributeProto{{Name: str("body"), G: body}}},
		},
		Output: []*onnxpb.ValueInfoProto{valueInfo("t", nil)},
	}
	elseG := &onnxpb.GraphProto{Name: str("else"), Output: []*onnxpb.ValueInfoProto{valueInfo("r", nil)}}
	ifNode := &onnxpb.NodeProto{Name: str("if"), OpType: str("If"), Input: []string{"cond"}, Output: []string{"z"},
		Attribute: []*onnxpb.AttributeProto{
			{Name: str("then_branch"), G: thenG},
			{Name: str("else_branch"), G: elseG},
		}}
	g.Node = append(g.Node, node("cond", "Constant", nil, []string{"cond"}), ifNode)
	return m
}

func TestProducersAndConsumers(t *testing.T) {
	g := ifModel().Graph()
	prod := Producers(g)
	for tensor, want := range map[string]string{"s": "add", "r": "relu", "y": "mul", "z": "if"} {
		if prod[tensor].GetName() != want {
			t.Errorf("producer of %s = %q, want %q", tensor, prod[tensor].GetName(), want)
		}
	}
	for _, absent := range []string{"x", "c", "t", "k"} {
		if prod[absent] != nil {
			t.Errorf("%s has producer %q; inputs, initializers and subgraph values have none", absent, prod[absent].GetName())
		}
	}
	cons := Consumers(g)
	want := map[string][]string{
		"x": {"add"}, "c": {"add"}, "s": {"relu", "if"}, "r": {"mul", "if"},
		"w": {"mul", "if"}, "cond": {"if"},
	}
	for tensor, w := range want {
		if got := names(cons[tensor]); !slices.Equal(got, w) {
			t.Errorf("consumers of %s = %v, want %v", tensor, got, w)
		}
	}
	for _, local := range []string{"t", "k", "i", "cond_in", "lk", ""} {
		if len(cons[local]) != 0 {
			t.Errorf("%q is local to a subgraph (or empty) but has consumers %v", local, names(cons[local]))
		}
	}
	if got := NodeInputs(g.Node[4]); !slices.Equal(got, []string{"cond", "r", "s", "w"}) {
		t.Errorf("NodeInputs(if) = %v", got)
	}
}

func TestTopoSort(t *testing.T) {
	m := ifModel()
	g := m.Graph()
	sorted, err := TopoSort(g)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(sorted), names(g.Node); !slices.Equal(got, want) {
		t.Errorf("sorted graph reordered: %v, want %v", got, want)
	}
	// Reverse the nodes: the If must still come after cond, add and relu,
	// though only its subgraphs read add's and relu's outputs.
	slices.Reverse(g.Node)
	sorted, err = TopoSort(g)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, n := range sorted {
		pos[n.GetName()] = i
	}
	for _, edge := range [][2]string{{"add", "relu"}, {"relu", "mul"}, {"cond", "if"}, {"relu", "if"}, {"add", "if"}} {
		if pos[edge[0]] > pos[edge[1]] {
			t.Errorf("%s sorted after %s: %v", edge[0], edge[1], names(sorted))
		}
	}
	// Among independent nodes graph order is kept: cond comes first after
	// the reversal and has no inputs.
	if sorted[0].GetName() != "cond" {
		t.Errorf("order not stable: %v", names(sorted))
	}
}

func TestTopoSortCycle(t *testing.T) {
	g := &onnxpb.GraphProto{Name: str("loopy"), Node: []*onnxpb.NodeProto{
		node("head", "Relu", []string{"x"}, []string{"a"}),
		node("tail", "Relu", []string{"d"}, []string{"e"}), // downstream of the cycle, not on it
		node("", "Add", []string{"a", "c"}, []string{"b"}),
		node("n3", "Relu", []string{"b"}, []string{"c"}),
		node("n4", "Relu", []string{"c"}, []string{"d"}),
	}}
	_, err := TopoSort(g)
	if err == nil {
		t.Fatal("cycle not detected")
	}
	msg := err.Error()
	for _, want := range []string{`"loopy"`, `node #2 (Add)`, `node "n3" (Relu)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %s", msg, want)
		}
	}
	for _, off := range []string{"head", "tail", "n4"} {
		if strings.Contains(msg, off) {
			t.Errorf("error %q names %s, which is not on the cycle", msg, off)
		}
	}

	self := &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{node("self", "Add", []string{"x", "y"}, []string{"y"})}}
	if _, err := TopoSort(self); err == nil || !strings.Contains(err.Error(), `"self"`) {
		t.Errorf("self loop: err = %v", err)
	}
	// A self loop reached from another unsorted node: only it is on the cycle.
	selfLate := &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{
		node("after", "Relu", []string{"y"}, []string{"z"}),
		node("self", "Add", []string{"x", "y"}, []string{"y"}),
	}}
	if _, err := TopoSort(selfLate); err == nil || !strings.Contains(err.Error(), `"self"`) || strings.Contains(err.Error(), "after") {
		t.Errorf("self loop behind another node: err = %v", err)
	}
	dup := &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{
		node("a", "Relu", []string{"x"}, []string{"y"}),
		node("b", "Relu", []string{"x"}, []string{"y"}),
	}}
	if _, err := TopoSort(dup); err == nil || !strings.Contains(err.Error(), "produced by both") {
		t.Errorf("duplicate producer: err = %v", err)
	}
	if order, err := TopoSort(nil); err != nil || len(order) != 0 {
		t.Errorf("nil graph: %v, %v", order, err)
	}
}

func TestDataInputsAndValueInfo(t *testing.T) {
	m := tinyModel()
	g := m.Graph()
	// Before IR 4 initializers were listed as inputs too.
	g.Input = append(g.Input, valueInfo("c", TensorType(onnxpb.TensorProto_FLOAT, 3)))
	g.ValueInfo = []*onnxpb.ValueInfoProto{valueInfo("s", TensorType(onnxpb.TensorProto_FLOAT, "N", 3))}
	in := DataInputs(g)
	if len(in) != 1 || in[0].GetName() != "x" {
		t.Errorf("DataInputs = %v", in)
	}
	for _, name := range []string{"x", "y", "s", "c"} {
		if ValueInfo(g, name).GetName() != name {
			t.Errorf("ValueInfo(%s) not found", name)
		}
	}
	if ValueInfo(g, "r") != nil {
		t.Error("ValueInfo(r) found info that is not there")
	}
}

func TestOpset(t *testing.T) {
	m := tinyModel()
	m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: str("com.microsoft"), Version: i64(1)})
	for domain, want := range map[string]int64{"": 17, "ai.onnx": 17, "com.microsoft": 1, "ai.onnx.ml": 0} {
		if got := m.Opset(domain); got != want {
			t.Errorf("Opset(%q) = %d, want %d", domain, got, want)
		}
	}
	m.Proto.OpsetImport[0].Domain = str("ai.onnx")
	if got := m.Opset(""); got != 17 {
		t.Errorf("Opset(\"\") with domain spelled ai.onnx = %d", got)
	}
}
