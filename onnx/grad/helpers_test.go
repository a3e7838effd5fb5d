package grad_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/gradcheck"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// tol is the acceptance bound on the relative error of every check.
const tol = 1e-3

// opModel is a one-graph test model: every input is an initializer.
type opModel struct {
	opset int64
	nodes []*onnxpb.NodeProto
	inits []*onnxpb.TensorProto
	outs  []string
	rng   *rand.Rand
	// params are the initializers made by rand: the default trainables.
	params []string
	// step overrides the checker's relative step (0: default).
	step float64
}

func newOpModel(opset int64) *opModel {
	return &opModel{opset: opset, rng: rand.New(rand.NewPCG(7, uint64(opset)))}
}

// rand adds a float initializer with values in ±[0.2, 1.2], away from the
// kinks at 0 so finite differences do not straddle them.
func (m *opModel) rand(name string, dims ...int64) string {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	v := make([]float32, n)
	for i := range v {
		x := 0.2 + m.rng.Float32()
		if m.rng.IntN(2) == 0 {
			x = -x
		}
		v[i] = x
	}
	m.inits = append(m.inits, onnx.NewFloat32Tensor(name, dims, v))
	m.params = append(m.params, name)
	return name
}

func (m *opModel) floats(name string, dims []int64, v ...float32) string {
	m.inits = append(m.inits, onnx.NewFloat32Tensor(name, dims, v))
	return name
}

func (m *opModel) ints(name string, dims []int64, v ...int64) string {
	m.inits = append(m.inits, onnx.NewInt64Tensor(name, dims, v))
	return name
}

func (m *opModel) node(op string, ins, outs []string, attrs ...*onnxpb.AttributeProto) {
	m.nodes = append(m.nodes, &onnxpb.NodeProto{
		Name: proto.String(fmt.Sprintf("n%d_%s", len(m.nodes), op)), OpType: proto.String(op),
		Input: ins, Output: outs, Attribute: attrs,
	})
}

func (m *opModel) model() *onnx.Model {
	g := &onnxpb.GraphProto{Name: proto.String("t"), Node: m.nodes, Initializer: m.inits}
	for _, o := range m.outs {
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	return &onnx.Model{Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(m.opset)}},
		Graph:       g,
	}}
}

// check differentiates the model's outputs (through random upstream
// gradients) with respect to the rand initializers, or those matching
// trainable when given.
func (m *opModel) check(t *testing.T, trainable ...string) {
	t.Helper()
	if trainable == nil {
		trainable = m.params
	}
	cfg := grad.Config{Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs}
	res, err := gradcheck.Check(m.model(), cfg, nil, gradcheck.Options{Directions: 3, Seed: 1, Step: m.step})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Directions {
		if d.RelErr > tol {
			t.Errorf("analytic %.10g numeric %.10g: relative error %.3g > %g", d.Analytic, d.Numeric, d.RelErr, tol)
		}
	}
	t.Logf("RESULT %s float64=%v max_rel_err=%.2e", t.Name(), res.Float64, res.MaxRelErr)
}

func ai(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func ais(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func af(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func afs(name string, v ...float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
}

func as(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}
