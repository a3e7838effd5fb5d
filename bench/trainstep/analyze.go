package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/segtune/segtune/internal/ortprofile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad/roleprofile"
)

// OpShare is one operator type's part of the kernel time in ORT's profile.
type OpShare struct {
	Op    string  `json:"op"`
	Nodes int     `json:"nodes"`
	Ms    float64 `json:"ms"` // sum of its nodes' fastest kernel times
	Share float64 `json:"share"`
}

// ProfileShares reads the newest ORT profile under prefix (written when the
// session closed) and sums, per operator type, each node's kernel time
// taken at its fastest run (the first run left out when there are more):
// on a shared machine a node's slow runs are mostly other processes
// preempting it, and the minimum over runs is what the node itself costs.
// Shares are of the sum of these minima; most expensive first.
func ProfileShares(prefix string) ([]OpShare, float64, error) {
	nodes, err := ortprofile.ReadNewest(prefix)
	if err != nil {
		return nil, 0, err
	}
	byOp := map[string]*OpShare{}
	total := 0.0
	for _, n := range nodes {
		s := byOp[n.Op]
		if s == nil {
			s = &OpShare{Op: n.Op}
			byOp[n.Op] = s
		}
		s.Nodes++
		s.Ms += n.Ms()
		total += n.Ms()
	}
	out := make([]OpShare, 0, len(byOp))
	for _, s := range byOp {
		s.Share = s.Ms / total
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b OpShare) int { return cmp.Compare(b.Ms, a.Ms) })
	return out, total, nil
}

// ProfileRoles groups the newest ORT profile under prefix by role
// (onnx/grad/roleprofile), joined with the training graph g; a resident
// run's optimiser session profiles under prefix+"-optimizer"
// (finetune/resident), which adds the optimiser role.
func ProfileRoles(prefix string, g *onnx.GraphProto) (*roleprofile.Table, error) {
	nodes, err := ortprofile.ReadNewest(prefix)
	if err != nil {
		return nil, err
	}
	var opt []ortprofile.Node
	if _, err := ortprofile.Newest(prefix + "-optimizer"); err == nil {
		if opt, err = ortprofile.ReadNewest(prefix + "-optimizer"); err != nil {
			return nil, err
		}
	}
	t := roleprofile.Group(nodes, g, opt)
	return &t, nil
}

// OpCounts is the node histogram of a model file or graph.
func OpCounts(m *onnx.Model) map[string]int {
	h := map[string]int{}
	for _, s := range m.Summary().Ops {
		h[s.Op] = s.Count
	}
	return h
}

// writeShares prints a profile summary table.
func writeShares(w io.Writer, shares []OpShare, totalMs float64) {
	fmt.Fprintf(w, "kernel time %.1f ms/step (sum of per-node minima)\n%-28s %6s %9s %7s\n", totalMs, "op", "nodes", "ms/step", "share")
	for _, s := range shares {
		fmt.Fprintf(w, "%-28s %6d %9.2f %6.1f%%\n", s.Op, s.Nodes, s.Ms, 100*s.Share)
	}
}

// writeCounts prints a histogram, most frequent first.
func writeCounts(w io.Writer, title string, h map[string]int) {
	type kv struct {
		op string
		n  int
	}
	var all []kv
	total := 0
	for k, v := range h {
		all = append(all, kv{k, v})
		total += v
	}
	slices.SortFunc(all, func(a, b kv) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.op, b.op)
	})
	fmt.Fprintf(w, "%s: %d nodes\n", title, total)
	for _, e := range all {
		fmt.Fprintf(w, "  %-32s %4d\n", e.op, e.n)
	}
}
