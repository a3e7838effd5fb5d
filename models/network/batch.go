package network

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

// SetBatch fixes the batch dimension of the model's inputs and outputs at n,
// for training graphs, whose shapes are static. Exporters often declare a
// batch of 1 even where the graph computes any batch; constant 4-D Resize
// sizes that spell out the old batch, as initializers or Constant nodes,
// are rewritten too. Other constants that
// bake in the batch (e.g. Reshape targets) are left to the shape probe,
// which reports them.
func SetBatch(m *onnx.Model, n int64) error {
	if n < 1 {
		return fmt.Errorf("batch %d must be at least 1", n)
	}
	g := m.Graph()
	var old int64 = -1
	for _, vi := range append(onnx.DataInputs(g), g.Output...) {
		tt := vi.GetType().GetTensorType()
		if tt == nil || len(tt.GetShape().GetDim()) == 0 {
			continue
		}
		d := tt.Shape.Dim[0]
		if v := d.GetDimValue(); v > 0 {
			old = v
		}
		d.Value = &onnx.DimValue{DimValue: n}
	}
	g.ValueInfo = nil // stale batch sizes; ONNX Runtime infers them again
	if old < 0 || old == n {
		return nil
	}
	prod := onnx.Producers(g)
	for _, node := range g.Node {
		if node.GetOpType() != "Resize" || len(node.Input) < 4 || node.Input[3] == "" {
			continue
		}
		s := m.Initializer(node.Input[3])
		if s == nil {
			// Exporters also spell sizes as a Constant node.
			if c := prod[node.Input[3]]; c != nil && c.GetOpType() == "Constant" {
				for _, a := range c.GetAttribute() {
					if a.GetName() == "value" {
						s = a.GetT()
					}
				}
			}
		}
		if s == nil {
			continue
		}
		if v, err := onnx.Int64s(s); err == nil && len(v) == 4 && v[0] == old {
			v[0] = n
			*s = *onnx.NewInt64Tensor(s.GetName(), s.Dims, v)
		}
	}
	return nil
}
