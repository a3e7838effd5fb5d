// Package network edits segmentation networks for fine-tuning: it finds the
// layers and their parameters, resolves which parameters to train (presets
// such as "classifier" or "decoder"), replaces the final classifier for a
// new label set, taps the features the size regularizer reads, and writes
// trained weights back into a clean inference model.
package network

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/onnx"
)

// Layer is one node with trainable parameters, e.g. a Conv and its weight
// and bias.
type Layer struct {
	Node   *onnx.NodeProto
	Index  int      // position in topological order among all nodes
	Params []string // float initializers the node takes as parameters
}

// Layers returns the model's parameterised nodes in topological order.
func Layers(m *onnx.Model) ([]Layer, error) {
	g := m.Graph()
	order, err := onnx.TopoSort(g)
	if err != nil {
		return nil, err
	}
	// One rule (onnx.NodeParameters) says what a parameter is, here and in
	// the gradient compiler; a Linear's bias and a layer scale count with
	// the layer they follow.
	owned := onnx.NodeParameters(g)
	var out []Layer
	for i, n := range order {
		if ps := owned[n]; len(ps) > 0 {
			out = append(out, Layer{Node: n, Index: i, Params: ps})
		}
	}
	return out, nil
}

// Classifier returns the final classifier: the last parameterised layer
// upstream of the model's first output, which must produce that output's
// channels.
func Classifier(m *onnx.Model) (Layer, error) {
	layers, err := Layers(m)
	if err != nil {
		return Layer{}, err
	}
	g := m.Graph()
	if len(g.Output) == 0 {
		return Layer{}, fmt.Errorf("the model has no outputs")
	}
	up := upstream(g, g.Output[0].GetName())
	for i := len(layers) - 1; i >= 0; i-- {
		if up[layers[i].Node] {
			return layers[i], nil
		}
	}
	return Layer{}, fmt.Errorf("no parameterised layer leads to output %q", g.Output[0].GetName())
}

// upstream returns the nodes that tensor depends on.
func upstream(g *onnx.GraphProto, tensor string) map[*onnx.NodeProto]bool {
	seen := map[*onnx.NodeProto]bool{}
	walkUpstream(g, tensor, func(n *onnx.NodeProto) bool { seen[n] = true; return true })
	return seen
}

// walkUpstream visits, depth first, each node that tensor depends on, once;
// it goes on to a node's inputs only where visit returns true.
func walkUpstream(g *onnx.GraphProto, tensor string, visit func(*onnx.NodeProto) bool) {
	prod := onnx.Producers(g)
	seen := map[*onnx.NodeProto]bool{}
	stack := []string{tensor}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := prod[t]
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		if visit(n) {
			stack = append(stack, n.Input...)
		}
	}
}

// firstUpsample returns the topological index of the first Resize or
// Upsample node, or -1.
func firstUpsample(m *onnx.Model) (int, error) {
	order, err := onnx.TopoSort(m.Graph())
	if err != nil {
		return -1, err
	}
	return slices.IndexFunc(order, func(n *onnx.NodeProto) bool {
		return n.GetOpType() == "Resize" || n.GetOpType() == "Upsample"
	}), nil
}
