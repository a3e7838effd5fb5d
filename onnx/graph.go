package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// The queries below take a graph rather than a Model so that they work on the
// bodies of If, Loop and Scan as well as on the main graph. A node that holds
// subgraphs reads, besides its listed inputs, every tensor its subgraphs take
// from the enclosing scope; Consumers and TopoSort count those reads too,
// since the node cannot run before they are produced.

// Opset returns the version of the operator set imported for domain, or 0 when
// the model does not import it. "" and "ai.onnx" name the same default domain.
func (m *Model) Opset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	for _, o := range m.Proto.GetOpsetImport() {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if d == domain {
			return o.GetVersion()
		}
	}
	return 0
}

// Producers maps each tensor produced by a node of g to that node. Subgraph
// nodes are not included: their outputs are local to the subgraph. If two
// nodes claim the same output (an invalid graph), the first wins; TopoSort
// reports the conflict.
func Producers(g *onnxpb.GraphProto) map[string]*onnxpb.NodeProto {
	out := map[string]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			if _, dup := out[o]; o != "" && !dup {
				out[o] = n
			}
		}
	}
	return out
}

// Consumers maps each tensor read by nodes of g to those nodes, in graph
// order, each node once. It includes reads from the enclosing scope made by a
// node's subgraphs; omitted optional inputs ("") are skipped.
func Consumers(g *onnxpb.GraphProto) map[string][]*onnxpb.NodeProto {
	out := map[string][]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, in := range NodeInputs(n) {
			out[in] = append(out[in], n)
		}
	}
	return out
}

// NodeInputs lists the distinct tensors n reads: its non-empty inputs in
// order, then the names its subgraphs take from the enclosing scope, sorted.
func NodeInputs(n *onnxpb.NodeProto) []string {
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, in := range n.GetInput() {
		add(in)
	}
	for _, name := range sortedKeys(outerNames(n)) {
		add(name)
	}
	return out
}

// outerNames returns the names n's subgraphs read (as node inputs or graph
// outputs, at any depth) without a subgraph on the way defining them as an
// input, initializer or node output: what they capture from the scope n is
// in. defs counts the scopes inside n that define each name, so the walk is
// linear in the size of the subgraphs however deep they nest (the depth
// itself is bounded by protobuf's nesting limit on decoding).
func outerNames(n *onnxpb.NodeProto) map[string]bool {
	var refs map[string]bool
	defs := map[string]int{}
	use := func(name string) {
		if name != "" && defs[name] == 0 {
			if refs == nil {
				refs = map[string]bool{}
			}
			refs[name] = true
		}
	}
	var walkNode func(n *onnxpb.NodeProto)
	walkGraph := func(g *onnxpb.GraphProto) {
		var local []string
		for _, v := range g.GetInput() {
			local = append(local, v.GetName())
		}
		for _, t := range g.GetInitializer() {
			local = append(local, t.GetName())
		}
		for _, sp := range g.GetSparseInitializer() {
			local = append(local, sp.GetValues().GetName())
		}
		for _, x := range g.GetNode() {
			local = append(local, x.GetOutput()...)
		}
		for _, name := range local {
			defs[name]++
		}
		for _, x := range g.GetNode() {
			for _, in := range x.GetInput() {
				use(in)
			}
			walkNode(x)
		}
		for _, v := range g.GetOutput() {
			use(v.GetName())
		}
		for _, name := range local {
			defs[name]--
		}
	}
	walkNode = func(n *onnxpb.NodeProto) {
		for _, a := range n.GetAttribute() {
			if a.GetG() != nil {
				walkGraph(a.GetG())
			}
			for _, sg := range a.GetGraphs() {
				walkGraph(sg)
			}
		}
	}
	walkNode(n)
	return refs
}

// DataInputs returns g's inputs that are not also initializers: the ones a
// caller must feed. (Before IR version 4 every initializer was also listed as
// an input.)
func DataInputs(g *onnxpb.GraphProto) []*onnxpb.ValueInfoProto {
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	for _, sp := range g.GetSparseInitializer() {
		inits[sp.GetValues().GetName()] = true
	}
	var out []*onnxpb.ValueInfoProto
	for _, v := range g.GetInput() {
		if !inits[v.GetName()] {
			out = append(out, v)
		}
	}
	return out
}

// ValueInfo returns the type information g records for tensor name, looking
// at its inputs, outputs and value_info, or nil when there is none.
func ValueInfo(g *onnxpb.GraphProto, name string) *onnxpb.ValueInfoProto {
	for _, list := range [][]*onnxpb.ValueInfoProto{g.GetInput(), g.GetOutput(), g.GetValueInfo()} {
		for _, v := range list {
			if v.GetName() == name {
				return v
			}
		}
	}
	return nil
}

// NodeLabel names a node for messages: its name and op type, or its position
// in g when it has no name.
func NodeLabel(g *onnxpb.GraphProto, n *onnxpb.NodeProto) string {
	if n.GetName() != "" {
		return fmt.Sprintf("node %q (%s)", n.GetName(), n.GetOpType())
	}
	for i, x := range g.GetNode() {
		if x == n {
			return fmt.Sprintf("node #%d (%s)", i, n.GetOpType())
		}
	}
	return fmt.Sprintf("unnamed %s node", n.GetOpType())
}
