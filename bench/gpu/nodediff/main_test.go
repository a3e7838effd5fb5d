package main

import (
	"math"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"google.golang.org/protobuf/proto"
)

// TestCompare checks errors and amplification on a two-node chain whose
// second node turns a 1e-6 input error into a 1e-3 output error.
func TestCompare(t *testing.T) {
	node := func(op, in, out string) *onnx.NodeProto {
		return &onnx.NodeProto{OpType: proto.String(op), Name: proto.String(op), Input: []string{in}, Output: []string{out}}
	}
	nodes := []*onnx.NodeProto{node("A", "x", "a"), node("B", "a", "b")}
	f := func(v ...float32) *runtime.Tensor { return runtime.NewFloat32([]int64{int64(len(v))}, v) }
	ref := map[string]*runtime.Tensor{"a": f(1, 0), "b": f(0, 2)}
	dev := map[string]*runtime.Tensor{"a": f(1+1e-6, 0), "b": f(0, 2+2e-3)}
	rows := compare(nodes, ref, dev)
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.05*want }
	if !near(rows[0].RelErr, 1e-6) || rows[0].InErr != 0 || !near(rows[0].Amp, 1e-6/ampFloor) {
		t.Errorf("row 0: %+v", rows[0])
	}
	if !near(rows[1].RelErr, 1e-3) || !near(rows[1].InErr, 1e-6) || !near(rows[1].Amp, 1e3) || !near(rows[1].MaxAbs, 2e-3) {
		t.Errorf("row 1: %+v", rows[1])
	}
	if r, _, note := diff(f(float32(math.NaN())), f(1)); !math.IsInf(r, 1) || note == "" {
		t.Errorf("NaN: %v %q", r, note)
	}
}
