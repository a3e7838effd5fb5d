// Package roleprofile sums the kernel time of an ONNX Runtime profile of a
// training step by what each node does — forward, data gradient, weight
// gradient, bias gradient, loss, optimiser, copies — and, for
// convolutions and their gradients, by convolution class (dense,
// pointwise, depthwise, grouped). It joins the profile's node names with
// the training graph, whose nodes the gradient compiler annotated
// (grad.ReadNodeRole).
package roleprofile

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/segtune/segtune/internal/ortprofile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// Roles that are not the compiler's (grad.Role*).
const (
	Forward   = "forward"
	Optimiser = "optimiser"
	// Copies are ONNX Runtime's device copies (MemcpyToHost/FromHost) and
	// the layout and type conversions it or the compilers inserted (Cast,
	// Transpose, Reshape, ... of ONNX Runtime's layout passes, of the
	// gradient compiler and of autocast).
	Copies = "copies"
	// Other is a profiled node that is not in the training graph under
	// its name nor under a prefix of it (one ONNX Runtime made).
	Other = "other"
)

// copyOps are the operators that only move or convert values.
var copyOps = map[string]bool{
	"Cast": true, "Transpose": true, "Reshape": true, "Identity": true, "Squeeze": true,
	"Unsqueeze": true, "Flatten": true, "MemcpyToHost": true, "MemcpyFromHost": true,
}

// Row is one role's (and class's) part of the kernel time.
type Row struct {
	Role string `json:"role"`
	// Class is the convolution class for convolution rows, "" for others.
	Class string  `json:"class,omitempty"`
	Nodes int     `json:"nodes"`
	Ms    float64 `json:"ms"` // sum of the nodes' kernel times (ortprofile.Node.Ms)
	Share float64 `json:"share"`
}

// Table is a profile grouped by role, most expensive row first.
type Table struct {
	Rows    []Row   `json:"rows"`
	TotalMs float64 `json:"total_ms"`
}

// NodeRole returns the role and convolution class ("" when none) of the
// node ONNX Runtime profiled under name with operator op, looked up in
// byName, the training graph's nodes by name.
func NodeRole(name, op string, byName map[string]*onnx.NodeProto) (role, class string) {
	if op == "MemcpyToHost" || op == "MemcpyFromHost" {
		return Copies, ""
	}
	n := lookup(name, byName)
	if n == nil {
		if copyOps[op] { // ONNX Runtime's own layout changes ("Transpose_token_1")
			return Copies, ""
		}
		return Other, ""
	}
	r, _ := grad.ReadNodeRole(n)
	role = r.Role
	if role == "" {
		role = Forward
	}
	if copyOps[n.GetOpType()] && (role != Forward || strings.HasPrefix(n.GetName(), "autocast/")) {
		return Copies, ""
	}
	if r.ConvClass != 0 {
		class = r.ConvClass.String()
	}
	return role, class
}

// lookup finds the graph node a profiled node came from: the node of that
// name, else the one whose name is the longest prefix of it followed by a
// separator (ONNX Runtime names the nodes it fuses or splits after one of
// them: "bwd/node_MatMul_29/MatmulTransposeFusion/").
func lookup(name string, byName map[string]*onnx.NodeProto) *onnx.NodeProto {
	if n := byName[name]; n != nil {
		return n
	}
	var best *onnx.NodeProto
	for k, n := range byName {
		rest, ok := strings.CutPrefix(name, k)
		if ok && strings.IndexAny(rest[:min(1, len(rest))], "/_: ") == 0 && (best == nil || len(k) > len(best.GetName())) {
			best = n
		}
	}
	return best
}

// Group sums the kernel time of train, the profile of a session on the
// training graph g, per role and class; optimiser, the profile of a
// separate optimiser session (finetune/resident), adds to the optimiser
// role (nil when there is none).
func Group(train []ortprofile.Node, g *onnx.GraphProto, optimiser []ortprofile.Node) Table {
	byName := map[string]*onnx.NodeProto{}
	for _, n := range g.GetNode() {
		byName[n.GetName()] = n
	}
	type key struct{ role, class string }
	rows := map[key]*Row{}
	var t Table
	add := func(k key, ms float64) {
		r := rows[k]
		if r == nil {
			r = &Row{Role: k.role, Class: k.class}
			rows[k] = r
		}
		r.Nodes++
		r.Ms += ms
		t.TotalMs += ms
	}
	for _, n := range train {
		role, class := NodeRole(n.Name, n.Op, byName)
		add(key{role, class}, n.Ms())
	}
	for _, n := range optimiser {
		add(key{Optimiser, ""}, n.Ms())
	}
	for _, r := range rows {
		if t.TotalMs > 0 {
			r.Share = r.Ms / t.TotalMs
		}
		t.Rows = append(t.Rows, *r)
	}
	slices.SortFunc(t.Rows, func(a, b Row) int {
		if c := cmp.Compare(b.Ms, a.Ms); c != 0 {
			return c
		}
		return cmp.Compare(a.Role+a.Class, b.Role+b.Class)
	})
	return t
}

// Write prints the table.
func (t Table) Write(w io.Writer) {
	fmt.Fprintf(w, "kernel time per role %.1f ms/step\n%-36s %6s %9s %7s\n", t.TotalMs, "role", "nodes", "ms/step", "share")
	for _, r := range t.Rows {
		name := r.Role
		if r.Class != "" {
			name += " (" + r.Class + ")"
		}
		fmt.Fprintf(w, "%-36s %6d %9.2f %6.1f%%\n", name, r.Nodes, r.Ms, 100*r.Share)
	}
}
