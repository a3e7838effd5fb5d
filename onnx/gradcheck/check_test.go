package gradcheck_test

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/gradcheck"
	"github.com/segtune/segtune/onnx/onnxpb"
)

func randTensor(rng *rand.Rand, name string, dims ...int64) *onnxpb.TensorProto {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64()) * 0.5
	}
	return onnx.NewFloat32Tensor(name, dims, v)
}

func node(op string, ins []string, out string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(out), OpType: proto.String(op), Input: ins, Output: []string{out}, Attribute: attrs}
}

// convNet is input [2,3,8,8] → Conv → Relu → MaxPool → Conv → Clip(0, 6)
// → logits: kinks everywhere, linear in each weight between them.
func convNet() *onnx.Model {
	rng := rand.New(rand.NewPCG(1, 2))
	g := &onnxpb.GraphProto{
		Name: proto.String("net"),
		Node: []*onnxpb.NodeProto{
			node("Conv", []string{"input", "w1", "b1"}, "c1", onnx.IntsAttr("pads", 1, 1, 1, 1)),
			node("Relu", []string{"c1"}, "r1"),
			node("MaxPool", []string{"r1"}, "p1", onnx.IntsAttr("kernel_shape", 2, 2), onnx.IntsAttr("strides", 2, 2)),
			node("Conv", []string{"p1", "w2", "b2"}, "c2", onnx.IntsAttr("pads", 1, 1, 1, 1)),
			node("Clip", []string{"c2", "lo", "hi"}, "logits"),
		},
		Initializer: []*onnxpb.TensorProto{
			randTensor(rng, "w1", 6, 3, 3, 3), randTensor(rng, "b1", 6), randTensor(rng, "w2", 4, 6, 3, 3), randTensor(rng, "b2", 4),
			onnx.NewFloat32Tensor("lo", nil, []float32{0}), onnx.NewFloat32Tensor("hi", nil, []float32{6}),
		},
		Input:  []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("input", onnxpb.TensorProto_FLOAT, 2, 3, 8, 8)},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("logits")}},
	}
	return &onnx.Model{Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}}}
}

// smoothNet is input [4,5] → MatMul → Tanh → MatMul → logits: smooth,
// and every operator has double kernels, so checks run in float64.
func smoothNet() *onnx.Model {
	rng := rand.New(rand.NewPCG(3, 4))
	g := &onnxpb.GraphProto{
		Name: proto.String("smooth"),
		Node: []*onnxpb.NodeProto{
			node("MatMul", []string{"input", "w1"}, "h"),
			node("Tanh", []string{"h"}, "a"),
			node("MatMul", []string{"a", "w2"}, "logits"),
		},
		Initializer: []*onnxpb.TensorProto{randTensor(rng, "w1", 5, 6), randTensor(rng, "w2", 6, 3)},
		Input:       []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("input", onnxpb.TensorProto_FLOAT, 4, 5)},
		Output:      []*onnxpb.ValueInfoProto{{Name: proto.String("logits")}},
	}
	return &onnx.Model{Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}}}
}

// build compiles m for param with a random upstream gradient on logits.
func build(t *testing.T, m *onnx.Model, param string) *grad.Graphs {
	t.Helper()
	gs, err := grad.Build(m, grad.Config{Trainable: []string{param}, Loss: grad.Loss{Kind: grad.LossNone},
		GradInputs: []string{"logits"}, ExtraOutputs: []string{"logits"}})
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// scaleGrad multiplies the training graph's gradient output of param by k.
func scaleGrad(gs *grad.Graphs, param string, k float32) {
	g := gs.Training.Proto.Graph
	out := grad.GradPrefix + param
	for _, n := range g.Node {
		for j, o := range n.Output {
			if o == out {
				n.Output[j] = out + "/unscaled"
			}
		}
	}
	g.Initializer = append(g.Initializer, onnx.NewFloat32Tensor(out+"/k", nil, []float32{k}))
	g.Node = append(g.Node, node("Mul", []string{out + "/unscaled", out + "/k"}, out))
}

// TestCheckRejectsWrongGradients is the checker's negative control: the
// true gradient passes, and one scaled by 1.5 or with the wrong sign fails
// on every direction.
func TestCheckRejectsWrongGradients(t *testing.T) {
	testassets.RequireORT(t)
	for _, tc := range []struct {
		name   string
		m      *onnx.Model
		params []string
		opt    gradcheck.Options
	}{
		// Plain differences in float64 on a smooth network.
		{"smooth", smoothNet(), []string{"w1", "w2"}, gradcheck.Options{Seed: 4, Directions: 4}},
		// Frozen kinks in float32 on a ReLU/MaxPool/ReLU6 network.
		{"frozen", convNet(), []string{"w1", "w2"}, gradcheck.Options{Seed: 4, Directions: 4, FreezeKinks: true, Step: 1}},
	} {
		for _, param := range tc.params {
			for _, k := range []float32{1, 1.5, -1} {
				gs := build(t, tc.m, param)
				if k != 1 {
					scaleGrad(gs, param, k)
				}
				pass := k == 1
				res, err := gradcheck.CheckGraphs(gs, nil, tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range res.Directions {
					// 1.5× gives a relative error of 1/3, a flipped sign 2.
					if pass && d.RelErr > 1e-3 || !pass && d.RelErr < 0.3 {
						t.Errorf("%s %s, gradient × %g: analytic %g numeric %g relative error %.3g", tc.name, param, k, d.Analytic, d.Numeric, d.RelErr)
					}
				}
				t.Logf("RESULT %s %s ×%g float64=%v max_rel_err=%.2e", tc.name, param, k, res.Float64, res.MaxRelErr)
			}
		}
	}
}

// TestFreezeKinks: with a step as large as the weights, plain differences
// cross kinks and miss; frozen ones are exact up to float32 rounding.
func TestFreezeKinks(t *testing.T) {
	testassets.RequireORT(t)
	gs := build(t, convNet(), "w1")
	plain, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Seed: 4, Float32: true, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Seed: 4, Float32: true, Step: 1, FreezeKinks: true})
	if err != nil {
		t.Fatal(err)
	}
	if frozen.MaxRelErr > 1e-4 {
		t.Errorf("frozen kinks: max relative error %.3g > 1e-4", frozen.MaxRelErr)
	}
	if plain.MaxRelErr < 1e-2 {
		t.Errorf("plain differences at step 1: max relative error %.3g; the test no longer shows what freezing is for", plain.MaxRelErr)
	}
	t.Logf("RESULT step 1: plain %.2e, frozen %.2e", plain.MaxRelErr, frozen.MaxRelErr)
}
