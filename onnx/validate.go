package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// validate checks what segtune relies on before it touches a model's tensors:
// bounded dims and payloads that match them. Structural problems of the graph
// itself (unknown ops, dangling names) are left to ONNX Runtime, which reports
// them with the node's name.
func (m *Model) validate() error {
	for _, t := range m.allTensors() {
		if _, err := NumElements(t.GetDims()); err != nil {
			return fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
		if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
			continue
		}
		if onnxpb.TensorProto_DataType(t.GetDataType()) == onnxpb.TensorProto_STRING {
			continue
		}
		if _, err := checkedCount(t); err != nil {
			return err
		}
	}
	return nil
}
