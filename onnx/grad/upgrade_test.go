package grad_test

import (
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestUpgradeReductionsOffTheGradientPath: a reduction no gradient flows
// through (here of the data input) stays in the training graph, which is
// stamped with opset 18; its pre-18 axes attribute must have become an
// input, or ONNX Runtime refuses the graph.
func TestUpgradeReductionsOffTheGradientPath(t *testing.T) {
	runtimetest.Require(t)
	for _, op := range []string{"ReduceMax", "ReduceMin", "ReduceMean", "ReduceL2", "ReduceProd", "ReduceSumSquare", "ReduceLogSumExp"} {
		t.Run(op, func(t *testing.T) {
			f32 := onnx.Float32
			b := &onnx.Builder{}
			b.Initializer(onnx.NewFloat32Tensor("w", []int64{1, 3}, []float32{0.5, -1, 2}))
			b.Node(op, "r", []string{"x"}, onnx.IntsAttr("axes", 1), onnx.IntAttr("keepdims", 1))
			b.Node("Mul", "wx", []string{"w", "x"})
			b.Node("Add", "y", []string{"wx", "r"})
			m := onnx.NewModel(b.Graph("t", []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", f32, 2, 3)},
				[]*onnx.ValueInfoProto{onnx.TensorValueInfo("y", f32, 2, 3)}), 13)
			gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"w"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"y"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*onnx.Model{gs.Training, gs.Eval} {
				data, err := g.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
				if err != nil {
					t.Fatalf("ONNX Runtime refuses the compiled graph: %v", err)
				}
				s.Close()
			}
		})
	}
}
