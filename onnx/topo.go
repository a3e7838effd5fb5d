package onnx

import (
	"container/heap"
	"fmt"
	"strings"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// TopoSort returns g's nodes in an order where every node comes after the
// nodes producing the tensors it reads (including reads made by its
// subgraphs). Among nodes that are ready together, graph order is kept, so an
// already sorted graph comes back unchanged. It fails when two nodes produce
// the same tensor, or when the graph has a cycle; the error then names the
// nodes on one cycle.
func TopoSort(g *onnxpb.GraphProto) ([]*onnxpb.NodeProto, error) {
	nodes := g.GetNode()
	producer := map[string]int{}
	for i, n := range nodes {
		for _, o := range n.GetOutput() {
			if o == "" {
				continue
			}
			if j, dup := producer[o]; dup {
				return nil, fmt.Errorf("graph %q: tensor %q is produced by both %s and %s", g.GetName(), o, NodeLabel(g, nodes[j]), NodeLabel(g, n))
			}
			producer[o] = i
		}
	}
	inputs := make([][]string, len(nodes))
	next := make([][]int, len(nodes)) // edges producer -> consumer
	indeg := make([]int, len(nodes))
	for i, n := range nodes {
		inputs[i] = NodeInputs(n)
		for _, in := range inputs[i] {
			if p, ok := producer[in]; ok {
				next[p] = append(next[p], i)
				indeg[i]++
			}
		}
	}
	ready := &intHeap{}
	for i := range nodes {
		if indeg[i] == 0 {
			ready.items = append(ready.items, i)
		}
	}
	order := make([]*onnxpb.NodeProto, 0, len(nodes))
	done := make([]bool, len(nodes))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, nodes[i])
		done[i] = true
		for _, j := range next[i] {
			if indeg[j]--; indeg[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	if len(order) == len(nodes) {
		return order, nil
	}
	return nil, cycleError(g, producer, inputs, done)
}

// cycleError finds a cycle among the nodes left unsorted. Each of them reads
// a tensor from another unsorted node, so walking back from any of them must
// revisit a node, and the walk from that node on is a cycle.
func cycleError(g *onnxpb.GraphProto, producer map[string]int, inputs [][]string, done []bool) error {
	start := 0
	for done[start] {
		start++
	}
	pos := map[int]int{} // node -> index in path
	var path []int
	for cur := start; ; {
		if at, seen := pos[cur]; seen {
			path = path[at:]
			break
		}
		pos[cur] = len(path)
		path = append(path, cur)
		found := false
		for _, in := range inputs[cur] {
			if p, ok := producer[in]; ok && !done[p] {
				cur, found = p, true
				break
			}
		}
		if !found { // cannot happen, but never loop forever
			break
		}
	}
	// The walk went from consumers to producers; report in data-flow order.
	nodes := g.GetNode()
	const maxShown = 8
	var labels []string
	for k := len(path) - 1; k >= 0 && len(labels) < maxShown; k-- {
		labels = append(labels, NodeLabel(g, nodes[path[k]]))
	}
	if len(path) > maxShown {
		labels = append(labels, fmt.Sprintf("… (%d nodes in all)", len(path)))
	} else {
		labels = append(labels, labels[0])
	}
	return fmt.Errorf("graph %q has a cycle: %s", g.GetName(), strings.Join(labels, " -> "))
}

// intHeap is a min-heap of node indices.
type intHeap struct{ items []int }

func (h *intHeap) Len() int           { return len(h.items) }
func (h *intHeap) Less(i, j int) bool { return h.items[i] < h.items[j] }
func (h *intHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *intHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *intHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
