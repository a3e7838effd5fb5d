package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/onnx"
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
	files, _ := filepath.Glob(prefix + "*.json")
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("no ONNX Runtime profile under %s*", prefix)
	}
	slices.Sort(files)
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return nil, 0, err
	}
	var events []struct {
		Cat  string  `json:"cat"`
		Name string  `json:"name"`
		Dur  float64 `json:"dur"`
		Args struct {
			OpName string `json:"op_name"`
		} `json:"args"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, 0, err
	}
	runs := map[string][]float64{}
	opOf := map[string]string{}
	for _, e := range events {
		if e.Cat != "Node" || !strings.HasSuffix(e.Name, "_kernel_time") {
			continue
		}
		runs[e.Name] = append(runs[e.Name], e.Dur/1000)
		opOf[e.Name] = e.Args.OpName
	}
	byOp := map[string]*OpShare{}
	total := 0.0
	for node, d := range runs {
		if len(d) > 1 {
			d = d[1:]
		}
		ms := slices.Min(d)
		s := byOp[opOf[node]]
		if s == nil {
			s = &OpShare{Op: opOf[node]}
			byOp[opOf[node]] = s
		}
		s.Nodes++
		s.Ms += ms
		total += ms
	}
	out := make([]OpShare, 0, len(byOp))
	for _, s := range byOp {
		s.Share = s.Ms / total
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b OpShare) int { return cmp.Compare(b.Ms, a.Ms) })
	return out, total, nil
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
