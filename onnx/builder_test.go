package onnx_test

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

func names[T interface{ GetName() string }](xs []T) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.GetName())
	}
	return out
}

// TestBuilderNames: Fresh counts up under the prefix and skips taken names;
// Node names the node and its output Name(name); Op names its outputs and
// node fresh; Emit uses names as given and drops nil attributes.
func TestBuilderNames(t *testing.T) {
	b := &onnx.Builder{Prefix: "p/", Taken: func(s string) bool { return s == "p/Add_2" }}
	if got := b.Fresh("x"); got != "p/x_1" {
		t.Errorf("Fresh = %q, want p/x_1", got)
	}
	y := b.Op1("Add", []string{"a", "b"}) // output p/Add_2 is taken
	if y != "p/Add_3" {
		t.Errorf("Op1 output %q, want p/Add_3 (p/Add_2 is taken)", y)
	}
	outs := b.Op("Split", []string{y}, 2, onnx.IntAttr("axis", 0))
	if !slices.Equal(outs, []string{"p/Split_5", "p/Split_6"}) {
		t.Errorf("Op outputs %v", outs)
	}
	if got := b.Node("Relu", "r", []string{outs[0]}); got != "p/r" {
		t.Errorf("Node output %q, want p/r", got)
	}
	n := b.Emit("Identity", "as-is", []string{"p/r"}, []string{"out"}, nil, onnx.IntAttr("k", 1), nil)
	if len(n.Attribute) != 1 || n.Attribute[0].GetName() != "k" {
		t.Errorf("Emit kept attributes %v, want only k", n.Attribute)
	}
	want := []string{"p/node_Add_4", "p/node_Split_7", "p/r", "as-is"}
	if got := names(*b.Nodes); !slices.Equal(got, want) {
		t.Errorf("node names %v, want %v", got, want)
	}
	if got := (*b.Nodes)[2].Output; !slices.Equal(got, []string{"p/r"}) {
		t.Errorf("Node's outputs %v, want [p/r]", got)
	}
	// Emit copies its slices: the caller may reuse them.
	ins := []string{"a"}
	m := b.Emit("Neg", "neg", ins, []string{"z"})
	ins[0] = "changed"
	if m.Input[0] != "a" {
		t.Error("Emit kept the caller's input slice")
	}
}

// TestBuilderConstants: unnamed constants are shared by value (element
// type and shape included) up to 64 values; named ones are added once per
// name; float constants take the caller's element type.
func TestBuilderConstants(t *testing.T) {
	b := &onnx.Builder{Prefix: "c/"}
	one := b.ConstInt64("", []int64{1}, 1)
	if again := b.ConstInt64("", []int64{1}, 1); again != one {
		t.Errorf("the same int64 constant got two initializers, %q and %q", one, again)
	}
	if scalar := b.ConstInt64("", nil, 1); scalar == one {
		t.Error("a scalar 1 shares the initializer of the vector [1]")
	}
	f := b.ConstFloat("", onnxpb.TensorProto_FLOAT, nil, 1)
	d := b.ConstFloat("", onnxpb.TensorProto_DOUBLE, nil, 1)
	if f == d || f == one {
		t.Errorf("FLOAT %q, DOUBLE %q and INT64 %q constants of value 1 must differ", f, d, one)
	}
	big := make([]int64, 65)
	first := b.ConstInt64("", []int64{65}, big...)
	if b.ConstInt64("", []int64{65}, big...) == first {
		t.Error("constants of more than 64 values are shared")
	}
	k := b.ConstInt64("k", []int64{1}, 7)
	if k != "c/k" || b.ConstInt64("k", []int64{1}, 7) != k {
		t.Errorf("named constant %q, want c/k once", k)
	}
	if b.ConstInt64("", []int64{1}, 7) == k {
		t.Error("an unnamed constant reuses a named one") // named ones are keyed by name only
	}
	inits := *b.Inits
	if len(inits) != 8 {
		t.Fatalf("%d initializers %v, want 8", len(inits), names(inits))
	}
	types := map[string]int32{}
	for _, x := range inits {
		types[x.GetName()] = x.GetDataType()
	}
	if types[f] != int32(onnxpb.TensorProto_FLOAT) || types[d] != int32(onnxpb.TensorProto_DOUBLE) || types[one] != int32(onnxpb.TensorProto_INT64) {
		t.Errorf("element types %v", types)
	}
	if v, err := onnx.Float64s(inits[slices.IndexFunc(inits, func(x *onnxpb.TensorProto) bool { return x.GetName() == d })]); err != nil || !slices.Equal(v, []float64{1}) {
		t.Errorf("DOUBLE constant holds %v (%v)", v, err)
	}
}

// TestBuilderCallerSlices: with Nodes and Inits pointing at a graph, the
// builder appends there, and the caller may reset the slices between calls.
func TestBuilderCallerSlices(t *testing.T) {
	g := &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{{Name: new(string)}}}
	b := &onnx.Builder{Nodes: &g.Node, Inits: &g.Initializer}
	b.Node("Relu", "r", []string{b.ConstFloat("x", onnxpb.TensorProto_FLOAT, nil, -1)})
	if len(g.Node) != 2 || len(g.Initializer) != 1 {
		t.Fatalf("graph has %d nodes and %d initializers, want 2 and 1", len(g.Node), len(g.Initializer))
	}
	g.Node = nil
	b.Node("Neg", "n", []string{"r"})
	if got := b.Graph("g", nil, nil); len(got.Node) != 1 || got.Node[0].GetName() != "n" || len(got.Initializer) != 1 {
		t.Errorf("after a reset the builder's graph has nodes %v, initializers %v", names(got.Node), names(got.Initializer))
	}
	var own onnx.Builder // the zero Builder has slices of its own
	own.Node("Relu", "r", []string{"x"})
	if g := own.Graph("own", nil, nil); g.GetName() != "own" || len(g.Node) != 1 || g.Initializer != nil {
		t.Errorf("zero Builder's graph: %v", g)
	}
}

// TestTensorTypeDims: sizes, names and unknown dims; anything else panics.
func TestTensorTypeDims(t *testing.T) {
	v := onnx.SymbolicValueInfo("x", onnxpb.TensorProto_FLOAT, 2, int64(3), "N", nil)
	dims := v.GetType().GetTensorType().GetShape().GetDim()
	if len(dims) != 4 || dims[0].GetDimValue() != 2 || dims[1].GetDimValue() != 3 || dims[2].GetDimParam() != "N" ||
		dims[3].GetValue() != nil {
		t.Errorf("dims %v", dims)
	}
	s := onnx.TensorValueInfo("y", onnxpb.TensorProto_INT64, 4, 5).GetType().GetTensorType()
	if s.GetElemType() != int32(onnxpb.TensorProto_INT64) || len(s.GetShape().GetDim()) != 2 || s.GetShape().GetDim()[1].GetDimValue() != 5 {
		t.Errorf("TensorValueInfo type %v", s)
	}
	defer func() {
		if recover() == nil {
			t.Error("a float dimension did not panic")
		}
	}()
	onnx.TensorType(onnxpb.TensorProto_FLOAT, 2.5)
}
