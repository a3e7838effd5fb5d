package onnx

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxNesting is the message nesting depth past which ONNX Runtime's
// protobuf parser (C++ protobuf's default recursion limit) refuses a model
// with only "protobuf parsing failed"; Parse refuses such a model with the
// reason instead.
const MaxNesting = 100

// checkNesting refuses models whose subgraphs (If, Loop, Scan bodies) nest so
// deep that ONNX Runtime cannot parse them: each level is three messages.
func (m *Model) checkNesting() error {
	if d := MessageDepth(m.Proto.ProtoReflect()); d > MaxNesting {
		return fmt.Errorf("the model's protobuf messages nest %d deep (subgraphs inside subgraphs), more than the %d levels ONNX Runtime's parser accepts; flatten the nested If/Loop/Scan bodies",
			d, MaxNesting)
	}
	return nil
}

// MessageDepth returns how deep messages nest in m (1 for a message
// without message fields).
func MessageDepth(m protoreflect.Message) int {
	deepest := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				deepest = max(deepest, MessageDepth(l.Get(i).Message()))
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					deepest = max(deepest, MessageDepth(mv.Message())+1)
				}
				return true
			})
		default:
			deepest = max(deepest, MessageDepth(v.Message()))
		}
		return true
	})
	return deepest + 1
}
