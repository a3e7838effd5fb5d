package grad_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// TestUnsupportedOperators: Unsupported names the operators without a rule
// that gradient must cross, each once, with their domain when foreign, and
// not those on shape or mask paths, nor those reading no parameter.
func TestUnsupportedOperators(t *testing.T) {
	m := newOpModel(17)
	x := m.rand("x", 2, 3)
	m.node("Sin", []string{x}, []string{"a"})
	m.node("Relu", []string{"a"}, []string{"b"})
	m.node("Sin", []string{"b"}, []string{"c"})
	m.node("Gelu", []string{"c"}, []string{"d"})
	m.nodes[len(m.nodes)-1].Domain = proto.String("com.microsoft")
	// A shape path and a mask path: integer and boolean outputs carry no gradient.
	m.node("Shape", []string{"d"}, []string{"s"})
	m.node("Range", []string{m.ints("zero", nil, 0), "s", m.ints("one", nil, 1)}, []string{"r"})
	m.node("Cast", []string{"d"}, []string{"di"}, onnx.IntAttr("to", int64(onnx.Int64)))
	m.node("BitShift", []string{"di", "r"}, []string{"e"}, onnx.StringAttr("direction", "LEFT"))
	// An operator without a rule that reads no float initializer.
	m.node("Cast", []string{m.ints("k", []int64{2}, 1, 2)}, []string{"kf"}, onnx.IntAttr("to", int64(onnx.Float32)))
	m.node("Cos", []string{"kf"}, []string{"f"})
	m.outs = []string{"d", "e", "f"}
	md := m.model()
	got := grad.Unsupported(md)
	if want := []string{"Sin", "com.microsoft.Gelu"}; !slices.Equal(got, want) {
		t.Errorf("Unsupported = %q, want %q", got, want)
	}

	ok := newOpModel(17)
	ok.node("Relu", []string{ok.rand("x", 2, 3)}, []string{"y"})
	ok.node("Upsample", []string{"y", ok.floats("scales", []int64{2}, 1, 2)}, []string{"z"})
	ok.outs = []string{"z"}
	if got := grad.Unsupported(ok.model()); got != nil {
		t.Errorf("Unsupported = %q for Relu and Upsample (upgraded to Resize), want nil", got)
	}
}
