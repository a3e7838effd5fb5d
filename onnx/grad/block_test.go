package grad_test

import (
	"math"
	"regexp"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
)

// blockInput is the image the transformer block reads: [N, C, H, W].
var blockInput = []int64{2, 8, 3, 3}

// transformerBlock is a pre-norm transformer block on an image's pixels,
// as SegFormer's encoder writes it: tokens [N, HW, C], LayerNorm,
// two-head attention, a residual, LayerNorm, an MLP with GELU, a residual,
// then back to [N, C, H, W] logits (C classes). At opset 20 it uses the
// fused LayerNormalization, Gelu (tanh) and Einsum; at opset 13 what
// torch.onnx writes there: LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div, GELU
// through Erf, attention as MatMul with a transposed key. It returns the
// model and the names of its weights, biases and norm parameters.
func transformerBlock(opset int64) (*onnx.Model, []string) {
	const heads = 2
	n, c, h, w := blockInput[0], blockInput[1], blockInput[2], blockInput[3]
	tokens, d := h*w, c/heads
	m := newOpModel(opset)
	op := func(opType string, ins []string, attrs ...*onnx.AttributeProto) string {
		out := m.b.Fresh(opType)
		m.node(opType, ins, []string{out}, attrs...)
		return out
	}
	shape := func(dims ...int64) string { return m.ints(m.b.Fresh("shape"), []int64{int64(len(dims))}, dims...) }
	scalar := func(v float32) string { return m.floats(m.b.Fresh("k"), nil, v) }
	param := func(dims ...int64) string { return m.rand(m.b.Fresh("w"), dims...) }
	layerNorm := func(x string) string {
		scale, bias := param(c), param(c)
		if opset >= 17 {
			return op("LayerNormalization", []string{x, scale, bias}, ai("axis", -1), af("epsilon", 1e-5))
		}
		xc := op("Sub", []string{x, op("ReduceMean", []string{x}, ais("axes", -1))})
		v := op("ReduceMean", []string{op("Pow", []string{xc, scalar(2)})}, ais("axes", -1))
		xn := op("Div", []string{xc, op("Sqrt", []string{op("Add", []string{v, scalar(1e-5)})})})
		return op("Add", []string{op("Mul", []string{xn, scale}), bias})
	}
	linear := func(x string, in, out int64) string {
		return op("Add", []string{op("MatMul", []string{x, param(in, out)}), param(out)})
	}
	splitHeads := func(x string) string { // [N, T, C] → [N, heads, T, d]
		return op("Transpose", []string{op("Reshape", []string{x, shape(n, tokens, heads, d)})}, ais("perm", 0, 2, 1, 3))
	}
	gelu := func(x string) string {
		if opset >= 20 {
			return op("Gelu", []string{x}, as("approximate", "tanh"))
		}
		e := op("Erf", []string{op("Div", []string{x, scalar(math.Sqrt2)})})
		return op("Mul", []string{op("Mul", []string{x, op("Add", []string{e, scalar(1)})}), scalar(0.5)})
	}

	m.b.Node("Identity", "input", []string{"x"}) // keeps the graph input's name
	t := op("Transpose", []string{op("Reshape", []string{"x", shape(n, c, tokens)})}, ais("perm", 0, 2, 1))
	a := layerNorm(t)
	q, k, v := splitHeads(linear(a, c, c)), splitHeads(linear(a, c, c)), splitHeads(linear(a, c, c))
	var scores string
	if opset >= 17 {
		scores = op("Einsum", []string{q, k}, as("equation", "bhid,bhjd->bhij"))
	} else {
		scores = op("MatMul", []string{q, op("Transpose", []string{k}, ais("perm", 0, 1, 3, 2))})
	}
	attn := op("Softmax", []string{op("Mul", []string{scores, scalar(float32(1 / math.Sqrt(float64(d))))})}, ai("axis", -1))
	var o string
	if opset >= 17 {
		o = op("Einsum", []string{attn, v}, as("equation", "bhij,bhjd->bhid"))
	} else {
		o = op("MatMul", []string{attn, v})
	}
	o = op("Reshape", []string{op("Transpose", []string{o}, ais("perm", 0, 2, 1, 3)), shape(n, tokens, c)})
	r1 := op("Add", []string{t, linear(o, c, c)})
	r2 := op("Add", []string{r1, linear(gelu(linear(layerNorm(r1), c, 2*c)), 2*c, c)})
	m.node("Reshape", []string{op("Transpose", []string{r2}, ais("perm", 0, 2, 1)), shape(n, c, h, w)}, []string{"logits"})
	m.outs = []string{"logits"}
	md := m.model()
	md.Proto.Graph.Node = md.Proto.Graph.Node[1:] // drop the Identity: x is the graph input
	md.Proto.Graph.Input = []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", onnx.Float32, blockInput...)}
	md.Proto.Graph.Output[0].Type = onnx.TensorValueInfo("logits", onnx.Float32, blockInput...).Type
	md.Proto.Graph.Output[0].Name = proto.String("logits")
	return md, m.params
}

// TestTransformerBlockGradients checks every parameter gradient of the
// transformer block, trained with the cross-entropy loss, at the opset with
// the fused operators and at the opset where they are decomposed.
func TestTransformerBlockGradients(t *testing.T) {
	for _, opset := range []int64{13, 20} {
		t.Run(map[int64]string{13: "opset13", 20: "opset20"}[opset], func(t *testing.T) {
			m, params := transformerBlock(opset)
			var exact []string
			for _, p := range params {
				exact = append(exact, "re:^"+regexp.QuoteMeta(p)+"$")
			}
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: exact, InputShapes: map[string][]int64{"x": blockInput}}
			opt := gradcheck.Options{Directions: 4, Seed: 3}
			if opset < 20 {
				opt.Step = 1e-3 // Erf has no double kernel on the CPU: float32, a small step
			}
			res, err := gradcheck.Check(m, cfg, nil, opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Graphs.Params) != len(params) {
				t.Errorf("%d of the block's %d parameters trainable", len(res.Graphs.Params), len(params))
			}
			for _, d := range res.Directions {
				if d.RelErr > tol {
					t.Errorf("analytic %.10g numeric %.10g: relative error %.3g > %g", d.Analytic, d.Numeric, d.RelErr, tol)
				}
			}
			t.Logf("RESULT %s float64=%v max_rel_err=%.2e params=%d", t.Name(), res.Float64, res.MaxRelErr, len(res.Graphs.Params))
		})
	}
}
