package grad_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
)

// tol is the acceptance bound on the relative error of every check.
const tol = 1e-3

// opModel is a one-graph test model: every input is an initializer.
type opModel struct {
	opset int64
	b     *onnx.Builder // appends to nodes and inits, which tests may also edit
	nodes []*onnx.NodeProto
	inits []*onnx.TensorProto
	outs  []string
	rng   *rand.Rand
	// params are the initializers made by rand: the default trainables.
	params []string
	// step overrides the checker's relative step (0: default).
	step float64
}

func newOpModel(opset int64) *opModel {
	m := &opModel{opset: opset, rng: rand.New(rand.NewPCG(7, uint64(opset)))}
	m.b = &onnx.Builder{Nodes: &m.nodes, Inits: &m.inits}
	return m
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
	m.params = append(m.params, name)
	return m.b.Initializer(onnx.NewFloat32Tensor(name, dims, v))
}

func (m *opModel) floats(name string, dims []int64, v ...float32) string {
	return m.b.Initializer(onnx.NewFloat32Tensor(name, dims, v))
}

func (m *opModel) ints(name string, dims []int64, v ...int64) string {
	return m.b.Initializer(onnx.NewInt64Tensor(name, dims, v))
}

// node appends a node named after its position and op type.
func (m *opModel) node(op string, ins, outs []string, attrs ...*onnx.AttributeProto) {
	m.b.Emit(op, fmt.Sprintf("n%d_%s", len(m.nodes), op), ins, outs, attrs...)
}

func (m *opModel) model() *onnx.Model {
	var outs []*onnx.ValueInfoProto
	for _, o := range m.outs {
		outs = append(outs, &onnx.ValueInfoProto{Name: proto.String(o)})
	}
	return onnx.NewModel(m.b.Graph("t", nil, outs), m.opset)
}

// check differentiates the model's outputs (through random upstream
// gradients) with respect to the rand initializers, or those matching
// trainable when given.
func (m *opModel) check(t *testing.T, trainable ...string) {
	t.Helper()
	if trainable == nil {
		trainable = m.params
	}
	cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs}
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

// Short names for the attribute constructors the op tests use on every line.
var (
	ai  = onnx.IntAttr
	ais = onnx.IntsAttr
	af  = onnx.FloatAttr
	afs = onnx.FloatsAttr
	as  = onnx.StringAttr
)
