package ortprobe_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// probeModel: x [2,3] float → half (float16 Cast), shape (int64), pos
// (bool), as the compiler's probe models declare them: outputs untyped.
func probeModel() *onnx.ModelProto {
	var nodes []*onnx.NodeProto
	var inits []*onnx.TensorProto
	b := &onnx.Builder{Nodes: &nodes, Inits: &inits}
	b.Emit("Cast", "to_half", []string{"x"}, []string{"half"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.Emit("Shape", "shape", []string{"x"}, []string{"shape"})
	b.Emit("Greater", "pos", []string{"x", b.ConstFloat("zero", onnx.Float32, nil, 0)}, []string{"pos"})
	var outs []*onnx.ValueInfoProto
	for _, o := range []string{"half", "shape", "pos"} {
		outs = append(outs, &onnx.ValueInfoProto{Name: proto.String(o)})
	}
	g := b.Graph("probe", []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", onnx.Float32, 2, 3)}, outs)
	return onnx.NewModel(g, 17).Proto
}

func TestProbeReadsHalfIntAndBoolOutputs(t *testing.T) {
	runtimetest.Require(t)
	x := []float32{-1.5, 0, 2.25, 1.0 / 3, -7, 65504}
	got, err := ortprobe.Prober{Threads: 1}.Probe(probeModel(), map[string]*grad.ProbeTensor{
		"x": {DataType: int32(onnx.Float32), Shape: []int64{2, 3}, Float32: x},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("outputs %v, want half, shape and pos", keys(got))
	}
	half := got["half"]
	if half == nil || half.DataType != int32(onnx.Float16) {
		t.Fatalf("half: %+v, want a float16 output", half)
	}
	for i, v := range x {
		want := onnx.Float16ToFloat32(onnx.Float32ToFloat16(v))
		if half.Float32[i] != want {
			t.Errorf("half[%d] = %v, want %v (float16 of %v)", i, half.Float32[i], want, v)
		}
	}
	if s := got["shape"]; s == nil || s.DataType != int32(onnx.Int64) || len(s.Int64) != 2 || s.Int64[0] != 2 || s.Int64[1] != 3 {
		t.Errorf("shape: %+v, want int64 [2 3]", s)
	}
	pos := got["pos"]
	if pos == nil || pos.DataType != int32(onnx.Bool) {
		t.Fatalf("pos: %+v, want a bool output", pos)
	}
	for i, v := range x {
		want := int64(0)
		if v > 0 {
			want = 1
		}
		if pos.Int64[i] != want {
			t.Errorf("pos[%d] = %d for %v", i, pos.Int64[i], v)
		}
	}
}

func TestProbeNamesAMissingInput(t *testing.T) {
	runtimetest.Require(t)
	_, err := ortprobe.Prober{}.Probe(probeModel(), nil)
	if err == nil || !strings.Contains(err.Error(), `graph input "x"`) {
		t.Fatalf("err = %v, want one naming graph input \"x\"", err)
	}
}

// countingProber shows that the compiler probes through the interface it is
// given.
type countingProber struct {
	ortprobe.Prober
	calls int
}

func (c *countingProber) Probe(m *onnx.ModelProto, feeds map[string]*grad.ProbeTensor) (map[string]*grad.ProbeTensor, error) {
	c.calls++
	return c.Prober.Probe(m, feeds)
}

// failingProber fails every probe.
type failingProber struct{}

var errNoRuntime = errors.New("no runtime here")

func (failingProber) Probe(*onnx.ModelProto, map[string]*grad.ProbeTensor) (map[string]*grad.ProbeTensor, error) {
	return nil, errNoRuntime
}

func TestBuildProbesThroughTheGivenProber(t *testing.T) {
	runtimetest.Require(t)
	var nodes []*onnx.NodeProto
	var inits []*onnx.TensorProto
	b := &onnx.Builder{Nodes: &nodes, Inits: &inits}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{3, 2}, []float32{1, 2, 3, 4, 5, 6}))
	b.Emit("MatMul", "mm", []string{"x", w}, []string{"y"})
	g := b.Graph("mm", []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", onnx.Float32, 2, 3)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("y", onnx.Float32, 2, 2)})
	m := onnx.NewModel(g, 17)
	cfg := grad.Config{Trainable: []string{"w"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"y"}}

	p := &countingProber{}
	cfg.Prober = p
	gs, err := grad.Build(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.calls != 1 || len(gs.Params) != 1 {
		t.Errorf("%d probes and %d parameters, want 1 and 1", p.calls, len(gs.Params))
	}

	cfg.Prober = failingProber{}
	if _, err := grad.Build(m, cfg); !errors.Is(err, errNoRuntime) {
		t.Errorf("with a failing prober: err = %v, want it wrapped", err)
	}
	cfg.Prober = nil
	if _, err := grad.Build(m, cfg); err == nil || !strings.Contains(err.Error(), "Prober") {
		t.Errorf("without a prober: err = %v, want one naming Config.Prober", err)
	}
}

func keys(m map[string]*grad.ProbeTensor) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
