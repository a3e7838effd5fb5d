package grad_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/ortprofile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestWeightGradsRunEarly: in ONNX Runtime's execution order, each layer's
// weight gradient runs as soon as its output gradient exists — the last
// layer's first — rather than all of them after the whole input-gradient
// chain (which kept every layer's output gradient alive to the end).
func TestWeightGradsRunEarly(t *testing.T) {
	runtimetest.Require(t)
	m := newOpModel(13)
	h := m.rand("x", 2, 3, 8, 8)
	cin := int64(3)
	for i, name := range []string{"w1", "w2", "w3"} {
		out := "y"
		if i < 2 {
			out = name + "_out"
		}
		m.node("Conv", []string{h, m.rand(name, 4, cin, 3, 3)}, []string{out}, ais("pads", 1, 1, 1, 1))
		cin = 4
		if i < 2 {
			m.node("Relu", []string{out}, []string{name + "_act"})
			h = name + "_act"
		}
	}
	m.outs = []string{"y"}
	gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"w1", "w2", "w3"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
	if err != nil {
		t.Fatal(err)
	}
	g := gs.Training.Proto.Graph
	// The training graph stays topologically sorted.
	known := map[string]bool{"": true}
	for _, x := range g.Input {
		known[x.GetName()] = true
	}
	for _, x := range g.Initializer {
		known[x.GetName()] = true
	}
	producerOf := map[string]string{}
	for _, n := range g.Node {
		for _, x := range n.Input {
			if !known[x] {
				t.Fatalf("node %s reads %q before it is produced", n.GetName(), x)
			}
		}
		for _, o := range n.Output {
			known[o] = true
			producerOf[o] = n.GetName()
		}
	}
	// The node computing each weight gradient (the input of its final
	// Identity, which ONNX Runtime removes).
	last := map[string]string{}
	for _, n := range g.Node {
		if n.GetOpType() == "Identity" && strings.HasPrefix(n.Output[0], grad.GradPrefix) {
			last[strings.TrimPrefix(n.Output[0], grad.GradPrefix)] = producerOf[n.Input[0]]
		}
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "prof")
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1, Tuning: runtime.Tuning{ProfilePrefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	var feeds []*runtime.Tensor
	for _, in := range s.Inputs {
		for _, p := range append(gs.Params, m.inits...) {
			if p.GetName() == in.Name {
				v, err := onnx.Float32s(p)
				if err != nil {
					t.Fatal(err)
				}
				feeds = append(feeds, runtime.NewFloat32(p.GetDims(), v))
				break
			}
		}
		if in.Name == grad.GradInPrefix+"y" {
			feeds = append(feeds, runtime.NewFloat32([]int64{2, 4, 8, 8}, make([]float32, 2*4*8*8)))
		}
	}
	if _, err := s.Run(feeds...); err != nil {
		t.Fatal(err)
	}
	s.Close()
	nodes, err := ortprofile.ReadNewest(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var order []string // one run: each node's first kernel is its place
	for _, n := range nodes {
		order = append(order, n.Name)
	}
	pos := func(p string) int {
		i := slices.Index(order, last[p])
		if i < 0 {
			t.Fatalf("%s's gradient node %q did not run (order %v)", p, last[p], order)
		}
		return i
	}
	if !(pos("w3") < pos("w2") && pos("w2") < pos("w1")) {
		t.Errorf("weight gradients ran at positions w3 %d, w2 %d, w1 %d of %d: want the last layer's first", pos("w3"), pos("w2"), pos("w1"), len(order))
	}
}
