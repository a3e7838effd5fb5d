// Package sizehead is the graph surgery of fine-tuning's size regularizer
// (docs/method.md): a linear size head on a network's pooled features,
// scores = Flatten(GAP(feature))·W + b, added to the training graph with
// the regularizer's term, or to an inference model as a second output for
// validation. The regularizer's state and its dual updates stay in
// finetune/trainer; this package only edits graphs.
package sizehead

import (
	"fmt"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// The names the head and the term give their parameters, inputs and
// outputs in the graph.
const (
	// Prefix begins every name the head adds: export leaves the
	// parameters under it out.
	Prefix = "segtune/"
	Weight = "segtune/size_w"
	Bias   = "segtune/size_b"
	Scores = "segtune/size_scores"
	Pos    = "segtune/reg_pos"
	Neg    = "segtune/reg_neg"
	Eps    = "segtune/reg_eps"
	Term   = "segtune/reg_term"
)

// Tap pools the feature (a Conv layer's output; "" for the classifier's
// input) into a new output of m and returns it with its channel count.
func Tap(m *onnx.Model, feature string) (pooled string, channels int, err error) {
	pooled, err = network.TapFeatures(m, feature)
	if err != nil {
		return "", 0, err
	}
	channels, err = featureChannels(m, feature)
	if err != nil {
		return "", 0, err
	}
	return pooled, channels, nil
}

// featureChannels returns the channel count of the pooled feature: the
// classifier's input width by default.
func featureChannels(m *onnx.Model, feature string) (int, error) {
	cls, err := network.Classifier(m)
	if err != nil {
		return 0, err
	}
	if feature == "" || feature == cls.Node.Input[0] {
		w := m.Initializer(cls.Node.Input[1])
		return int(w.Dims[1]), nil
	}
	layers, _ := network.Layers(m)
	for _, l := range layers {
		if len(l.Node.Output) > 0 && l.Node.Output[0] == feature && l.Node.GetOpType() == "Conv" {
			return int(m.Initializer(l.Node.Input[1]).Dims[0]), nil
		}
	}
	return 0, fmt.Errorf("feature %q: name the output of a Conv layer (or leave it empty for the classifier's input)", feature)
}

// AddTerm adds the size head (weights w, [channels, heads], and a zero
// bias) on the pooled output of Tap to a training model, and the
// regularizer's term on its scores: term = Σ pos·s + neg·relu(eps + s)
// over the batch and the terms, where s is the score of each term's head
// (termHeads) and pos, neg [batch, terms] and eps [1, terms] are inputs
// fed each step. It returns what grad.Build needs: the scores as an extra
// output and the term as a gradient input.
func AddTerm(m *onnx.Model, pooled string, channels, heads int, bound float64, w []float32, termHeads []int64, batch int) grad.Config {
	g := m.Graph()
	terms := len(termHeads)
	g.Initializer = append(g.Initializer,
		onnx.NewFloat32Tensor(Weight, []int64{int64(channels), int64(heads)}, w),
		onnx.NewFloat32Tensor(Bias, []int64{int64(heads)}, make([]float32, heads)),
		onnx.NewInt64Tensor("segtune/term_heads", []int64{int64(terms)}, termHeads),
		onnx.NewInt64Tensor("segtune/term_shape", []int64{1}, []int64{1}),
	)
	B, T := int64(batch), int64(terms)
	g.Input = append(g.Input, onnx.TensorValueInfo(Pos, onnx.Float32, B, T), onnx.TensorValueInfo(Neg, onnx.Float32, B, T), onnx.TensorValueInfo(Eps, onnx.Float32, 1, T))
	node := func(op string, out string, in []string, attrs ...*onnx.AttributeProto) {
		name := out + "/" + op
		g.Node = append(g.Node, &onnx.NodeProto{Name: &name, OpType: &op, Input: in, Output: []string{out}, Attribute: attrs})
	}
	addHeadNodes(g, pooled, channels, bound)
	node("Gather", "segtune/term_scores", []string{Scores, "segtune/term_heads"}, onnx.IntAttr("axis", 1))
	node("Mul", "segtune/reg_lin", []string{"segtune/term_scores", Pos})
	node("Add", "segtune/reg_z", []string{"segtune/term_scores", Eps})
	node("Relu", "segtune/reg_hinge", []string{"segtune/reg_z"})
	node("Mul", "segtune/reg_negterm", []string{"segtune/reg_hinge", Neg})
	node("Add", "segtune/reg_sum", []string{"segtune/reg_lin", "segtune/reg_negterm"})
	node("ReduceSum", "segtune/reg_total", []string{"segtune/reg_sum"}, onnx.IntAttr("keepdims", 0))
	node("Reshape", Term, []string{"segtune/reg_total", "segtune/term_shape"})
	return grad.Config{
		ExtraOutputs: []string{Scores},
		GradInputs:   []string{Term},
		InputShapes:  map[string][]int64{Pos: {B, T}, Neg: {B, T}, Eps: {1, T}},
	}
}

// Append adds the trained size head to an inference model as a second
// output, Scores [N, heads]: validation reads it to score the size
// predictor. Exported models never carry it.
func Append(m *onnx.Model, feature string, bound float64, head []*optim.Param) error {
	pooled, err := network.TapFeatures(m, feature)
	if err != nil {
		return err
	}
	g := m.Graph()
	channels := 0
	for _, p := range head {
		g.Initializer = append(g.Initializer, onnx.NewFloat32Tensor(p.Name, p.Shape, p.Data))
		if p.Name == Weight {
			channels = int(p.Shape[0])
		}
	}
	addHeadNodes(g, pooled, channels, bound)
	name := Scores
	g.Output = append(g.Output, &onnx.ValueInfoProto{Name: &name})
	return nil
}

// addHeadNodes appends the size head, scores = Flatten(pooled)·W + b, to
// g; with bound > 0 the C = channels pooled features are first divided by
// their mean absolute value (plus 1e-6), so that Σ_k |â_k| ≤ C and
// |â·W_h| ≤ bound inside the box |W_kh| ≤ bound/C. The operators (Neg,
// Max, MatMul, Add, Div) are valid at every opset the models use and have
// gradients in onnx/grad.
func addHeadNodes(g *onnx.GraphProto, pooled string, channels int, bound float64) {
	type nodeSpec struct {
		op, out string
		in      []string
		attrs   []*onnx.AttributeProto
	}
	feat := "segtune/size_flat"
	nodes := []nodeSpec{{"Flatten", feat, []string{pooled}, []*onnx.AttributeProto{onnx.IntAttr("axis", 1)}}}
	if bound > 0 {
		mean := make([]float32, channels)
		for i := range mean {
			mean[i] = 1 / float32(channels)
		}
		g.Initializer = append(g.Initializer,
			onnx.NewFloat32Tensor("segtune/size_mean_w", []int64{int64(channels), 1}, mean),
			onnx.NewFloat32Tensor("segtune/size_delta", []int64{1}, []float32{1e-6}))
		nodes = append(nodes,
			nodeSpec{"Neg", "segtune/size_neg", []string{feat}, nil},
			nodeSpec{"Max", "segtune/size_abs", []string{feat, "segtune/size_neg"}, nil},
			nodeSpec{"MatMul", "segtune/size_l1", []string{"segtune/size_abs", "segtune/size_mean_w"}, nil},
			nodeSpec{"Add", "segtune/size_den", []string{"segtune/size_l1", "segtune/size_delta"}, nil},
			nodeSpec{"Div", "segtune/size_normed", []string{feat, "segtune/size_den"}, nil})
		feat = "segtune/size_normed"
	}
	nodes = append(nodes,
		nodeSpec{"MatMul", "segtune/size_mm", []string{feat, Weight}, nil},
		nodeSpec{"Add", Scores, []string{"segtune/size_mm", Bias}, nil})
	for _, n := range nodes {
		name, op := n.out+"/"+n.op, n.op
		g.Node = append(g.Node, &onnx.NodeProto{Name: &name, OpType: &op, Input: n.in, Output: []string{n.out}, Attribute: n.attrs})
	}
}
