package runtime

import (
	"fmt"
	"sort"

	"github.com/segtune/segtune/internal/ortprofile"
)

// Placement says where ONNX Runtime ran a session's nodes, read from its
// profile (Tuning.ProfilePrefix).
type Placement struct {
	// PerEP counts nodes per execution provider.
	PerEP map[string]int `json:"nodes_per_provider"`
	// CPUNodes lists, as "name (op)", the nodes that ran on the CPU
	// provider, sorted.
	CPUNodes []string `json:"cpu_nodes,omitempty"`
	// CPUOps counts the CPU provider's nodes per op type.
	CPUOps map[string]int `json:"cpu_ops,omitempty"`
}

// ProfilePlacement reads the newest profile written under prefix (the
// session must be closed) and tells which provider ran each node.
func ProfilePlacement(prefix string) (*Placement, error) {
	nodes, err := ortprofile.ReadNewest(prefix)
	if err != nil {
		return nil, err
	}
	p := &Placement{PerEP: map[string]int{}, CPUOps: map[string]int{}}
	for _, n := range nodes {
		if n.Provider == "" {
			continue
		}
		p.PerEP[n.Provider]++
		if n.Provider == "CPUExecutionProvider" {
			p.CPUNodes = append(p.CPUNodes, fmt.Sprintf("%s (%s)", n.Name, n.Op))
			p.CPUOps[n.Op]++
		}
	}
	sort.Strings(p.CPUNodes)
	return p, nil
}
