package runtime

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// ortNestingLimit is the message nesting depth past which ONNX Runtime's
// protobuf parser (C++ protobuf's default recursion limit) refuses a
// model with only "protobuf parsing failed".
const ortNestingLimit = 100

// explainParseFailure adds the reason to ONNX Runtime's bare "protobuf
// parsing failed" when it is the nesting limit: subgraphs (If, Loop, Scan
// bodies) inside subgraphs, each level three messages deeper.
func explainParseFailure(model []byte, err error) error {
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "protobuf parsing failed") {
		return err
	}
	var m onnxpb.ModelProto
	if proto.Unmarshal(model, &m) != nil {
		return err
	}
	if d := MessageDepth(m.ProtoReflect()); d > ortNestingLimit {
		return fmt.Errorf("%w: the model's protobuf messages nest %d deep (subgraphs inside subgraphs), more than the %d levels ONNX Runtime's parser accepts; flatten the nested If/Loop/Scan bodies",
			err, d, ortNestingLimit)
	}
	return err
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
