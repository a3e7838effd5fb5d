package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
)

// orderLeaves moves the graph's leaves (nodes whose outputs no node reads:
// the loss and every parameter gradient's last node, with the node feeding
// a final Identity) to the end of the node list, the earliest-emitted leaf
// last. The node list stays topologically sorted and the math is unchanged;
// only ONNX Runtime's execution order changes.
//
// Why: ONNX Runtime's default execution order is a depth-first walk from
// the leaves, taking the leaf with the highest node index first. The
// backward pass emits a layer's weight gradient right after the output
// gradient it reads, the last layer's first, so in emission order the first
// leaf walked was the first layer's weight gradient: the walk ran the whole
// input-gradient chain down to the first layer and only then every other
// weight gradient, keeping each layer's output gradient and input alive to
// the end of the step (MobileNetV2 DeepLabV3+, batch 8, 128×128: every
// FusedMatMul of the weight gradients after the last input-gradient Conv).
// Walking the leaves in emission order instead runs each weight gradient
// as soon as its inputs exist, so they are freed early.
func orderLeaves(g *onnx.GraphProto) {
	consumers := map[string]int{}
	for _, n := range g.Node {
		for _, x := range n.Input {
			if x != "" {
				consumers[x]++
			}
		}
	}
	graphOut := map[string]bool{}
	for _, o := range g.Output {
		graphOut[o.GetName()] = true
	}
	producer := map[string]int{}
	for i, n := range g.Node {
		for _, o := range n.Output {
			if o != "" {
				producer[o] = i
			}
		}
	}
	// onlyFeeds reports whether node i's outputs are read by exactly one
	// node and are no graph output.
	onlyFeeds := func(i int) bool {
		for _, o := range g.Node[i].Output {
			if o != "" && (graphOut[o] || consumers[o] > 1) {
				return false
			}
		}
		return true
	}
	moved := make([]bool, len(g.Node))
	var groups [][]int // each: node indices in order; groups in emission order
	for i, n := range g.Node {
		leaf := true
		for _, o := range n.Output {
			if o != "" && consumers[o] > 0 {
				leaf = false
			}
		}
		if !leaf {
			continue
		}
		grp := []int{i}
		// ONNX Runtime removes a final Identity, which makes its input's
		// producer the leaf: move that producer along.
		if n.GetOpType() == "Identity" && len(n.Input) == 1 {
			if p, ok := producer[n.Input[0]]; ok && !moved[p] && onlyFeeds(p) {
				grp = []int{p, i}
			}
		}
		for _, j := range grp {
			moved[j] = true
		}
		groups = append(groups, grp)
	}
	slices.SortStableFunc(groups, func(a, b []int) int { return a[0] - b[0] })
	out := make([]*onnx.NodeProto, 0, len(g.Node))
	for i, n := range g.Node {
		if !moved[i] {
			out = append(out, n)
		}
	}
	for k := len(groups) - 1; k >= 0; k-- {
		for _, j := range groups[k] {
			out = append(out, g.Node[j])
		}
	}
	g.Node = out
}
