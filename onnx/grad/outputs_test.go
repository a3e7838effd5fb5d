package grad_test

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestOmitModelOutputs: with Config.OmitModelOutputs the training graph
// outputs the loss, the gradients and the ExtraOutputs only — no logits,
// and no node of an output nothing reads (a second head's Softmax) — while
// the evaluation graph keeps the model's outputs, and the loss and
// gradients are those of the graph that outputs everything.
func TestOmitModelOutputs(t *testing.T) {
	runtimetest.Require(t)
	m := newOpModel(13)
	z := m.rand("z", 1, 3, 2, 2)
	m.node("Relu", []string{z}, []string{"logits"})
	m.node("Softmax", []string{"logits"}, []string{"probs"}, ai("axis", 1))
	m.outs = []string{"logits", "probs"}
	build := func(omit bool, extra ...string) (*grad.Graphs, []string) {
		gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, OmitModelOutputs: omit, ExtraOutputs: extra})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range gs.Training.Proto.Graph.Output {
			names = append(names, o.GetName())
		}
		return gs, names
	}
	all, allOuts := build(false)
	omit, omitOuts := build(true)
	_, extraOuts := build(true, "logits")
	if want := []string{grad.LossName, "logits", "probs", "grad/z"}; !slices.Equal(allOuts, want) {
		t.Errorf("training outputs %v, want %v", allOuts, want)
	}
	if want := []string{grad.LossName, "grad/z"}; !slices.Equal(omitOuts, want) {
		t.Errorf("OmitModelOutputs: training outputs %v, want %v", omitOuts, want)
	}
	if want := []string{grad.LossName, "logits", "grad/z"}; !slices.Equal(extraOuts, want) {
		t.Errorf("OmitModelOutputs, ExtraOutputs logits: training outputs %v, want %v", extraOuts, want)
	}
	for _, n := range omit.Training.Proto.Graph.Node {
		if n.GetOpType() == "Softmax" {
			t.Errorf("OmitModelOutputs: the training graph computes the unread output's %s", n.GetName())
		}
	}
	var evalOuts []string
	for _, o := range omit.Eval.Proto.Graph.Output {
		evalOuts = append(evalOuts, o.GetName())
	}
	if want := []string{grad.LossName, "logits", "probs"}; !slices.Equal(evalOuts, want) {
		t.Errorf("OmitModelOutputs: evaluation outputs %v, want %v", evalOuts, want)
	}
	run := func(gs *grad.Graphs) (loss float32, dz []float32) {
		data, err := gs.Training.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		zv := []float32{0.5, -1, 2, 0.25, 1, 1.5, -0.5, 3, -2, 0.75, 1.25, 0.1}
		var in []*runtime.Tensor
		for _, x := range s.Inputs {
			if x.Name == grad.TargetName {
				in = append(in, runtime.NewInt64(x.Shape, []int64{0, 1, 2, 255}))
			} else {
				in = append(in, runtime.NewFloat32(x.Shape, zv))
			}
		}
		out, err := s.Run(in...)
		if err != nil {
			t.Fatal(err)
		}
		return out[s.OutputIndex(grad.LossName)].Float32[0], out[s.OutputIndex("grad/z")].Float32
	}
	l1, g1 := run(all)
	l2, g2 := run(omit)
	if l1 != l2 || !slices.Equal(g1, g2) {
		t.Errorf("OmitModelOutputs: loss %v gradient %v, want %v %v", l2, g2, l1, g1)
	}
}
