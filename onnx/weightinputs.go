package onnx

import "fmt"

// Old exporters (keras2onnx, tf2onnx, torch.onnx before 1.x's
// keep_initializers_as_inputs=False) wrote models of IR version 3, where
// every initializer had to be listed as a graph input too. ONNX Runtime
// then treats each weight as an input a caller may override: float16
// conversion, quantization and training graphs that rewrite a weight
// without its input entry fail with type mismatches, and the weights
// crowd the model's real inputs. Load and Parse drop those entries once,
// so every command reads the weights as weights.

// WeightInputIRVersion is the IR version from which initializers need not
// be graph inputs; a model whose duplicate entries were dropped declares
// at least it.
const WeightInputIRVersion = 4

// DropWeightInputs removes the main graph's inputs that are also
// initializers and returns how many it removed. A model that had some is
// raised to IR version 4, the first that allows initializers without
// inputs, so that it stays valid as written.
func (m *Model) DropWeightInputs() int {
	g := m.Proto.GetGraph()
	if g == nil {
		return 0
	}
	inits := make(map[string]bool, len(g.GetInitializer()))
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	kept := g.Input[:0]
	for _, in := range g.GetInput() {
		if !inits[in.GetName()] {
			kept = append(kept, in)
		}
	}
	dropped := len(g.Input) - len(kept)
	clear(g.Input[len(kept):])
	g.Input = kept
	if dropped > 0 && m.Proto.GetIrVersion() < WeightInputIRVersion {
		m.FileIRVersion = m.Proto.GetIrVersion()
		ir := int64(WeightInputIRVersion)
		m.Proto.IrVersion = &ir
	}
	m.WeightInputs += dropped
	return dropped
}

// WeightInputsNote is the one line that says what became of a loaded
// model's weight inputs, for reports and exports; "" when it had none.
func (m *Model) WeightInputsNote() string {
	if m.WeightInputs == 0 {
		return ""
	}
	return fmt.Sprintf("the model listed %d of its initializers as graph inputs too (the IR<4 convention of old exporters); they are read as weights, and the written model lists them as initializers only", m.WeightInputs)
}
