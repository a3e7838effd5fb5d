package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	files, _ := filepath.Glob(prefix + "*.json")
	if len(files) == 0 {
		return nil, fmt.Errorf("no ONNX Runtime profile under %s*", prefix)
	}
	sort.Strings(files)
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return nil, err
	}
	var events []struct {
		Cat  string `json:"cat"`
		Name string `json:"name"`
		Args struct {
			OpName   string `json:"op_name"`
			Provider string `json:"provider"`
		} `json:"args"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, fmt.Errorf("profile %s: %w", files[len(files)-1], err)
	}
	p := &Placement{PerEP: map[string]int{}, CPUOps: map[string]int{}}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Cat != "Node" || e.Args.Provider == "" || !strings.HasSuffix(e.Name, "_kernel_time") {
			continue
		}
		node := strings.TrimSuffix(e.Name, "_kernel_time")
		if seen[node] {
			continue
		}
		seen[node] = true
		p.PerEP[e.Args.Provider]++
		if e.Args.Provider == "CPUExecutionProvider" {
			p.CPUNodes = append(p.CPUNodes, fmt.Sprintf("%s (%s)", node, e.Args.OpName))
			p.CPUOps[e.Args.OpName]++
		}
	}
	sort.Strings(p.CPUNodes)
	return p, nil
}
