package grad_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// wantUnsupported fails unless err is a *grad.UnsupportedError for op
// (any op when ""), whose message holds every one of parts.
func wantUnsupported(t *testing.T, err error, op string, parts ...string) {
	t.Helper()
	var ue *grad.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want an UnsupportedError", err)
	}
	if ue.Op != op {
		t.Errorf("UnsupportedError.Op %q, want %q (%v)", ue.Op, op, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestUnsupported(t *testing.T) {
	build := func(m *opModel, trainable ...string) error {
		_, err := grad.Build(m.model(), grad.Config{Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
		return err
	}
	t.Run("op_without_rule", func(t *testing.T) {
		m := newOpModel(13)
		m.node("Sin", []string{m.rand("x", 2, 3)}, []string{"y"})
		m.outs = []string{"y"}
		wantUnsupported(t, build(m, "x"), "Sin", "n0_Sin", "no gradient rule")
	})
	t.Run("foreign_domain", func(t *testing.T) {
		m := newOpModel(13)
		m.node("Gelu", []string{m.rand("x", 2, 3)}, []string{"y"})
		m.nodes[0].Domain = proto.String("com.microsoft")
		m.outs = []string{"y"}
		md := m.model()
		md.Proto.OpsetImport = append(md.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("com.microsoft"), Version: proto.Int64(1)})
		_, err := grad.Build(md, grad.Config{Trainable: []string{"x"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
		wantUnsupported(t, err, "Gelu", "com.microsoft")
	})
	t.Run("unsupported_attribute", func(t *testing.T) {
		m := newOpModel(13)
		m.node("Resize", []string{m.rand("x", 1, 1, 2, 2), "", m.floats("s", []int64{4}, 1, 1, 2, 2)}, []string{"y"}, as("mode", "cubic"))
		m.outs = []string{"y"}
		wantUnsupported(t, build(m, "x"), "Resize", "n0_Resize", "cubic")
	})
	t.Run("pattern_matches_nothing", func(t *testing.T) {
		m := newOpModel(13)
		m.node("Relu", []string{m.rand("x", 2, 3)}, []string{"y"})
		m.outs = []string{"y"}
		wantUnsupported(t, build(m, "decoder.*"), "", "decoder.*")
		wantUnsupported(t, build(m, "absent"), "", "absent")
	})
	t.Run("computed_scales", func(t *testing.T) {
		// Scales computed from a trainable tensor are not constant.
		m := newOpModel(13)
		m.node("Abs", []string{m.rand("s", 4)}, []string{"sa"})
		m.node("Resize", []string{m.rand("x", 1, 1, 2, 2), "", "sa"}, []string{"y"})
		m.outs = []string{"y"}
		wantUnsupported(t, build(m, "x", "s"), "Resize", "must be constant")
	})
}

// ifModel is y = If(cond){then: a·k} {else: a·k·2} · w, where a = x·w is an
// outer tensor the branches read without listing it as an input. Before
// subgraphs were refused, the If looked constant (its only listed input,
// cond, is), was probed with zero inputs and folded to a constant zero.
func ifModel(cond bool) *opModel {
	m := newOpModel(13)
	m.node("Mul", []string{m.rand("x", 2, 3), m.rand("w", 2, 3)}, []string{"a"})
	branch := func(name string, k float32) *onnxpb.GraphProto {
		return &onnxpb.GraphProto{
			Name: proto.String(name),
			Node: []*onnxpb.NodeProto{{Name: proto.String(name + "_mul"), OpType: proto.String("Mul"),
				Input: []string{"a", name + "_k"}, Output: []string{name + "_out"}}},
			Initializer: []*onnxpb.TensorProto{{Name: proto.String(name + "_k"), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
				Dims: []int64{1}, FloatData: []float32{k}}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String(name + "_out")}},
		}
	}
	m.inits = append(m.inits, &onnxpb.TensorProto{Name: proto.String("cond"), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)),
		Dims: []int64{1}, Int32Data: []int32{map[bool]int32{false: 0, true: 1}[cond]}})
	m.nodes = append(m.nodes, &onnxpb.NodeProto{Name: proto.String("branch"), OpType: proto.String("If"), Input: []string{"cond"}, Output: []string{"y"},
		Attribute: []*onnxpb.AttributeProto{
			{Name: proto.String("then_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: branch("then", 1)},
			{Name: proto.String("else_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: branch("else", 2)},
		}})
	m.outs = []string{"y"}
	return m
}

// TestSubgraphsRefused: a node with a graph attribute is refused with an
// error naming it, whether or not it is on the gradient path.
func TestSubgraphsRefused(t *testing.T) {
	for _, trainable := range [][]string{{"w"}, {"x"}} {
		m := ifModel(true)
		_, err := grad.Build(m.model(), grad.Config{Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"a"}})
		wantUnsupported(t, err, "If", `"branch"`, "subgraph")
	}
}
