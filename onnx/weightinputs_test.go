package onnx

import (
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// An IR-3 export lists every initializer as a graph input too; Load and
// Parse read them as weights: the inputs left are the data inputs, the IR
// version is raised to 4, and the model says how many it dropped.
func TestLoadDropsInitializersListedAsInputs(t *testing.T) {
	m := tinyModel()
	ir := int64(3)
	m.Proto.IrVersion = &ir
	g := m.Proto.Graph
	for _, init := range g.Initializer {
		g.Input = append(g.Input, TensorValueInfo(init.GetName(), onnxpb.TensorProto_FLOAT, init.GetDims()...))
	}
	path := saveTo(t, m, "ir3.onnx")
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(marshal(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]*Model{"Load": loaded, "Parse": parsed} {
		in := l.Proto.Graph.GetInput()
		if len(in) != 1 || in[0].GetName() != "x" || l.WeightInputs != 2 || l.Proto.GetIrVersion() != WeightInputIRVersion {
			t.Errorf("%s: inputs %v, WeightInputs %d, IR %d; want [x], 2, 4", what, in, l.WeightInputs, l.Proto.GetIrVersion())
		}
		if len(l.Proto.Graph.GetInitializer()) != 2 || !strings.Contains(l.WeightInputsNote(), "2 of its initializers") {
			t.Errorf("%s: initializers %d, note %q", what, len(l.Proto.Graph.GetInitializer()), l.WeightInputsNote())
		}
		if c := l.Clone(); c.WeightInputs != 2 || c.FileIRVersion != 3 {
			t.Errorf("%s: Clone lost WeightInputs or FileIRVersion", what)
		}
		var text strings.Builder
		if err := l.Summary().WriteText(&text); err != nil || !strings.Contains(text.String(), "ir version    4 (the file's 3, which listed its 2 weights as graph inputs too; read as weights)") {
			t.Errorf("%s: summary %v\n%s", what, err, text.String())
		}
	}
	plain, err := Parse(marshal(t, tinyModel()), "")
	if err != nil || plain.WeightInputs != 0 || plain.WeightInputsNote() != "" || plain.Proto.GetIrVersion() != 8 {
		t.Errorf("a model without weight inputs: %d, %q, IR %d, %v", plain.WeightInputs, plain.WeightInputsNote(), plain.Proto.GetIrVersion(), err)
	}
}
