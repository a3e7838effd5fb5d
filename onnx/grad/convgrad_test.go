package grad_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// convGradNodes returns the training graph's ConvGrad nodes.
func convGradNodes(m *onnx.Model) []*onnx.NodeProto {
	var out []*onnx.NodeProto
	for _, n := range m.Proto.Graph.Node {
		if n.GetDomain() == grad.ConvGradDomain && n.GetOpType() == grad.ConvGradOp {
			out = append(out, n)
		}
	}
	return out
}

func intsOf(n *onnx.NodeProto, name string) []int64 {
	if a := onnx.Attr(n, name); a != nil && a.GetType() == onnx.AttributeInt {
		return []int64{a.GetI()}
	}
	return onnx.AttrInts(n, name)
}

// TestConvGradEmission: Config.ConvGrad hands exactly the convolutions of
// its classes to ConvGrad nodes, with the forward's attributes, the
// outputs wanted (the first conv's input is no parameter: no dX), and the
// domain imported by the training graph only; a convolution cuDNN's
// symmetric padding cannot reproduce (SAME_UPPER with stride 2) keeps the
// standard forms.
func TestConvGradEmission(t *testing.T) {
	m := newOpModel(13)
	x := m.floats("x", []int64{2, 3, 9, 8}, make([]float32, 2*3*9*8)...)
	m.node("Conv", []string{x, m.rand("w1", 4, 3, 3, 3), m.rand("b1", 4)}, []string{"h1"}, ais("pads", 1, 1, 1, 1))
	m.node("Conv", []string{"h1", m.rand("w2", 4, 1, 3, 3)}, []string{"h2"}, ais("strides", 2, 2), ais("pads", 1, 1, 1, 1), ai("group", 4))
	m.node("Conv", []string{"h2", m.rand("w3", 6, 4, 1, 1)}, []string{"h3"})
	m.node("Conv", []string{"h3", m.rand("w4", 6, 3, 3, 3)}, []string{"h4"}, ai("group", 2), ais("dilations", 2, 2), ais("pads", 2, 2, 2, 2))
	m.node("Conv", []string{"h4", m.rand("w5", 2, 6, 3, 3)}, []string{"y"}, as("auto_pad", "SAME_UPPER"), ais("strides", 2, 2))
	m.outs = []string{"y"}
	build := func(classes grad.ConvClasses) *grad.Graphs {
		gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone},
			GradInputs: m.outs, DirectConvs: true, ConvGrad: classes})
		if err != nil {
			t.Fatal(err)
		}
		return gs
	}
	weights := func(ns []*onnx.NodeProto) []string {
		var ws []string
		for _, n := range ns {
			ws = append(ws, n.Input[2])
		}
		return ws
	}
	if n := convGradNodes(build(0).Training); len(n) != 0 {
		t.Fatalf("no classes chosen, %d ConvGrad nodes", len(n))
	}
	for _, c := range []struct {
		classes grad.ConvClasses
		want    []string
	}{
		{grad.ConvDense, []string{"w1"}},
		{grad.ConvDepthwise, []string{"w2"}},
		{grad.ConvPointwise, []string{"w3"}},
		{grad.ConvGrouped, []string{"w4"}},
		{grad.AllConvClasses, []string{"w1", "w2", "w3", "w4"}},
	} {
		gs := build(c.classes)
		ns := convGradNodes(gs.Training)
		got := weights(ns)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: ConvGrad for %v, want %v", c.classes, got, c.want)
		}
		imports := func(m *onnx.Model) bool {
			return slices.ContainsFunc(m.Proto.OpsetImport, func(o *onnx.OperatorSetIdProto) bool {
				return o.GetDomain() == grad.ConvGradDomain && o.GetVersion() == grad.ConvGradVersion
			})
		}
		if !imports(gs.Training) || imports(gs.Eval) {
			t.Errorf("%v: domain imported by training %v, eval %v; want true, false", c.classes, imports(gs.Training), imports(gs.Eval))
		}
	}
	byW := map[string]*onnx.NodeProto{}
	for _, n := range convGradNodes(build(grad.AllConvClasses).Training) {
		byW[n.Input[2]] = n
	}
	first := byW["w1"]
	if len(first.Output) != 3 || first.Output[0] != "" || first.Output[1] == "" || first.Output[2] == "" {
		t.Errorf("first conv: outputs %q, want no dX, dW and dB", first.Output)
	}
	if dw := byW["w2"]; len(dw.Output) != 2 || dw.Output[0] == "" || dw.Output[1] == "" {
		t.Errorf("depthwise conv without bias: outputs %q, want dX and dW", dw.Output)
	}
	for _, a := range []struct {
		w, attr string
		want    []int64
	}{
		{"w2", "strides", []int64{2, 2}}, {"w2", "group", []int64{4}}, {"w2", "pads", []int64{1, 1, 1, 0}},
		{"w4", "dilations", []int64{2, 2}}, {"w4", "group", []int64{2}}, {"w4", "kernel_shape", []int64{3, 3}},
		{"w4", "pads", []int64{2, 2, 2, 2}}, {"w3", "pads", []int64{0, 0, 0, 0}},
	} {
		if got := intsOf(byW[a.w], a.attr); !slices.Equal(got, a.want) {
			t.Errorf("%s: %s %v, want %v", a.w, a.attr, got, a.want)
		}
	}
	if byW["w5"] != nil {
		t.Error("SAME_UPPER with stride 2 (pads 0 and 1) went to ConvGrad, whose cuDNN padding is symmetric")
	}
}

// convGradCases are the 2-D convolutions of convShapes that ConvGrad
// takes (cuDNN's symmetric padding reproduces their output).
var convGradCases = []string{"plain3x3", "pad1", "stride2pad1", "dilation2", "stride2dil2", "pointwise",
	"pointwise_stride2", "valid", "depthwise", "depthwise_s2", "depthwise_dil2", "depthwise_mult2", "groups2",
	"groups2_s2", "onechannel_s2", "onechannel_s2_leftover"}

// TestConvGradOps checks the ConvGrad node (its CPU kernel) on single
// convolutions of every class, strided, dilated and grouped: against
// finite differences (in float64, as every rule is checked) and against
// the standard-operator forms' gradients in float32.
func TestConvGradOps(t *testing.T) {
	for _, tc := range convShapes {
		if !slices.Contains(convGradCases, tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			m := newOpModel(13)
			ins := []string{m.rand("x", 2, tc.cin, tc.h, tc.w), m.rand("w", tc.cout, tc.cin/tc.group, tc.k, tc.k)}
			if tc.bias {
				ins = append(ins, m.rand("b", tc.cout))
			}
			m.node("Conv", ins, []string{"y"}, append([]*onnx.AttributeProto{ai("group", tc.group)}, tc.attrs...)...)
			m.outs = []string{"y"}
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone},
				GradInputs: m.outs, DirectConvs: true, ConvGrad: grad.AllConvClasses}
			res, err := gradcheck.Check(m.model(), cfg, nil, gradcheck.Options{Directions: 3, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(convGradNodes(res.Graphs.Training)); n != 1 {
				t.Fatalf("%d ConvGrad nodes, want 1", n)
			}
			for _, d := range res.Directions {
				if d.RelErr > tol {
					t.Errorf("analytic %.10g numeric %.10g: relative error %.3g > %g", d.Analytic, d.Numeric, d.RelErr, tol)
				}
			}
			std := cfg
			std.ConvGrad = 0
			compareForms(t, m.model(), cfg, std, 1e-5)
		})
	}
}

// compareForms runs one float32 training step of m compiled with a (which
// uses ConvGrad) and with b on the CPU, on the same seeded inputs, and
// checks every gradient of a against b's within relative tol (‖a−b‖/‖b‖).
func compareForms(t *testing.T, m *onnx.Model, a, b grad.Config, tol float64) {
	t.Helper()
	run := func(cfg grad.Config) map[string][]float32 {
		gs, err := grad.Build(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		data, err := gs.Training.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		s, err := runtime.NewSession(data, runtime.Options{ConvGradCPU: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rng := rand.New(rand.NewPCG(11, 12))
		feeds := make([]*runtime.Tensor, len(s.Inputs))
		for i, x := range s.Inputs {
			if x.Name == grad.TargetName {
				v := make([]int64, numel(x.Shape))
				for j := range v {
					v[j] = rng.Int64N(2)
				}
				feeds[i] = runtime.NewInt64(x.Shape, v)
				continue
			}
			feeds[i] = seededFloats(gs, x, rng)
		}
		outs, err := s.Run(feeds...)
		if err != nil {
			t.Fatal(err)
		}
		res := map[string][]float32{}
		for i, o := range s.Outputs {
			if strings.HasPrefix(o.Name, grad.GradPrefix) {
				res[o.Name] = outs[i].Float32
			}
		}
		return res
	}
	got, want := run(a), run(b)
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("%d gradients with ConvGrad, %d without", len(got), len(want))
	}
	worst, worstName := 0.0, ""
	for name, w := range want {
		r := relErr(got[name], w)
		if math.IsNaN(r) || r > worst {
			worst, worstName = r, name
		}
		if !(r <= tol) {
			t.Errorf("%s: relative difference %.3g > %g", name, r, tol)
		}
	}
	t.Logf("RESULT %s: %d gradients, largest relative difference %.3g (%s)", t.Name(), len(want), worst, worstName)
}

// seededFloats is a training input's value: a parameter's own, else seeded
// normal values (an image, an upstream gradient).
func seededFloats(gs *grad.Graphs, x runtime.IOInfo, rng *rand.Rand) *runtime.Tensor {
	for _, p := range gs.Params {
		if p.GetName() == x.Name {
			v, err := onnx.Float32s(p)
			if err == nil {
				return runtime.NewFloat32(p.GetDims(), v)
			}
		}
	}
	v := make([]float32, numel(x.Shape))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return runtime.NewFloat32(x.Shape, v)
}

// TestConvGradWholeModels: the training graphs of the DeepLabV3+
// MobileNetV2 and ResNet-18 with every convolution's backward pass a
// ConvGrad node give today's gradients (the graph a GPU runs, direct
// convolutions) within relative 1e-5 in float32, for every parameter.
func TestConvGradWholeModels(t *testing.T) {
	for _, name := range []string{"deeplabv3plus_mobilenetv2.onnx", "deeplabv3plus_resnet18.onnx"} {
		t.Run(strings.TrimSuffix(name, ".onnx"), func(t *testing.T) {
			m := generatedModel(t, name)
			in := m.Proto.Graph.Input[0].GetName()
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"},
				InputShapes: map[string][]int64{in: {2, 3, 64, 64}}, DirectConvs: true, MatrixReductions: true}
			with := cfg
			with.ConvGrad = grad.AllConvClasses
			gs, err := grad.Build(m, with)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(convGradNodes(gs.Training)); n == 0 {
				t.Fatal("no ConvGrad node")
			} else {
				t.Logf("%d ConvGrad nodes", n)
			}
			compareForms(t, m, with, cfg, 1e-5)
		})
	}
}

// TestConvGradWholeModelsFiniteDifferences checks the ConvGrad training
// graphs of the DeepLabV3+ MobileNetV2 and ResNet-18 against finite
// differences (frozen kinks, as TestWholeModelsFrozenKinks does for
// today's graphs) on weights of every convolution class and depth, and
// that a wrong gradient fails the check.
func TestConvGradWholeModelsFiniteDifferences(t *testing.T) {
	for _, name := range []string{"deeplabv3plus_mobilenetv2.onnx", "deeplabv3plus_resnet18.onnx"} {
		t.Run(strings.TrimSuffix(name, ".onnx"), func(t *testing.T) {
			m := generatedModel(t, name)
			in := m.Proto.Graph.Input[0].GetName()
			params := pickParams(t, m)
			spec := frozenSpec{convGrad: grad.AllConvClasses}
			for _, e := range frozenCheck(t, m, in, []int64{2, 3, 64, 64}, params, spec) {
				t.Error(e)
			}
			spec.gradScale = 1.01
			if fails := frozenCheck(t, m, in, []int64{2, 3, 64, 64}, params[:1], spec); len(fails) == 0 {
				t.Error("gradients scaled by 1.01 passed the check: it proves nothing")
			}
		})
	}
}

// TestConvGradCUDADescriptors walks every ConvGrad node of the training
// graphs of three DeepLabV3+ (MobileNetV2, MobileNetV3, ResNet-18) through
// the cuDNN kernel's planning on a fake cuDNN (runtime.PlanConvGradCUDA),
// in float32 with TF32 on and off and in float16 and bfloat16, and checks
// each descriptor against the node: dY, X and W dims and type, the pads,
// strides, dilations and groups of the forward convolution, and the math
// type. Every class the three networks hold (dense, 1×1, depthwise) is met.
func TestConvGradCUDADescriptors(t *testing.T) {
	classes := map[grad.ConvClasses]int{}
	for _, name := range []string{"deeplabv3plus_mobilenetv2.onnx", "deeplabv3plus_mobilenetv3.onnx", "deeplabv3plus_resnet18.onnx"} {
		t.Run(strings.TrimSuffix(name, ".onnx"), func(t *testing.T) {
			m := generatedModel(t, name)
			in := m.Proto.Graph.Input[0].GetName()
			image := []int64{2, 3, 96, 96} // trainingFeeds makes square images
			gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"},
				InputShapes: map[string][]int64{in: image}, DirectConvs: true, ConvGrad: grad.AllConvClasses})
			if err != nil {
				t.Fatal(err)
			}
			nodes := convGradNodes(gs.Training)
			shapes := forwardShapes(t, gs, in, image, nodes)
			for _, n := range nodes {
				x, w := shapes[n.Input[1]], shapes[n.Input[2]]
				if x == nil || w == nil {
					t.Fatalf("%s: no shape for X %q or W %q", n.GetName(), n.Input[1], n.Input[2])
				}
				a := runtime.ConvGradAttrs{KernelShape: intsOf(n, "kernel_shape"), Strides: intsOf(n, "strides"),
					Dilations: intsOf(n, "dilations"), Pads: intsOf(n, "pads"), Group: intsOf(n, "group")[0]}
				dy := []int64{x[0], w[0], 0, 0}
				for i := range 2 {
					ext := (a.KernelShape[i]-1)*a.Dilations[i] + 1
					dy[i+2] = (x[i+2]+a.Pads[i]+a.Pads[i+2]-ext)/a.Strides[i] + 1
				}
				classes[grad.ClassOfConv(w, a.Group)]++
				for _, c := range []struct {
					elem, cudnn, math string
					tf32              bool
				}{
					{"float32", "FLOAT", "DEFAULT_MATH", true}, {"float32", "FLOAT", "FMA_MATH", false},
					{"float16", "HALF", "TENSOR_OP_MATH", true}, {"bfloat16", "BFLOAT16", "TENSOR_OP_MATH", true},
				} {
					p, err := runtime.PlanConvGradCUDA(a, runtime.ConvGradCUDASettings{AllowTF32: c.tf32}, c.elem, dy, x, w)
					if err != nil {
						t.Fatalf("%s (%s, %v): %v", n.GetName(), c.elem, w, err)
					}
					want := fmt.Sprint(dy, x, w, a.Pads[:2], a.Strides, a.Dilations, a.Group, c.cudnn, c.math)
					got := fmt.Sprint(i64s(p.DY.Dims), i64s(p.X.Dims), i64s(p.W.Dims), i64s(p.Conv.Pads), i64s(p.Conv.Strides),
						i64s(p.Conv.Dilations), p.Conv.Groups, p.X.DataType, p.DataMath)
					if got != want || p.DY.DataType != c.cudnn || p.W.DataType != c.cudnn || p.FilterMath != c.math ||
						p.Conv.Mode != "CROSS_CORRELATION" || p.Conv.ComputeType != "FLOAT" {
						t.Errorf("%s %s: cuDNN got %s (%+v), want %s", n.GetName(), c.elem, got, p.Conv, want)
					}
				}
			}
		})
	}
	t.Logf("RESULT ConvGrad nodes by class: %v", classes)
	for _, c := range []grad.ConvClasses{grad.ConvDense, grad.ConvPointwise, grad.ConvDepthwise} {
		if classes[c] == 0 {
			t.Errorf("no %v convolution was planned", c)
		}
	}
}

// forwardShapes returns the shapes of the X and W inputs of nodes
// (forward tensors, parameters, or the image input) from one run of the
// evaluation graph with the tensors as its outputs.
func forwardShapes(t *testing.T, gs *grad.Graphs, input string, image []int64, nodes []*onnx.NodeProto) map[string][]int64 {
	t.Helper()
	shapes := map[string][]int64{input: image}
	for _, p := range gs.Params {
		shapes[p.GetName()] = p.GetDims()
	}
	eval := gs.Eval.Clone()
	eval.Proto.Graph.Output = nil
	for _, n := range nodes {
		for _, x := range n.Input[1:3] {
			if shapes[x] == nil && !slices.ContainsFunc(eval.Proto.Graph.Output, func(v *onnx.ValueInfoProto) bool { return v.GetName() == x }) {
				eval.Proto.Graph.Output = append(eval.Proto.Graph.Output, &onnx.ValueInfoProto{Name: proto.String(x)})
			}
		}
	}
	data, err := eval.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outs, err := s.Run(trainingFeeds(t, s, gs, image[0], image[2])...)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range s.Outputs {
		shapes[o.Name] = outs[i].Shape
	}
	return shapes
}

func i64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
