package autocast_test

import (
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/onnx/onnxtest"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
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

// TestApplyPlacesCasts: every Conv, MatMul and Gemm (and for float16
// ConvTranspose) reads half-precision copies made by Casts and writes a
// half-precision result that a Cast turns back, and nothing else reads a
// half-precision tensor: normalisation, resizing and the head stay float32.
func TestApplyPlacesCasts(t *testing.T) {
	for _, typ := range []autocast.Type{autocast.Float16, autocast.BFloat16} {
		t.Run(typ.String(), func(t *testing.T) {
			m := synth(t)
			ops, want, kept := typ.Ops(), 0, 0
			for _, n := range m.Graph().Node {
				switch {
				case ops[n.GetOpType()]:
					want++
				case n.GetOpType() == "ConvTranspose":
					kept++
				}
			}
			r, err := autocast.Apply(m, typ)
			if err != nil {
				t.Fatal(err)
			}
			if r.Nodes != want || want == 0 {
				t.Fatalf("%d of %d heavy operators moved to %s", r.Nodes, want, typ)
			}
			t.Logf("%d operators in %s, %d ConvTranspose kept in float32", r.Nodes, typ, kept)
			half := map[string]bool{} // half-precision tensors
			for _, n := range m.Graph().Node {
				if n.GetOpType() == "Cast" && castTo(n) == typ.Elem() {
					half[n.Output[0]] = true
				}
				if ops[n.GetOpType()] {
					half[n.Output[0]] = true
				}
			}
			for _, n := range m.Graph().Node {
				heavy := ops[n.GetOpType()]
				for _, in := range n.Input {
					switch {
					case in == "":
					case heavy && !half[in]:
						t.Errorf("%s %q reads float32 %q", n.GetOpType(), n.GetName(), in)
					case !heavy && half[in] && !(n.GetOpType() == "Cast" && castTo(n) == onnx.Float32):
						t.Errorf("%s %q reads %s %q", n.GetOpType(), n.GetName(), typ, in)
					}
				}
			}
			for _, o := range m.Graph().Output {
				if half[o.GetName()] {
					t.Errorf("graph output %q is %s", o.GetName(), typ)
				}
			}
		})
	}
}

func castTo(n *onnx.NodeProto) onnx.DataType {
	for _, a := range n.Attribute {
		if a.GetName() == "to" {
			return onnx.DataType(a.GetI())
		}
	}
	return 0
}

// TestApplyRefusesWhatItCannotCast: a graph with no heavy operator says so.
func TestApplyRefusesWhatItCannotCast(t *testing.T) {
	g := &onnx.Builder{}
	g.Node("Relu", "y", []string{"x"})
	m := onnx.NewModel(g.Graph("relu", []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", onnx.Float32, 1, 4)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("y", onnx.Float32, 1, 4)}), 18)
	if _, err := autocast.Apply(m, autocast.Float16); err == nil {
		t.Error("a graph without Conv/MatMul/Gemm was accepted")
	}
}

// TestApplyLeavesAHalfModelAsItIs: a model converted to float16 whole
// (its weights read in float16) already computes its Convs in float16:
// Apply counts them and changes nothing; in bfloat16 it has nothing to
// cast and says so.
func TestApplyLeavesAHalfModelAsItIs(t *testing.T) {
	m := onnxtest.Build(onnxtest.HalfGraph)
	before := proto.Clone(m.Proto)
	r, err := autocast.Apply(m, autocast.Float16)
	if err != nil || r.Already != 2 || r.Nodes != 0 || r.Casts != 0 {
		t.Errorf("Apply(float16) of a float16 model: %+v, %v; want its 2 Convs counted as already float16", r, err)
	}
	if !proto.Equal(before, m.Proto) {
		t.Error("Apply changed a model it had nothing to cast in")
	}
	if _, err := autocast.Apply(m, autocast.BFloat16); err == nil || !strings.Contains(err.Error(), "no Conv, Gemm, MatMul with float32 or bfloat16 inputs") {
		t.Errorf("Apply(bfloat16) of a float16 model: %v; want no operator to cast named", err)
	}
}

// trainingGraph compiles segtune's built-in DeepLabV3+ for training (in
// finetune's CUDA form when gpuForm: direct convs), after Apply
// when half is set, its parameters named exactly (Apply hides them from
// consumer-based patterns).
func trainingGraph(t *testing.T, half *autocast.Type, gpuForm bool) *grad.Graphs {
	t.Helper()
	m := synth(t)
	var params []string
	for name := range onnx.ParameterNames(m.Graph()) {
		params = append(params, "re:"+regexp.QuoteMeta(name))
	}
	var minOpset int64
	if half != nil {
		if _, err := autocast.Apply(m, *half); err != nil {
			t.Fatal(err)
		}
		minOpset = half.MinOpset()
	}
	in := onnx.DataInputs(m.Graph())[0].GetName()
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{Threads: 1}, Trainable: params, Loss: grad.Loss{Scale: true}, MinOpset: minOpset,
		InputShapes: map[string][]int64{in: {batch, 3, size, size}}, DirectConvs: gpuForm})
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
	runtimetest.Require(t)
	for _, gpuForm := range []bool{true, false} {
		t.Run(map[bool]string{true: "gpu-form", false: "cpu-form"}[gpuForm], func(t *testing.T) {
			f16 := autocast.Float16
			half := trainingGraph(t, &f16, gpuForm)
			checkSmallConvKernels(t, half)
			checkHalfStep(t, trainingGraph(t, nil, gpuForm), half, 1024, 0.05, 0.05)
		})
	}
}

// checkSmallConvKernels: every Conv of the training graph has a kernel
// of at most the forward's size, so half-precision weight gradients take
// the im2col form, not the grouped Conv whose kernel is a whole output
// gradient (881 of 936 ms of kernel time in a float16 step on an H200).
func checkSmallConvKernels(t *testing.T, gs *grad.Graphs) {
	t.Helper()
	var forward int64
	for _, n := range synth(t).Graph().Node {
		if n.GetOpType() == "Conv" {
			forward = max(forward, slices.Max(onnx.AttrInts(n, "kernel_shape")))
		}
	}
	for _, n := range gs.Training.Proto.Graph.Node {
		if k := onnx.AttrInts(n, "kernel_shape"); n.GetOpType() == "Conv" && len(k) > 0 && slices.Max(k) > forward {
			t.Errorf("Conv %q has kernel %v, larger than the forward's %d", n.GetName(), k, forward)
		}
	}
}

// TestBFloat16TrainingGraph: the bfloat16 training graph declares opset 22
// (Conv's first with bfloat16), keeps float32 parameters and gradients,
// computes no ConvTranspose in bfloat16 (no provider has the kernel), and
// — run on the CPU, which has no bfloat16 Conv, with each bfloat16 Cast
// followed by one back to float32, so that every value the real graph
// rounds to bfloat16 is rounded the same way — gives the float32 graph's
// loss and gradients to bfloat16's precision, without a loss scale.
func TestBFloat16TrainingGraph(t *testing.T) {
	runtimetest.Require(t)
	bf16 := autocast.BFloat16
	gs := trainingGraph(t, &bf16, true)
	if v := gs.Training.Opset(""); v != 22 {
		t.Errorf("the bfloat16 training graph declares opset %d, want 22", v)
	}
	types := map[string]onnx.DataType{}
	reads := map[string]int{} // op → nodes reading a bfloat16 tensor
	for _, n := range gs.Training.Proto.Graph.Node {
		if n.GetOpType() == "Cast" {
			types[n.Output[0]] = castTo(n)
		}
		for _, in := range n.Input {
			if types[in] == onnx.BFloat16 {
				reads[n.GetOpType()]++
				if n.GetOpType() == "ConvTranspose" {
					t.Errorf("ConvTranspose %q reads bfloat16 %q", n.GetName(), in)
				}
				break
			}
		}
	}
	if reads["Conv"] == 0 {
		t.Fatalf("no Conv reads a bfloat16 Cast's output: %v", reads)
	}
	t.Logf("nodes reading a Cast to bfloat16: %v", reads)
	roundThroughFloat32(gs.Training.Proto.Graph)
	// This randomly initialised network is ill-conditioned: rounding only
	// its input image to bfloat16 moves the float32 gradients by 1.25%
	// (median) and 26% (max, one pointwise convolution's weights), so
	// rounding at every convolution moves them further; a wrong rule
	// moves them by 100% or more.
	checkHalfStep(t, trainingGraph(t, nil, true), gs, 1, 0.5, 0.2)
}

// roundThroughFloat32 makes a bfloat16 graph run where bfloat16 has no
// kernels: each Cast to bfloat16 is followed by a Cast back to float32
// under the original output name, so the graph computes in float32 on
// values rounded to bfloat16 wherever the real graph rounds them.
func roundThroughFloat32(g *onnx.GraphProto) {
	var out []*onnx.NodeProto
	for _, n := range g.Node {
		out = append(out, n)
		if n.GetOpType() != "Cast" || castTo(n) != onnx.BFloat16 {
			continue
		}
		y := n.Output[0]
		n.Output[0] = y + "/rounded"
		out = append(out, &onnx.NodeProto{OpType: proto.String("Cast"), Name: proto.String(n.GetName() + "/back"),
			Input: []string{n.Output[0]}, Output: []string{y}, Attribute: []*onnx.AttributeProto{onnx.IntAttr("to", int64(onnx.Float32))}})
	}
	g.Node = out
	g.ValueInfo = nil
}

// checkHalfStep runs the float32 and the half-precision training graphs
// on one batch, the latter with the loss scaled by scale, and compares
// their losses (relative difference at most 2e-3) and gradients (relative
// difference at most maxTol, median at most medianTol).
func checkHalfStep(t *testing.T, full, half *grad.Graphs, scale float32, maxTol, medianTol float64) {
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
		params := map[string]*onnx.TensorProto{}
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
	// Float16 needs the loss scaled, as AMP's GradScaler does: unscaled,
	// a mean over 2048 pixels gives gradients below float16's smallest
	// normal (6e-5), and many flush to zero. Bfloat16 has float32's range.
	a, b := run(full, 1), run(half, scale)
	la, lb := float64(a[grad.LossName][0]), float64(b[grad.LossName][0])
	t.Logf("loss float32 %.6f, half %.6f", la, lb)
	if math.Abs(la-lb) > 2e-3*math.Abs(la) {
		t.Errorf("loss %v in half precision, %v in float32", lb, la)
	}
	worst, worstName, n := 0.0, "", 0
	var errs []float64
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
		e := math.Sqrt(d / r)
		errs = append(errs, e)
		if e > worst || math.IsNaN(e) {
			worst, worstName = e, name
		}
	}
	if n == 0 {
		t.Fatal("no nonzero gradient to compare")
	}
	slices.Sort(errs)
	median := errs[n/2]
	t.Logf("%d gradients: relative difference half vs float32 median %.3g, max %.3g (%s)", n, median, worst, worstName)
	if worst > maxTol || math.IsNaN(worst) || median > medianTol {
		t.Errorf("half-precision gradients differ from float32 by up to %.3g (%s), median %.3g", worst, worstName, median)
	}
	if worst == 0 {
		t.Error("half-precision and float32 gradients are identical: the Casts did nothing")
	}
}

func sq(x float64) float64 { return x * x }
