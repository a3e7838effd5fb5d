// Package upgrade rewrites a model's default-domain operators from the
// opset it was exported at (7 or later) to a newer one, so that an old
// export can take what only newer opsets have: QuantizeLinear and
// DequantizeLinear (10), per-channel quantization (13), a newer ONNX
// Runtime's kernels.
//
// Each operator whose definition changed in a way that matters to a model
// written for an older opset has adapters, one function per change, in
// the table of adapters.go (what changed, and when, follows the ONNX
// Changelog); operators whose older nodes mean the same at every later
// opset are listed in compatible. A model with any other operator is
// refused, naming it, before anything is rewritten.
package upgrade

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// MinOpset is the oldest opset the adapters read (ONNX Runtime's oldest
// too); MaxOpset the newest they write, the newest whose changes the
// table was checked against.
const (
	MinOpset = 7
	MaxOpset = 21
)

// irVersions is the IR version each opset came with: a model raised to an
// opset declares at least its IR version.
var irVersions = map[int64]int64{9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}

// Summary says what an upgrade did.
type Summary struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Rewritten counts the nodes each adapter changed, by the operator
	// they had ("Upsample", "Clip" …); operators that needed no change
	// are not listed.
	Rewritten map[string]int `json:"rewritten,omitempty"`
}

// String is "opset 7 → 13 (rewrote Clip ×3, Upsample ×2)".
func (s *Summary) String() string {
	line := fmt.Sprintf("opset %d → %d", s.From, s.To)
	if len(s.Rewritten) == 0 {
		return line + " (no operator needed a change)"
	}
	ops := slices.Sorted(maps.Keys(s.Rewritten))
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s ×%d", op, s.Rewritten[op])
	}
	return line + " (rewrote " + strings.Join(parts, ", ") + ")"
}

// UnsupportedError is a model with operators the upgrade has no adapter
// for, or nodes an adapter cannot carry to the new opset.
type UnsupportedError struct {
	From, To int64
	// Problems name each operator or node, one entry each.
	Problems []string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("cannot upgrade the model from opset %d to %d: %s", e.From, e.To, strings.Join(e.Problems, "; "))
}

// CheckTarget says whether a model of opset from can be raised to to.
func CheckTarget(from, to int64) error {
	switch {
	case to > MaxOpset:
		return fmt.Errorf("opset %d is newer than %d, the newest segtune upgrades to", to, MaxOpset)
	case to < from:
		return fmt.Errorf("opset %d is older than the model's opset %d; segtune upgrades models, it does not downgrade them", to, from)
	case from < MinOpset:
		return fmt.Errorf("the model's opset %d is older than %d, the oldest segtune (and ONNX Runtime) reads", from, MinOpset)
	}
	return nil
}

// Upgrade returns a copy of m whose main graph is written for opset to,
// and what changed. m itself is not modified. A model at opset to
// already comes back as a copy with an empty summary.
func Upgrade(m *onnx.Model, to int64) (*onnx.Model, *Summary, error) {
	from := m.Opset("")
	if err := CheckTarget(from, to); err != nil {
		return nil, nil, err
	}
	sum := &Summary{From: from, To: to, Rewritten: map[string]int{}}
	out := m.Clone()
	if from == to {
		return out, sum, nil
	}
	g := out.Graph()
	if err := check(g, from, to); err != nil {
		return nil, nil, err
	}
	e := newEditor(g)
	var nodes []*onnxpb.NodeProto
	var problems []string
	for _, n := range g.GetNode() {
		e.out, e.after = nil, nil
		op := n.GetOpType()
		changed, err := e.upgradeNode(n, from, to)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s node %q: %v", op, n.GetName(), err))
			continue
		}
		if changed {
			sum.Rewritten[op]++
		}
		nodes = append(nodes, e.out...)
		nodes = append(nodes, n)
		nodes = append(nodes, e.after...)
	}
	if len(problems) > 0 {
		return nil, nil, &UnsupportedError{From: from, To: to, Problems: problems}
	}
	g.Node = nodes
	g.Initializer = e.inits
	setOpset(out, to)
	return out, sum, nil
}

// check names every operator of g that has neither adapters nor a place
// in compatible, and every node holding a subgraph (whose bodies the
// adapters do not visit), before anything is rewritten.
func check(g *onnxpb.GraphProto, from, to int64) error {
	unknown := map[string][]string{}
	for _, n := range g.GetNode() {
		if !defaultDomain(n) {
			continue
		}
		op := n.GetOpType()
		_, adapted := adapters[op]
		if (!adapted && !compatible[op]) || hasSubgraph(n) {
			unknown[op] = append(unknown[op], n.GetName())
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var problems []string
	for _, op := range slices.Sorted(maps.Keys(unknown)) {
		names := unknown[op]
		sort.Strings(names)
		p := fmt.Sprintf("no adapter for %s (%d node", op, len(names))
		if len(names) > 1 {
			p += "s"
		}
		problems = append(problems, fmt.Sprintf("%s, first %q)", p, names[0]))
	}
	return &UnsupportedError{From: from, To: to, Problems: problems}
}

func defaultDomain(n *onnxpb.NodeProto) bool {
	d := n.GetDomain()
	return d == "" || d == "ai.onnx"
}

func hasSubgraph(n *onnxpb.NodeProto) bool {
	for _, a := range n.GetAttribute() {
		if a.GetG() != nil || len(a.GetGraphs()) > 0 {
			return true
		}
	}
	return false
}

// setOpset imports the default domain at to and raises the IR version to
// the one opset to came with.
func setOpset(m *onnx.Model, to int64) {
	found := false
	for _, o := range m.Proto.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			v := to
			o.Version = &v
			found = true
		}
	}
	if !found {
		d, v := "", to
		m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: &d, Version: &v})
	}
	if ir := irVersions[to]; m.Proto.GetIrVersion() < ir {
		m.Proto.IrVersion = &ir
	}
}
