package autocast_test

import (
	"math"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/runtime"
)

const batch, size = 2, 32

func synth(t *testing.T) *onnx.Model {
	t.Helper()
	m, err := onnx.Parse(models.SynthModel, "segtune-synth.onnx")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestApplyPlacesCasts: every Conv, ConvTranspose, MatMul and Gemm reads
// float16 copies made by Casts and writes a float16 result that a Cast
// turns back, and nothing else reads a float16 tensor: normalisation,
// resizing and the head stay float32.
func TestApplyPlacesCasts(t *testing.T) {
	m := synth(t)
	want := 0
	for _, n := range m.Graph().Node {
		if autocast.Ops[n.GetOpType()] {
			want++
		}
	}
	r, err := autocast.Apply(m)
	if err != nil {
		t.Fatal(err)
	}
	if r.Nodes != want || want == 0 {
		t.Fatalf("%d of %d heavy operators moved to float16", r.Nodes, want)
	}
	half := map[string]bool{} // float16 tensors
	for _, n := range m.Graph().Node {
		if n.GetOpType() == "Cast" && castTo(n) == onnxpb.TensorProto_FLOAT16 {
			half[n.Output[0]] = true
		}
		if autocast.Ops[n.GetOpType()] {
			half[n.Output[0]] = true
		}
	}
	for _, n := range m.Graph().Node {
		heavy := autocast.Ops[n.GetOpType()]
		for _, in := range n.Input {
			switch {
			case in == "":
			case heavy && !half[in]:
				t.Errorf("%s %q reads float32 %q", n.GetOpType(), n.GetName(), in)
			case !heavy && half[in] && !(n.GetOpType() == "Cast" && castTo(n) == onnxpb.TensorProto_FLOAT):
				t.Errorf("%s %q reads float16 %q", n.GetOpType(), n.GetName(), in)
			}
		}
	}
	for _, o := range m.Graph().Output {
		if half[o.GetName()] {
			t.Errorf("graph output %q is float16", o.GetName())
		}
	}
	if _, err := autocast.Apply(synth(t)); err != nil {
		t.Fatal(err)
	}
}

func castTo(n *onnxpb.NodeProto) onnxpb.TensorProto_DataType {
	for _, a := range n.Attribute {
		if a.GetName() == "to" {
			return onnxpb.TensorProto_DataType(a.GetI())
		}
	}
	return 0
}

// TestApplyRefusesWhatItCannotCast: a graph with no heavy operator says so.
func TestApplyRefusesWhatItCannotCast(t *testing.T) {
	g := &onnx.Builder{}
	g.Node("Relu", "y", []string{"x"})
	m := onnx.NewModel(g.Graph("relu", []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("x", onnxpb.TensorProto_FLOAT, 1, 4)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", onnxpb.TensorProto_FLOAT, 1, 4)}), 18)
	if _, err := autocast.Apply(m); err == nil {
		t.Error("a graph without Conv/MatMul/Gemm was accepted")
	}
}

// trainingGraph compiles segtune's built-in DeepLabV3+ for training (in the
// GPU form: direct convs, Conv weight gradients), after Apply when half is set, its parameters named exactly
// (Apply hides them from consumer-based patterns).
func trainingGraph(t *testing.T, half, gpuForm bool) *grad.Graphs {
	t.Helper()
	m := synth(t)
	var params []string
	for name := range onnx.ParameterNames(m.Graph()) {
		params = append(params, "re:"+regexp.QuoteMeta(name))
	}
	if half {
		if _, err := autocast.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	in := onnx.DataInputs(m.Graph())[0].GetName()
	gs, err := grad.Build(m, grad.Config{Trainable: params, Threads: 1, Loss: grad.Loss{Scale: true},
		InputShapes: map[string][]int64{in: {batch, 3, size, size}}, DirectConvs: gpuForm, WeightGradConv: gpuForm})
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestHalfTrainingStep: the float16 training graph runs, keeps float32
// parameters and gradients, and, with the loss scaled, its loss and
// gradients are those of the float32 graph to half precision (ONNX Runtime's CPU provider computes
// the float16 operators it lacks kernels for in float32 behind its own
// Casts, so the rounding checked here is the graph's Casts').
func TestHalfTrainingStep(t *testing.T) {
	testassets.RequireORT(t)
	for _, gpuForm := range []bool{true, false} {
		t.Run(map[bool]string{true: "gpu-form", false: "cpu-form"}[gpuForm], func(t *testing.T) {
			checkHalfStep(t, trainingGraph(t, false, gpuForm), trainingGraph(t, true, gpuForm))
		})
	}
}

func checkHalfStep(t *testing.T, full, half *grad.Graphs) {
	if len(full.Params) != len(half.Params) || len(full.Params) == 0 {
		t.Fatalf("%d parameters in float32, %d in float16", len(full.Params), len(half.Params))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, batch*3*size*size)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y := make([]int64, batch*size*size)
	for i := range y {
		y[i] = rng.Int64N(2)
	}
	run := func(gs *grad.Graphs, scale float32) map[string][]float32 {
		data, err := gs.Training.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		params := map[string]*onnxpb.TensorProto{}
		for _, p := range gs.Params {
			params[p.GetName()] = p
		}
		feeds := make([]*runtime.Tensor, len(s.Inputs))
		for i, in := range s.Inputs {
			switch {
			case params[in.Name] != nil:
				if in.Type != "float32" {
					t.Fatalf("parameter %q is %s", in.Name, in.Type)
				}
				v, err := onnx.Float32s(params[in.Name])
				if err != nil {
					t.Fatal(err)
				}
				feeds[i] = runtime.NewFloat32(params[in.Name].GetDims(), v)
			case in.Name == grad.TargetName:
				feeds[i] = runtime.NewInt64(in.Shape, y)
			case in.Name == grad.LossScaleName:
				feeds[i] = runtime.NewFloat32([]int64{1}, []float32{scale})
			default:
				feeds[i] = runtime.NewFloat32(in.Shape, x)
			}
		}
		outs, err := s.Run(feeds...)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]float32{}
		for i, o := range s.Outputs {
			if outs[i] != nil && outs[i].Float32 != nil {
				got[o.Name] = outs[i].Float32
				if o.Name != grad.LossName {
					for j := range got[o.Name] {
						got[o.Name][j] /= scale
					}
				}
			} else if o.Name == grad.LossName || len(o.Name) > len(grad.GradPrefix) && o.Name[:len(grad.GradPrefix)] == grad.GradPrefix {
				t.Fatalf("output %q is %s, want float32", o.Name, o.Type)
			}
		}
		return got
	}
	// Half precision needs the loss scaled, as AMP's GradScaler does:
	// unscaled, a mean over 2048 pixels gives gradients below float16's
	// smallest normal (6e-5), and many flush to zero.
	a, b := run(full, 1), run(half, 1024)
	la, lb := float64(a[grad.LossName][0]), float64(b[grad.LossName][0])
	t.Logf("loss float32 %.6f, float16 %.6f", la, lb)
	if math.Abs(la-lb) > 2e-3*math.Abs(la) {
		t.Errorf("loss %v in float16, %v in float32", lb, la)
	}
	worst, worstName, n := 0.0, "", 0
	for name, ga := range a {
		if len(name) <= len(grad.GradPrefix) || name[:len(grad.GradPrefix)] != grad.GradPrefix {
			continue
		}
		gb := b[name]
		var d, r float64
		for i := range ga {
			d += sq(float64(ga[i]) - float64(gb[i]))
			r += sq(float64(ga[i]))
		}
		if r == 0 {
			continue
		}
		n++
		if e := math.Sqrt(d / r); e > worst || math.IsNaN(e) {
			worst, worstName = e, name
		}
	}
	t.Logf("%d gradients: max relative difference float16 vs float32 %.3g (%s)", n, worst, worstName)
	if n == 0 || worst > 0.05 || math.IsNaN(worst) {
		t.Errorf("float16 gradients differ from float32 by up to %.3g (%s)", worst, worstName)
	}
	if worst == 0 {
		t.Error("float16 and float32 gradients are identical: the Casts did nothing")
	}
}

func sq(x float64) float64 { return x * x }
