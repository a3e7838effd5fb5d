package grad_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
)

// wantUnsupported fails unless err is a *grad.UnsupportedError about node
// and op ("" when it is about no node) whose What mentions what.
func wantUnsupported(t *testing.T, err error, node, op, what string) {
	t.Helper()
	var ue *grad.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want an UnsupportedError", err)
	}
	if ue.Node != node || ue.Op != op {
		t.Errorf("UnsupportedError about node %q (%s), want %q (%s): %v", ue.Node, ue.Op, node, op, err)
	}
	if !strings.Contains(ue.What, what) {
		t.Errorf("UnsupportedError.What %q does not mention %q", ue.What, what)
	}
}

// TestUnsupported: every kind of valid model the compiler refuses — an
// operator without a rule, an attribute or input value a rule or an
// upgrade does not handle, a Constant or graph input it cannot read, too
// old an opset, a pattern selecting nothing — is an UnsupportedError naming
// the node where there is one.
func TestUnsupported(t *testing.T) {
	bool1 := func(name string, v bool) *onnx.TensorProto {
		return &onnx.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnx.Bool)), Int32Data: []int32{map[bool]int32{false: 0, true: 1}[v]}}
	}
	for _, tc := range []struct {
		name      string
		opset     int64
		build     func(m *opModel) *onnx.Model // nil result: m.model()
		trainable []string                     // nil: "x"
		node, op  string
		what      string
	}{
		{name: "op_without_rule", build: func(m *opModel) *onnx.Model {
			m.node("Sin", []string{m.rand("x", 2, 3)}, []string{"y"})
			return nil
		}, node: "n0_Sin", op: "Sin", what: "no gradient rule"},
		{name: "foreign_domain", build: func(m *opModel) *onnx.Model {
			m.node("Gelu", []string{m.rand("x", 2, 3)}, []string{"y"})
			m.nodes[0].Domain = proto.String("com.microsoft")
			md := m.model()
			md.Proto.OpsetImport = append(md.Proto.OpsetImport, &onnx.OperatorSetIdProto{Domain: proto.String("com.microsoft"), Version: proto.Int64(1)})
			return md
		}, node: "n0_Gelu", op: "Gelu", what: `"com.microsoft"`},
		{name: "attribute/Resize_mode", build: func(m *opModel) *onnx.Model {
			m.node("Resize", []string{m.rand("x", 1, 1, 2, 2), "", m.floats("s", []int64{4}, 1, 1, 2, 2)}, []string{"y"}, as("mode", "cubic"))
			return nil
		}, node: "n0_Resize", op: "Resize", what: `"cubic"`},
		{name: "attribute/Resize_tf_crop_and_resize", build: func(m *opModel) *onnx.Model {
			m.node("Resize", []string{m.rand("x", 1, 1, 2, 2), m.floats("roi", []int64{8}, 0, 0, 0, 0, 1, 1, 1, 1), m.floats("s", []int64{4}, 1, 1, 2, 2)}, []string{"y"},
				as("mode", "linear"), as("coordinate_transformation_mode", "tf_crop_and_resize"))
			return nil
		}, node: "n0_Resize", op: "Resize", what: "tf_crop_and_resize"},
		{name: "attribute/Resize_antialias", opset: 18, build: func(m *opModel) *onnx.Model {
			m.node("Resize", []string{m.rand("x", 1, 1, 4, 4), "", m.floats("s", []int64{4}, 1, 1, 0.5, 0.5)}, []string{"y"}, as("mode", "linear"), ai("antialias", 1))
			return nil
		}, node: "n0_Resize", op: "Resize", what: "antialias"},
		{name: "attribute/MaxPool_storage_order", build: func(m *opModel) *onnx.Model {
			m.node("MaxPool", []string{m.rand("x", 1, 2, 4, 4)}, []string{"y", "idx"}, ais("kernel_shape", 2, 2), ai("storage_order", 1))
			return nil
		}, node: "n0_MaxPool", op: "MaxPool", what: "storage_order"},
		{name: "attribute/Einsum_ellipsis", build: func(m *opModel) *onnx.Model {
			m.node("Einsum", []string{m.rand("x", 2, 3, 4), m.rand("w", 4, 5)}, []string{"y"}, as("equation", "...ij,jk->...ik"))
			return nil
		}, node: "n0_Einsum", op: "Einsum", what: `"...ij,jk->...ik"`},
		{name: "attribute/Einsum_repeated_subscript", build: func(m *opModel) *onnx.Model {
			m.node("Einsum", []string{m.rand("x", 2, 3, 3)}, []string{"y"}, as("equation", "bii->bi"))
			return nil
		}, node: "n0_Einsum", op: "Einsum", what: `"bii->bi"`},
		{name: "output/LayerNormalization_mean", opset: 17, build: func(m *opModel) *onnx.Model {
			m.node("LayerNormalization", []string{m.rand("x", 2, 3), m.rand("s", 3)}, []string{"n", "mean"})
			m.node("Mul", []string{"n", "mean"}, []string{"y"})
			return nil
		}, node: "n0_LayerNormalization", op: "LayerNormalization", what: "Mean"},
		{name: "input/Dropout_training_mode", build: func(m *opModel) *onnx.Model {
			m.inits = append(m.inits, bool1("train", true))
			m.node("Dropout", []string{m.rand("x", 2, 3), "", "train"}, []string{"y"})
			return nil
		}, node: "n0_Dropout", op: "Dropout", what: "training mode"},
		{name: "input/Resize_computed_scales", build: func(m *opModel) *onnx.Model {
			// Scales computed from a trainable tensor are not constant.
			m.node("Abs", []string{m.rand("s", 4)}, []string{"sa"})
			m.node("Resize", []string{m.rand("x", 1, 1, 2, 2), "", "sa"}, []string{"y"})
			return nil
		}, trainable: []string{"x", "s"}, node: "n1_Resize", op: "Resize", what: "must be constant"},
		{name: "upgrade/Dropout_mask", opset: 7, build: func(m *opModel) *onnx.Model {
			m.node("Dropout", []string{m.rand("x", 2, 3)}, []string{"y", "mask"})
			return nil
		}, node: "n0_Dropout", op: "Dropout", what: "mask"},
		{name: "Constant_value_string", build: func(m *opModel) *onnx.Model {
			m.node("Relu", []string{m.rand("x", 2, 3)}, []string{"y"})
			m.nodes = append(m.nodes, &onnx.NodeProto{Name: proto.String("label"), OpType: proto.String("Constant"), Output: []string{"label"},
				Attribute: []*onnx.AttributeProto{{Name: proto.String("value_string"), Type: onnx.AttributeString.Enum(), S: []byte("person")}}})
			return nil
		}, node: "label", op: "Constant", what: "value_string"},
		{name: "uint8_graph_input", build: func(m *opModel) *onnx.Model {
			m.node("Cast", []string{"img"}, []string{"f"}, ai("to", int64(onnx.Float32)))
			m.node("Mul", []string{"f", m.rand("x", 1)}, []string{"y"})
			md := m.model()
			md.Proto.Graph.Input = []*onnx.ValueInfoProto{onnx.TensorValueInfo("img", onnx.Uint8, 1, 3, 2, 2)}
			return md
		}, what: "UINT8"},
		{name: "opset_6", opset: 6, build: func(m *opModel) *onnx.Model {
			m.node("Relu", []string{m.rand("x", 2, 3)}, []string{"y"})
			return nil
		}, what: "opset 6"},
		{name: "pattern_matches_nothing", build: func(m *opModel) *onnx.Model {
			m.node("Relu", []string{m.rand("x", 2, 3)}, []string{"y"})
			return nil
		}, trainable: []string{"decoder.*"}, what: "decoder.*"},
		{name: "name_matches_nothing", build: func(m *opModel) *onnx.Model {
			m.node("Relu", []string{m.rand("x", 2, 3)}, []string{"y"})
			return nil
		}, trainable: []string{"absent"}, what: "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opset := tc.opset
			if opset == 0 {
				opset = 13
			}
			m := newOpModel(opset)
			m.outs = []string{"y"}
			md := tc.build(m)
			if md == nil {
				md = m.model()
			}
			trainable := tc.trainable
			if trainable == nil {
				trainable = []string{"x"}
			}
			_, err := grad.Build(md, grad.Config{Prober: ortprobe.Prober{}, Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
			wantUnsupported(t, err, tc.node, tc.op, tc.what)
		})
	}
}

// ifModel is y = If(cond){then: a·k} {else: a·k·2} · w, where a = x·w is an
// outer tensor the branches read without listing it as an input. Before
// subgraphs were refused, the If looked constant (its only listed input,
// cond, is), was probed with zero inputs and folded to a constant zero.
func ifModel(cond bool) *opModel {
	m := newOpModel(13)
	m.node("Mul", []string{m.rand("x", 2, 3), m.rand("w", 2, 3)}, []string{"a"})
	branch := func(name string, k float32) *onnx.GraphProto {
		return &onnx.GraphProto{
			Name: proto.String(name),
			Node: []*onnx.NodeProto{{Name: proto.String(name + "_mul"), OpType: proto.String("Mul"),
				Input: []string{"a", name + "_k"}, Output: []string{name + "_out"}}},
			Initializer: []*onnx.TensorProto{{Name: proto.String(name + "_k"), DataType: proto.Int32(int32(onnx.Float32)),
				Dims: []int64{1}, FloatData: []float32{k}}},
			Output: []*onnx.ValueInfoProto{{Name: proto.String(name + "_out")}},
		}
	}
	m.inits = append(m.inits, &onnx.TensorProto{Name: proto.String("cond"), DataType: proto.Int32(int32(onnx.Bool)),
		Dims: []int64{1}, Int32Data: []int32{map[bool]int32{false: 0, true: 1}[cond]}})
	m.nodes = append(m.nodes, &onnx.NodeProto{Name: proto.String("branch"), OpType: proto.String("If"), Input: []string{"cond"}, Output: []string{"y"},
		Attribute: []*onnx.AttributeProto{
			{Name: proto.String("then_branch"), Type: onnx.AttributeGraph.Enum(), G: branch("then", 1)},
			{Name: proto.String("else_branch"), Type: onnx.AttributeGraph.Enum(), G: branch("else", 2)},
		}})
	m.outs = []string{"y"}
	return m
}

// TestSubgraphsRefused: a node with a graph attribute is refused with an
// error naming it, whether or not it is on the gradient path.
func TestSubgraphsRefused(t *testing.T) {
	for _, trainable := range [][]string{{"w"}, {"x"}} {
		m := ifModel(true)
		_, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: trainable, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"a"}})
		wantUnsupported(t, err, "branch", "If", "subgraph")
	}
}
