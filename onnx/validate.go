package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// validate checks what segtune relies on before it touches a model's tensors:
// bounded dims and payloads that match them. It runs before any tensor data is
// allocated, so a hostile file is refused at the cost of reading its bytes
// only. Structural problems of the graph itself (unknown ops, dangling names)
// are left to ONNX Runtime, which reports them with the node's name.
func (m *Model) validate() error {
	if err := m.checkNesting(); err != nil {
		return err
	}
	for _, t := range m.allTensors() {
		if _, err := NumElements(t.GetDims()); err != nil {
			return fmt.Errorf("tensor %q: %w", t.GetName(), err)
		}
		if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
			continue // checked against the data file when it is read
		}
		if _, err := checkedCount(t); err != nil {
			return err
		}
	}
	return nil
}
