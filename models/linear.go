package models

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/segtune/segtune/onnx"
)

// SMeasureOutput names LinearClassifier's extra output.
const SMeasureOutput = "s_measure"

// LinearClassifier builds the one-layer network of the paper's S-MNIST
// experiment (§7.1): Flatten, then one fully connected layer.
//
// input is the shape of one example without the batch dimension, e.g.
// {1, 28, 28} or {784}; the model's input "input" is [N, input...] with N
// dynamic, flattened to [N, D] when input has more than one dimension.
// The output "logits" [N, classes] is Gemm(x, W, b) with W [classes, D]
// (transB, PyTorch's nn.Linear layout), named "fc.weight" and "fc.bias".
//
// With extraOutputs > 0 the layer has that many more units, exposed as a
// second output "s_measure" [N, extraOutputs] through "smeasure.weight"
// and "smeasure.bias": the extra output node on which the paper's
// experiment 1 computes the S-measure (apply a sigmoid to read it as a
// probability). Both blocks read the same flattened input, so together
// they are one linear layer of classes+extraOutputs units; the split keeps
// "logits" the first output, where the cross-entropy loss and segtune's
// classifier detection look.
//
// Weights are drawn from U(−1/√D, 1/√D) (nn.Linear's default), seeded by
// seed; biases are zero.
func LinearClassifier(input []int64, classes, extraOutputs int, seed uint64) (*onnx.Model, error) {
	if len(input) == 0 {
		return nil, fmt.Errorf("models: LinearClassifier: no input shape")
	}
	d, err := onnx.NumElements(input)
	if err != nil || d < 1 {
		return nil, fmt.Errorf("models: LinearClassifier: input shape %v must have positive dimensions", input)
	}
	if classes < 1 || extraOutputs < 0 {
		return nil, fmt.Errorf("models: LinearClassifier: %d classes and %d extra outputs: want at least 1 class and no negative count", classes, extraOutputs)
	}
	g := newGraph(seed)
	x := "input"
	if len(input) > 1 {
		x = g.Node("Flatten", "flatten", []string{x}, onnx.IntAttr("axis", 1))
	}
	bound := 1 / math.Sqrt(float64(d))
	fc := func(prefix, out string, units int) *onnx.ValueInfoProto {
		w := g.uniform(prefix+".weight", []int64{int64(units), d}, bound)
		b := g.param(prefix+".bias", []int64{int64(units)}, 0)
		return floatValue(g.Node("Gemm", out, []string{x, w, b}, onnx.IntAttr("transB", 1)), "batch", units)
	}
	outs := []*onnx.ValueInfoProto{fc("fc", "logits", classes)}
	if extraOutputs > 0 {
		outs = append(outs, fc("smeasure", SMeasureOutput, extraOutputs))
	}
	dims := []any{"batch"}
	for _, v := range input {
		dims = append(dims, int(v))
	}
	js, err := json.Marshal(map[string]any{"input": input, "classes": classes, "extra_outputs": extraOutputs, "seed": seed})
	if err != nil {
		return nil, err
	}
	return g.model("linear",
		fmt.Sprintf("linear classifier: %v → %d classes + %d extra outputs, %d parameters; built by segtune/models", input, classes, extraOutputs, g.params),
		floatValue("input", dims...), outs,
		map[string]string{MetaArchitecture: "linear", MetaConfig: string(js)}), nil
}
