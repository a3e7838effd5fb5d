package models

import (
	"github.com/segtune/segtune/onnx"
)

// Family names the kind of segmenter m looks like, from its operators
// alone: a guess for the reader of `segtune info`, never a branch in any
// command. The evidence says what the guess rests on.
func Family(m *onnx.Model) (family string, evidence []string) {
	g := m.Proto.GetGraph()
	has := map[string]bool{}
	for _, n := range g.GetNode() {
		has[n.GetOpType()] = true
	}
	attention := hasAttention(g)
	if attention {
		evidence = append(evidence, "attention: Softmax between products of computed tensors")
	}
	layerNorm := has["LayerNormalization"] || has["ReduceMean"] && has["Sqrt"] && has["Div"]
	switch {
	case has["LayerNormalization"]:
		evidence = append(evidence, "LayerNormalization")
	case layerNorm:
		evidence = append(evidence, "LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div")
	}
	groupNorm := has["GroupNormalization"] || has["InstanceNormalization"]
	for _, op := range []string{"GroupNormalization", "InstanceNormalization", "BatchNormalization"} {
		if has[op] {
			evidence = append(evidence, op)
		}
	}
	switch {
	case attention:
		return "transformer", evidence
	case layerNorm && has["Conv"]:
		return "CNN with LayerNorm, ConvNeXt-style", evidence
	case groupNorm && has["Conv"]:
		return "CNN with GroupNorm or InstanceNorm", evidence
	case has["Conv"]:
		return "CNN", evidence
	}
	return "unknown", evidence
}

// hasAttention reports a Softmax over the product (MatMul or Einsum) of two
// computed tensors
// (scaled, biased or masked on the way) whose result multiplies another
// computed tensor: the scores and the weighted values of attention.
func hasAttention(g *onnx.GraphProto) bool {
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	producers, consumers := onnx.Producers(g), onnx.Consumers(g)
	computedProduct := func(n *onnx.NodeProto) bool {
		op := n.GetOpType()
		return (op == "MatMul" || op == "Einsum") && len(n.Input) == 2 && !inits[n.Input[0]] && !inits[n.Input[1]]
	}
	for _, n := range g.GetNode() {
		if n.GetOpType() != "Softmax" || len(n.Input) == 0 {
			continue
		}
		p := producers[n.Input[0]]
		for range 3 { // Mul/Div by the scale, Add of a bias or mask
			if p == nil || computedProduct(p) {
				break
			}
			switch p.GetOpType() {
			case "Mul", "Div", "Add", "Sub":
				x := p.Input[0] // the computed operand: the other may be a constant
				if q := producers[x]; inits[x] || q != nil && q.GetOpType() == "Constant" {
					x = p.Input[len(p.Input)-1]
				}
				p = producers[x]
			default:
				p = nil
			}
		}
		if !computedProduct(p) {
			continue
		}
		for _, c := range consumers[n.Output[0]] {
			if computedProduct(c) {
				return true
			}
		}
	}
	return false
}
