package quantize

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
)

var tinyRanges = map[string]Range{"X": {-1, 1}, "r1": {0, 4}, "c1": {-3, 4}, "Y": {-5, 5}}

func TestPlanTinyNet(t *testing.T) {
	m, types := tinyNet(13)
	p, err := NewPlan(m, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The Relu is folded: its output's range replaces the Conv's; the
	// graph output Y stays float.
	if want := []string{"X", "r1"}; !slices.Equal(p.Calibrate, want) {
		t.Errorf("calibrate %v, want %v", p.Calibrate, want)
	}
	if p.FusedActivations != 1 || p.Quantized["Conv"] != 2 {
		t.Errorf("fused %d, quantized %v", p.FusedActivations, p.Quantized)
	}
}

func TestApplyTinyNet(t *testing.T) {
	m, types := tinyNet(13)
	p, err := NewPlan(m, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, sum, err := p.Apply(tinyRanges)
	if err != nil {
		t.Fatal(err)
	}
	g := q.Graph()
	got := ops(g)
	// X and r1: one QDQ pair each; W1, W2, B1, B2: a DequantizeLinear each.
	if got["Relu"] != 0 || got["Conv"] != 2 || got["QuantizeLinear"] != 2 || got["DequantizeLinear"] != 6 {
		t.Errorf("ops %v", got)
	}
	for _, n := range g.GetNode() {
		if d := n.GetDomain(); d != "" {
			t.Errorf("%s in domain %q: QDQ must use the default domain", n.GetName(), d)
		}
	}
	if sum.QDQPairs != 2 || sum.QuantizedWeights != 2 || sum.Int32Biases != 2 || !sum.PerChannel {
		t.Errorf("summary %+v", sum)
	}
	// conv1 now writes r1 itself, and reads dequantized X and W1.
	conv1 := producer(g, "r1")
	if conv1 == nil || conv1.GetOpType() != "Conv" {
		t.Fatalf("r1 is produced by %v, want conv1", conv1)
	}
	for i, in := range conv1.GetInput() {
		if p := producer(g, in); p == nil || p.GetOpType() != "DequantizeLinear" {
			t.Errorf("conv1 input %d (%s) is not dequantized", i, in)
		}
	}
	// Y is still the float output of conv2.
	if y := producer(g, "Y"); y == nil || y.GetOpType() != "Conv" {
		t.Errorf("Y is produced by %v", y)
	}
	// The weight: int8, per channel (axis 0, 4 scales), zero points 0,
	// channel 3 with a scale about 100× smaller than the others.
	wdq := producer(g, conv1.GetInput()[1])
	w := initializer(g, wdq.GetInput()[0])
	if w.GetDataType() != int32(onnx.Int8) || !slices.Equal(w.GetDims(), []int64{4, 3, 3, 3}) {
		t.Errorf("weight %s: type %d dims %v", w.GetName(), w.GetDataType(), w.GetDims())
	}
	scales, _ := onnx.Float32s(initializer(g, wdq.GetInput()[1]))
	zps, _ := onnx.Int64s(initializer(g, wdq.GetInput()[2]))
	if len(scales) != 4 || len(zps) != 4 || attr(wdq, "axis") != 0 {
		t.Fatalf("weight scales %v zero points %v axis %d", scales, zps, attr(wdq, "axis"))
	}
	if !(scales[3] < scales[0]/20) {
		t.Errorf("channel scales %v: the small channel did not get its own", scales)
	}
	// The bias: int32 at input scale × weight scale.
	bdq := producer(g, conv1.GetInput()[2])
	b := initializer(g, bdq.GetInput()[0])
	bs, _ := onnx.Float32s(initializer(g, bdq.GetInput()[1]))
	xs := Params{Scale: 2.0 / 255} // X ∈ [−1, 1] in uint8
	if b.GetDataType() != int32(onnx.Int32) {
		t.Errorf("bias type %d", b.GetDataType())
	}
	for c := range bs {
		if bs[c] != xs.Scale*scales[c] {
			t.Errorf("bias scale %d: %v, want %v·%v", c, bs[c], xs.Scale, scales[c])
		}
	}
	// X's pair: uint8 with zero point round(0 + 1/(2/255)) = 128.
	xq := consumerOf(g, "X")
	if xq.GetOpType() != "QuantizeLinear" {
		t.Fatalf("X feeds %s", xq.GetOpType())
	}
	zp := initializer(g, xq.GetInput()[2])
	zv, _ := onnx.Int64s(zp)
	if zp.GetDataType() != int32(onnx.Uint8) || zv[0] != 128 {
		t.Errorf("X zero point %v of type %d", zv, zp.GetDataType())
	}
	// The original float weights are gone.
	for _, name := range []string{"W1", "W2", "B1", "B2"} {
		if initializer(g, name) != nil {
			t.Errorf("float initializer %s kept", name)
		}
	}
	// The source model is untouched.
	if ops(m.Graph())["Relu"] != 1 || len(m.Graph().GetNode()) != 3 {
		t.Error("Apply modified its source model")
	}
}

func TestApplyOptions(t *testing.T) {
	m, types := tinyNet(13)
	// int8 activations: X ∈ [−1, 1] gets zero point round(−128 + 127.5) = 0.
	p, _ := NewPlan(m, types, Options{Activations: Int8, QuantizeOutputs: true, FloatBias: true, PerTensor: true})
	if !slices.Contains(p.Calibrate, "Y") {
		t.Errorf("calibrate %v: Y missing with QuantizeOutputs", p.Calibrate)
	}
	q, sum, err := p.Apply(tinyRanges)
	if err != nil {
		t.Fatal(err)
	}
	g := q.Graph()
	if y := producer(g, "Y"); y == nil || y.GetOpType() != "DequantizeLinear" {
		t.Errorf("with QuantizeOutputs, Y is produced by %v", y)
	}
	if sum.Int32Biases != 0 || sum.PerChannel || initializer(g, "B1") == nil {
		t.Errorf("FloatBias/PerTensor: %+v", sum)
	}
	xq := consumerOf(g, "X")
	zp := initializer(g, xq.GetInput()[2])
	if zp.GetDataType() != int32(onnx.Int8) {
		t.Errorf("int8 activations stored as type %d", zp.GetDataType())
	}
	// A missing range is an error naming the tensor.
	p, _ = NewPlan(m, types, Options{})
	if _, _, err := p.Apply(map[string]Range{"X": {-1, 1}}); err == nil || !strings.Contains(err.Error(), `"r1"`) {
		t.Errorf("missing range: %v", err)
	}
}

func TestPlanKeepAndOpset(t *testing.T) {
	m, types := tinyNet(13)
	p, err := NewPlan(m, types, Options{Keep: []string{"conv2"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Quantized["Conv"] != 1 || len(p.Kept) != 1 || !strings.Contains(p.Kept[0].Node, "conv2") {
		t.Errorf("keep conv2: quantized %v kept %v", p.Quantized, p.Kept)
	}
	var ke *UnmatchedKeepError
	if _, err := NewPlan(m, types, Options{Keep: []string{"Softmax", "nosuchnode"}}); !errors.As(err, &ke) || !slices.Contains(ke.Names, "nosuchnode") || !strings.Contains(err.Error(), "nosuchnode") {
		t.Errorf("unknown --keep-float entry: %v", err)
	}
	p, err = NewPlan(m, types, Options{Keep: []string{"Conv"}})
	if err != nil || len(p.Calibrate) != 0 {
		t.Errorf("keep Conv: calibrate %v, %v", p.Calibrate, err)
	}
	// Opset 11: per-tensor weights, with a note.
	m11, types := tinyNet(11)
	p, err = NewPlan(m11, types, Options{})
	if err != nil || len(p.Notes()) != 1 {
		t.Fatalf("opset 11: %v notes %v", err, p.Notes())
	}
	q, sum, err := p.Apply(tinyRanges)
	if err != nil || sum.PerChannel {
		t.Fatalf("opset 11: %v %+v", err, sum)
	}
	for _, n := range q.Graph().GetNode() {
		if n.GetOpType() == "DequantizeLinear" && attr(n, "axis") >= 0 {
			t.Errorf("opset 11 model with an axis on %s", n.GetName())
		}
	}
	m9, types := tinyNet(9)
	if _, err := NewPlan(m9, types, Options{}); err == nil || !strings.Contains(err.Error(), "opset 9") {
		t.Errorf("opset 9: %v", err)
	}
}

// attr returns an INT attribute, −1 when absent.
func attr(n *onnx.NodeProto, name string) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return -1
}

// consumerOf returns the first node reading name.
func consumerOf(g *onnx.GraphProto, name string) *onnx.NodeProto {
	for _, n := range g.GetNode() {
		if slices.Contains(n.GetInput(), name) {
			return n
		}
	}
	return nil
}

// A Shape of a quantized tensor reads the 8-bit tensor, so no
// DequantizeLinear has to run for it.
func TestShapeReadsQuantizedTensor(t *testing.T) {
	m, types := tinyNet(13)
	g := m.Graph()
	g.Node = append(g.Node, node("Shape", "shape_r1", []string{"r1"}, []string{"s"}))
	g.Output = append(g.Output, onnx.TensorValueInfo("s", onnx.Int64, 4))
	types["s"] = onnx.Int64
	p, err := NewPlan(m, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := p.Apply(tinyRanges)
	if err != nil {
		t.Fatal(err)
	}
	var shape *onnx.NodeProto
	for _, n := range q.Graph().GetNode() {
		if n.GetOpType() == "Shape" {
			shape = n
		}
	}
	if src := producer(q.Graph(), shape.GetInput()[0]); src == nil || src.GetOpType() != "QuantizeLinear" {
		t.Errorf("Shape reads %q, produced by %v; want the QuantizeLinear output", shape.GetInput()[0], src)
	}
}

// Two activations in a row after a Conv (Relu then a ReLU6 Clip, as
// torch.onnx writes F.relu6 after F.relu) are both folded: the Conv
// writes the Clip's output, and every tensor a node reads is still
// written (the Clip's output was left to the dropped Relu).
func TestFoldActivationChain(t *testing.T) {
	m, types := tinyNet(13)
	g := m.Graph()
	g.Initializer = append(g.Initializer, onnx.NewFloat32Tensor("lo", nil, []float32{0}), onnx.NewFloat32Tensor("hi", nil, []float32{6}))
	clip := node("Clip", "relu6", []string{"r1", "lo", "hi"}, []string{"k1"})
	g.Node = []*onnx.NodeProto{g.Node[0], g.Node[1], clip, g.Node[2]}
	g.Node[3].Input[0] = "k1"
	types["k1"], types["lo"], types["hi"] = onnx.Float32, onnx.Float32, onnx.Float32
	p, err := NewPlan(m, types, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.FusedActivations != 2 {
		t.Fatalf("fused %d activations, want the Relu and the Clip", p.FusedActivations)
	}
	q, _, err := p.Apply(map[string]Range{"X": {-1, 1}, "k1": {0, 4}})
	if err != nil {
		t.Fatal(err)
	}
	qg := q.Graph()
	if c := producer(qg, "k1"); c == nil || c.GetOpType() != "Conv" {
		t.Fatalf("k1 is produced by %v, want conv1", c)
	}
	known := map[string]bool{}
	for _, v := range qg.GetInput() {
		known[v.GetName()] = true
	}
	for _, init := range qg.GetInitializer() {
		known[init.GetName()] = true
	}
	for _, n := range qg.GetNode() {
		for _, in := range n.GetInput() {
			if in != "" && !known[in] {
				t.Errorf("%s reads %s, which nothing writes before it", n.GetName(), in)
			}
		}
		for _, o := range n.GetOutput() {
			known[o] = true
		}
	}
}
