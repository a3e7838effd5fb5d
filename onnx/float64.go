package onnx

import (
	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx/onnxpb"
)

var (
	tFloat  = int32(onnxpb.TensorProto_FLOAT)
	tDouble = int32(onnxpb.TensorProto_DOUBLE)
)

// ToFloat64 returns a copy of m computing in double precision (for
// gradient checks, and for graphs that need it, such as the projection's):
// float
// initializers, constant attributes, Cast targets and declared types are
// switched from FLOAT to DOUBLE. ONNX Runtime's CPU provider lacks double
// kernels for some operators (Conv, Resize...); opening a session on the
// result fails then.
func ToFloat64(m *Model) *Model {
	c := m.Clone()
	g := c.Graph()
	for i, t := range g.Initializer {
		g.Initializer[i] = tensorToDouble(t)
	}
	for _, vs := range [][]*onnxpb.ValueInfoProto{g.Input, g.Output, g.ValueInfo} {
		for _, v := range vs {
			if tt := v.GetType().GetTensorType(); tt != nil && tt.GetElemType() == tFloat {
				tt.ElemType = proto.Int32(tDouble)
			}
		}
	}
	for _, n := range g.Node {
		for _, a := range n.Attribute {
			if a.T != nil {
				a.T = tensorToDouble(a.T)
			}
			if n.GetOpType() == "Cast" && a.GetName() == "to" && a.GetI() == int64(tFloat) {
				a.I = proto.Int64(int64(tDouble))
			}
		}
	}
	return c
}

func tensorToDouble(t *onnxpb.TensorProto) *onnxpb.TensorProto {
	if t.GetDataType() != tFloat {
		return t
	}
	v, err := Float64s(t)
	if err != nil {
		return t
	}
	return NewFloat64Tensor(t.GetName(), t.GetDims(), v)
}
