// Package ortprofile reads the JSON profile ONNX Runtime writes when a
// session with profiling closes (runtime.Tuning.ProfilePrefix): each
// node's kernel runs, its operator and its execution provider. It is the
// one reader of that format; runtime's placement, bench/trainstep's
// per-operator shares and onnx/grad/roleprofile's per-role table read
// through it.
package ortprofile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Node is one node's kernel runs in a profile.
type Node struct {
	// Name is the node's name in the graph ONNX Runtime ran (after its
	// own rewrites: fused and inserted nodes have names it made).
	Name     string
	Op       string
	Provider string
	// RunsMs are the kernel times of each run, in order, in milliseconds.
	RunsMs []float64
}

// Ms is the node's kernel time per run taken at its fastest run, the
// first left out when there are more: on a shared machine a node's slow
// runs are mostly other processes preempting it, and the minimum over
// runs is what the node itself costs.
func (n Node) Ms() float64 {
	d := n.RunsMs
	if len(d) == 0 {
		return 0
	}
	if len(d) > 1 {
		d = d[1:]
	}
	return slices.Min(d)
}

// Newest returns the newest profile written under prefix (ONNX Runtime
// appends the date, so the names sort by time).
func Newest(prefix string) (string, error) {
	files, _ := filepath.Glob(prefix + "_*.json")
	if len(files) == 0 {
		return "", fmt.Errorf("no ONNX Runtime profile under %s_*.json", prefix)
	}
	slices.Sort(files)
	return files[len(files)-1], nil
}

// Read returns the nodes of the profile file at path that ran at least one
// kernel, in the order of their first run.
func Read(path string) ([]Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var events []struct {
		Cat  string  `json:"cat"`
		Name string  `json:"name"`
		Dur  float64 `json:"dur"` // microseconds
		Args struct {
			OpName   string `json:"op_name"`
			Provider string `json:"provider"`
		} `json:"args"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, fmt.Errorf("ONNX Runtime profile %s: %w", path, err)
	}
	index := map[string]int{}
	var nodes []Node
	for _, e := range events {
		name, ok := strings.CutSuffix(e.Name, "_kernel_time")
		if e.Cat != "Node" || !ok {
			continue
		}
		i, seen := index[name]
		if !seen {
			i = len(nodes)
			index[name] = i
			nodes = append(nodes, Node{Name: name, Op: e.Args.OpName, Provider: e.Args.Provider})
		}
		nodes[i].RunsMs = append(nodes[i].RunsMs, e.Dur/1000)
	}
	return nodes, nil
}

// ReadNewest is Read of Newest(prefix).
func ReadNewest(prefix string) ([]Node, error) {
	path, err := Newest(prefix)
	if err != nil {
		return nil, err
	}
	return Read(path)
}
