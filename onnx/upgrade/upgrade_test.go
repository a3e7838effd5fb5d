package upgrade_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/onnx/upgrade"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// xShape is every case's input: small, with odd sizes so that rounding
// differences between sampling rules show.
var xShape = []int64{1, 3, 5, 7}

// oneOp is a model of one node of op at opset, reading X (and the given
// initializers) and writing outs.
func oneOp(opset int64, op string, inputs []string, inits []*onnxpb.TensorProto, outs int, attrs ...*onnxpb.AttributeProto) *onnx.Model {
	b := &onnx.Builder{}
	for _, t := range inits {
		b.Initializer(t)
	}
	names := make([]string, outs)
	var outInfo []*onnxpb.ValueInfoProto
	for i := range names {
		names[i] = "Y" + string(rune('0'+i))
		outInfo = append(outInfo, &onnxpb.ValueInfoProto{Name: &names[i]})
	}
	b.Emit(op, "old_"+op, append([]string{"X"}, inputs...), names, attrs...)
	return onnx.NewModel(b.Graph("g", []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("X", onnxpb.TensorProto_FLOAT, xShape...)}, outInfo), opset)
}

// run runs m on x and returns its outputs.
func run(t *testing.T, m *onnx.Model, x []float32) []*runtime.Tensor {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatalf("opset %d: %v", m.Opset(""), err)
	}
	defer s.Close()
	out, err := s.Run(runtime.NewFloat32(xShape, x))
	if err != nil {
		t.Fatalf("opset %d: %v", m.Opset(""), err)
	}
	return out
}

func input() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 3*5*7)
	for i := range x {
		x[i] = r.Float32()*4 - 2
	}
	return x
}

// sameOutputs fails unless got and want hold the same shapes and values.
func sameOutputs(t *testing.T, got, want []*runtime.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Int64, w.Int64) || len(g.Float32) != len(w.Float32) {
			t.Fatalf("output %d: shape %v (%d floats), want %v (%d floats)", i, g.Shape, len(g.Float32), w.Shape, len(w.Float32))
		}
		for j := range w.Float32 {
			if d := math.Abs(float64(g.Float32[j] - w.Float32[j])); d > 1e-5 || math.IsNaN(float64(g.Float32[j])) {
				t.Fatalf("output %d [%d]: %g, want %g", i, j, g.Float32[j], w.Float32[j])
			}
		}
	}
}

func f32(name string, dims []int64, v ...float32) *onnxpb.TensorProto {
	return onnx.NewFloat32Tensor(name, dims, v)
}

// Each adapter: the old node and its upgrade give the same outputs in ONNX
// Runtime, at the opset of the change and at MaxOpset, and the upgrade
// changed the node (so the case exercises its adapter).
func TestAdaptersAgreeWithTheOldOperator(t *testing.T) {
	runtimetest.Require(t)
	cases := []struct {
		name string
		m    *onnx.Model
		to   []int64
	}{
		{"Upsample-7 nearest ×3", oneOp(7, "Upsample", nil, nil, 1, onnx.FloatsAttr("scales", 1, 1, 3, 3)), []int64{10, 11, 13}},
		{"Upsample-7 linear ×2", oneOp(7, "Upsample", nil, nil, 1, onnx.FloatsAttr("scales", 1, 1, 2, 2), onnx.StringAttr("mode", "linear")), []int64{10, 11, 13}},
		{"Upsample-9 scales input", oneOp(9, "Upsample", []string{"s"}, []*onnxpb.TensorProto{f32("s", []int64{4}, 1, 1, 2, 3)}, 1), []int64{10, 11}},
		{"Resize-10 nearest ×0.6", oneOp(10, "Resize", []string{"s"}, []*onnxpb.TensorProto{f32("s", []int64{4}, 1, 1, 0.6, 0.6)}, 1), []int64{11, 13}},
		{"Resize-10 linear ×1.5", oneOp(10, "Resize", []string{"s"}, []*onnxpb.TensorProto{f32("s", []int64{4}, 1, 1, 1.5, 1.5)}, 1, onnx.StringAttr("mode", "linear")), []int64{11}},
		{"Clip-7 min and max", oneOp(7, "Clip", nil, nil, 1, onnx.FloatAttr("min", -0.5), onnx.FloatAttr("max", 0.75)), []int64{11, 13}},
		{"Clip-7 max only", oneOp(7, "Clip", nil, nil, 1, onnx.FloatAttr("max", 0.25)), []int64{11}},
		{"Pad-2 constant", oneOp(7, "Pad", nil, nil, 1, onnx.IntsAttr("pads", 0, 0, 1, 2, 0, 1, 0, 3), onnx.FloatAttr("value", 1.5)), []int64{11, 13}},
		{"Pad-2 reflect", oneOp(7, "Pad", nil, nil, 1, onnx.IntsAttr("pads", 0, 0, 1, 2, 0, 0, 2, 1), onnx.StringAttr("mode", "reflect")), []int64{11}},
		{"Slice-1", oneOp(7, "Slice", nil, nil, 1, onnx.IntsAttr("starts", 1, -5), onnx.IntsAttr("ends", 4, 100), onnx.IntsAttr("axes", 2, 3)), []int64{10, 13}},
		{"TopK-1", oneOp(7, "TopK", nil, nil, 2, onnx.IntAttr("k", 3)), []int64{10, 11}},
		{"Unsqueeze-1", oneOp(7, "Unsqueeze", nil, nil, 1, onnx.IntsAttr("axes", 0, 3)), []int64{13}},
		{"Squeeze-1", oneOp(7, "Squeeze", nil, nil, 1, onnx.IntsAttr("axes", 0)), []int64{13}},
		{"ReduceSum-1", oneOp(7, "ReduceSum", nil, nil, 1, onnx.IntsAttr("axes", 1, 3), onnx.IntAttr("keepdims", 0)), []int64{13}},
		{"ReduceMean-1", oneOp(7, "ReduceMean", nil, nil, 1, onnx.IntsAttr("axes", 2, 3)), []int64{18}},
		{"ReduceMax-1", oneOp(7, "ReduceMax", nil, nil, 1, onnx.IntsAttr("axes", 1)), []int64{18}},
		{"Split-2 sizes", oneOp(7, "Split", nil, nil, 2, onnx.IntAttr("axis", 1), onnx.IntsAttr("split", 1, 2)), []int64{13, 18}},
		{"Split-2 equal", oneOp(7, "Split", nil, nil, 3, onnx.IntAttr("axis", 1)), []int64{18}},
		{"BatchNormalization-7 spatial", oneOp(7, "BatchNormalization", []string{"sc", "b", "m", "v"}, []*onnxpb.TensorProto{
			f32("sc", []int64{3}, 1, 2, 0.5), f32("b", []int64{3}, 0, 0.1, -0.2), f32("m", []int64{3}, 0.3, -0.1, 0), f32("v", []int64{3}, 1, 0.5, 2)},
			1, onnx.IntAttr("spatial", 1), onnx.FloatAttr("epsilon", 1e-3)), []int64{9, 14, 15}},
		{"Dropout-7 ratio", oneOp(7, "Dropout", nil, nil, 1, onnx.FloatAttr("ratio", 0.3)), []int64{12, 13}},
		{"Softmax-7 axis 1", oneOp(7, "Softmax", nil, nil, 1), []int64{13}},
		{"Softmax-7 axis 2", oneOp(7, "Softmax", nil, nil, 1, onnx.IntAttr("axis", 2)), []int64{13}},
		{"LogSoftmax-7 axis -1", oneOp(7, "LogSoftmax", nil, nil, 1, onnx.IntAttr("axis", -1)), []int64{13}},
		{"Hardmax-7 axis 1", oneOp(7, "Hardmax", nil, nil, 1), []int64{13}},
	}
	x := input()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := run(t, c.m, x)
			for _, to := range append(c.to, upgrade.MaxOpset) {
				before, _ := c.m.Marshal()
				up, sum, err := upgrade.Upgrade(c.m, to)
				if err != nil {
					t.Fatalf("to %d: %v", to, err)
				}
				if after, _ := c.m.Marshal(); string(after) != string(before) {
					t.Fatal("Upgrade changed the model it was given")
				}
				if up.Opset("") != to || len(sum.Rewritten) != 1 {
					t.Fatalf("to %d: opset %d, summary %v; want the node rewritten", to, up.Opset(""), sum)
				}
				sameOutputs(t, run(t, up, x), want)
			}
		})
	}
}

// An operator without adapters, a node holding a subgraph and a node an
// adapter cannot carry are each named, and nothing comes back.
func TestUpgradeNamesWhatItCannotUpgrade(t *testing.T) {
	scatter := oneOp(7, "Scatter", []string{"i", "u"}, []*onnxpb.TensorProto{
		onnx.NewInt64Tensor("i", []int64{1, 1, 1, 1}, []int64{0}), f32("u", []int64{1, 1, 1, 1}, 5)}, 1)
	bn := oneOp(7, "BatchNormalization", []string{"sc", "b", "m", "v"}, []*onnxpb.TensorProto{
		f32("sc", []int64{3}, 1, 1, 1), f32("b", []int64{3}, 0, 0, 0), f32("m", []int64{3}, 0, 0, 0), f32("v", []int64{3}, 1, 1, 1)},
		1, onnx.IntAttr("spatial", 0))
	loop := oneOp(7, "If", nil, nil, 1, &onnxpb.AttributeProto{Name: strp("then_branch"), G: &onnxpb.GraphProto{}})
	mixed := oneOp(10, "Resize", []string{"s"}, []*onnxpb.TensorProto{f32("s", []int64{4}, 1, 1, 2, 0.5)}, 1)
	for _, c := range []struct {
		m    *onnx.Model
		to   int64
		want string
	}{
		{scatter, 13, `no adapter for Scatter (1 node, first "old_Scatter")`},
		{bn, 9, `BatchNormalization node "old_BatchNormalization": spatial=0`},
		{loop, 13, `no adapter for If`},
		{mixed, 11, `Resize node "old_Resize": scales [1 1 2 0.5] both up- and downsample`},
	} {
		_, _, err := upgrade.Upgrade(c.m, c.to)
		var ue *upgrade.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Upgrade to %d: %v; want an UnsupportedError with %q", c.to, err, c.want)
		}
	}
	for _, to := range []int64{6, upgrade.MaxOpset + 1} {
		if _, _, err := upgrade.Upgrade(scatter, to); err == nil {
			t.Errorf("Upgrade from 7 to %d: no error", to)
		}
	}
}

// A node of another domain is left as it is, and the IR version rises
// with the opset.
func TestUpgradeSetsOpsetAndIRVersion(t *testing.T) {
	m := oneOp(7, "Clip", nil, nil, 1, onnx.FloatAttr("max", 1))
	ir := int64(3)
	m.Proto.IrVersion = &ir
	custom := &onnxpb.NodeProto{OpType: strp("Clip"), Domain: strp("com.example"), Input: []string{"Y0"}, Output: []string{"Z"},
		Attribute: []*onnxpb.AttributeProto{onnx.FloatAttr("max", 1)}}
	m.Proto.Graph.Node = append(m.Proto.Graph.Node, custom)
	up, sum, err := upgrade.Upgrade(m, 13)
	if err != nil {
		t.Fatal(err)
	}
	if up.Proto.GetIrVersion() != 7 || up.Opset("") != 13 || sum.Rewritten["Clip"] != 1 {
		t.Fatalf("IR %d, opset %d, %v", up.Proto.GetIrVersion(), up.Opset(""), sum)
	}
	if n := up.Proto.Graph.Node[1]; n.GetDomain() != "com.example" || onnx.Attr(n, "max") == nil || len(n.Input) != 1 {
		t.Fatalf("the com.example node was rewritten: %v", n)
	}
	if got := sum.String(); got != "opset 7 → 13 (rewrote Clip ×1)" {
		t.Errorf("summary %q", got)
	}
}

func strp(s string) *string { return &s }
