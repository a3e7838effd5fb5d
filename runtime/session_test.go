package runtime

import (
	"reflect"
	"testing"

	"github.com/segtune/segtune/internal/testassets/skip"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// addModel builds y = x + c for a float32 [2,3] input in memory.
func addModel(t *testing.T) []byte {
	t.Helper()
	g := &onnx.Builder{}
	c := g.ConstFloat("c", onnxpb.TensorProto_FLOAT, []int64{2, 3}, 1, 2, 3, 4, 5, 6)
	g.Node("Add", "y", []string{"x", c})
	m := onnx.NewModel(g.Graph("add",
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("x", onnxpb.TensorProto_FLOAT, 2, 3)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", onnxpb.TensorProto_FLOAT, 2, 3)}), 17)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func requireORT(t testing.TB) {
	t.Helper()
	if err := Init(""); err != nil {
		skip.OrFail(t, "ONNX Runtime not installed (%v)", err)
	}
}

func TestRunAdd(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(NewFloat32([]int64{2, 3}, []float32{10, 20, 30, 40, 50, 60}))
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{11, 22, 33, 44, 55, 66}
	for i, v := range out[0].Float32 {
		if v != want[i] {
			t.Fatalf("y[%d] = %v, want %v", i, v, want[i])
		}
	}
	if s.Device != DeviceCPU {
		t.Errorf("device = %q", s.Device)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Run(NewFloat32([]int64{2, 3}, make([]float32, 5))); err == nil {
		t.Error("short input accepted")
	}
	if _, err := s.Run(); err == nil {
		t.Error("missing input accepted")
	}
	if _, err := NewSession([]byte("not a model"), Options{}); err == nil {
		t.Error("garbage model accepted")
	}
	if _, err := NewSession(addModel(t), Options{Device: "tpu"}); err == nil {
		t.Error("unknown device accepted")
	}
}

// TestProtoIOInfosMatchORT: the graph-read inputs and outputs (used when
// ONNX Runtime's CPU provider cannot open the model) agree with ORT's.
func TestGraphIOMatchesORT(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, out, err := graphIO(addModel(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, s.Inputs) || !reflect.DeepEqual(out, s.Outputs) {
		t.Errorf("from the graph %+v %+v, from ORT %+v %+v", in, out, s.Inputs, s.Outputs)
	}
}

// TestRunInto: a given output tensor is filled in place, run after run.
func TestRunInto(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	y := NewFloat32([]int64{2, 3}, make([]float32, 6))
	for _, base := range []float32{10, 100} {
		x := NewFloat32([]int64{2, 3}, []float32{base, base, base, base, base, base})
		out, err := s.RunInto([]*Tensor{y}, x)
		if err != nil {
			t.Fatal(err)
		}
		if out[0] != y {
			t.Fatal("RunInto returned another tensor than the one given")
		}
		want := []float32{base + 1, base + 2, base + 3, base + 4, base + 5, base + 6}
		if !reflect.DeepEqual(y.Float32, want) {
			t.Errorf("got %v, want %v", y.Float32, want)
		}
	}
	if _, err := s.RunInto([]*Tensor{NewFloat32([]int64{3, 2}, make([]float32, 6))}, NewFloat32([]int64{2, 3}, make([]float32, 6))); err == nil {
		t.Error("an output of the wrong shape was accepted")
	}
}
