package quantize

import (
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// tinyNet is X[1,3,8,8] → Conv(3×3, 4 channels, bias) → Relu →
// Conv(1×1, 2 channels, bias) → Y, at the given opset, with the element
// types ONNX Runtime would report.
func tinyNet(opset int64) (*onnx.Model, ElemTypes) {
	r := rand.New(rand.NewPCG(7, 9))
	rnd := func(n int, s float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = (r.Float32()*2 - 1) * s
		}
		return out
	}
	// Channel 3 of the first Conv is 100× smaller: per-channel scales matter.
	w1 := rnd(4*3*3*3, 0.5)
	for i := 3 * 27; i < 4*27; i++ {
		w1[i] /= 100
	}
	f := onnx.Float32
	g := &onnx.GraphProto{
		Name:   proto.String("tiny"),
		Input:  []*onnx.ValueInfoProto{onnx.TensorValueInfo("X", f, 1, 3, 8, 8)},
		Output: []*onnx.ValueInfoProto{onnx.TensorValueInfo("Y", f, 1, 2, 8, 8)},
		Initializer: []*onnx.TensorProto{
			onnx.NewFloat32Tensor("W1", []int64{4, 3, 3, 3}, w1),
			onnx.NewFloat32Tensor("B1", []int64{4}, rnd(4, 0.1)),
			onnx.NewFloat32Tensor("W2", []int64{2, 4, 1, 1}, rnd(8, 1)),
			onnx.NewFloat32Tensor("B2", []int64{2}, rnd(2, 0.1)),
		},
		Node: []*onnx.NodeProto{
			node("Conv", "conv1", []string{"X", "W1", "B1"}, []string{"c1"}, onnx.IntsAttr("pads", 1, 1, 1, 1)),
			node("Relu", "relu1", []string{"c1"}, []string{"r1"}),
			node("Conv", "conv2", []string{"r1", "W2", "B2"}, []string{"Y"}),
		},
	}
	m := &onnx.Model{Proto: &onnx.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnx.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:       g,
	}}
	types := ElemTypes{}
	for _, n := range []string{"X", "W1", "B1", "W2", "B2", "c1", "r1", "Y"} {
		types[n] = f
	}
	return m, types
}

// ops counts a graph's nodes by op type.
func ops(g *onnx.GraphProto) map[string]int {
	out := map[string]int{}
	for _, n := range g.GetNode() {
		out[n.GetOpType()]++
	}
	return out
}

// producer returns the node writing name, or nil.
func producer(g *onnx.GraphProto, name string) *onnx.NodeProto {
	return onnx.Producers(g)[name]
}

func initializer(g *onnx.GraphProto, name string) *onnx.TensorProto {
	return initializers(g)[name]
}
