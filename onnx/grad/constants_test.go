package grad_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
)

// withInput adds a float graph input x of the given shape (listed first).
func withInput(m *onnx.Model, x string, shape ...int64) *onnx.Model {
	g := m.Proto.Graph
	g.Input = append([]*onnx.ValueInfoProto{onnx.TensorValueInfo(x, onnx.Float32, shape...)}, g.Input...)
	return m
}

// constant appends a Constant node holding t.
func (m *opModel) constant(out string, t *onnx.TensorProto) {
	m.b.Emit("Constant", "const_"+out, nil, []string{out}, onnx.TensorAttr("value", t))
}

// convThenResize starts a model x → Conv(W, B) → "conv"; the cases add the
// upsampling under their exporters' idioms.
func convThenResize(opset int64) *opModel {
	m := newOpModel(opset)
	m.node("Conv", []string{"x", m.rand("W", 3, 2, 3, 3), m.rand("B", 3)}, []string{"conv"}, ais("pads", 1, 1, 1, 1))
	m.outs = []string{"up"}
	return m
}

// TestFoldedConstants: scales and sizes given by initializers (listed as
// inputs too, IR < 4), Constant nodes, empty optional inputs and constant
// Shape/Cast/Concat chains are constants, and "*" trains only the Conv.
func TestFoldedConstants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() *onnx.Model
	}{
		{"upsample9_initializer_scales", func() *onnx.Model {
			m := convThenResize(9)
			m.node("Upsample", []string{"conv", m.floats("scales", []int64{4}, 1, 1, 2, 2)}, []string{"up"}, as("mode", "linear"))
			return m.model()
		}},
		{"upsample9_constant_node_scales", func() *onnx.Model {
			m := convThenResize(9)
			m.constant("scales", onnx.NewFloat32Tensor("", []int64{4}, []float32{1, 1, 2, 2}))
			m.node("Upsample", []string{"conv", "scales"}, []string{"up"}, as("mode", "nearest"))
			return m.model()
		}},
		{"ir3_initializers_as_inputs", func() *onnx.Model {
			m := convThenResize(9)
			m.node("Upsample", []string{"conv", m.floats("scales", []int64{4}, 1, 1, 2, 2)}, []string{"up"})
			md := m.model()
			md.Proto.IrVersion = proto.Int64(3)
			for _, init := range md.Proto.Graph.Initializer {
				md.Proto.Graph.Input = append(md.Proto.Graph.Input,
					onnx.TensorValueInfo(init.GetName(), onnx.DataType(init.GetDataType()), init.GetDims()...))
			}
			return md
		}},
		{"resize13_empty_roi_initializer_scales", func() *onnx.Model {
			m := convThenResize(13)
			m.node("Resize", []string{"conv", "", m.floats("scales", []int64{4}, 1, 1, 2, 2)}, []string{"up"},
				as("mode", "linear"), as("coordinate_transformation_mode", "half_pixel"))
			return m.model()
		}},
		{"resize13_constant_node_scales", func() *onnx.Model {
			m := convThenResize(13)
			m.constant("scales", onnx.NewFloat32Tensor("", []int64{4}, []float32{1, 1, 2, 2}))
			m.node("Resize", []string{"conv", "", "scales"}, []string{"up"}, as("mode", "nearest"))
			return m.model()
		}},
		{"resize11_tf2onnx_sizes_chain", func() *onnx.Model {
			// tf2onnx: empty float roi and scales initializers, sizes from
			// Shape → Slice → Cast → Mul → Cast → Concat.
			m := convThenResize(11)
			m.floats("roi", []int64{0})
			m.floats("empty_scales", []int64{0})
			m.node("Shape", []string{"conv"}, []string{"shape"})
			m.node("Slice", []string{"shape", m.ints("s0", []int64{1}, 0), m.ints("s2", []int64{1}, 2)}, []string{"nc"})
			m.node("Slice", []string{"shape", "s2", m.ints("s4", []int64{1}, 4)}, []string{"hw"})
			m.node("Cast", []string{"hw"}, []string{"hwf"}, ai("to", int64(onnx.Float32)))
			m.node("Mul", []string{"hwf", m.floats("two", []int64{1}, 2)}, []string{"hw2f"})
			m.node("Cast", []string{"hw2f"}, []string{"hw2"}, ai("to", int64(onnx.Int64)))
			m.node("Concat", []string{"nc", "hw2"}, []string{"sizes"}, ai("axis", 0))
			m.node("Resize", []string{"conv", "roi", "empty_scales", "sizes"}, []string{"up"},
				as("mode", "linear"), as("coordinate_transformation_mode", "half_pixel"))
			return m.model()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := withInput(tc.build(), "x", 1, 2, 4, 4)
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"up"}}
			res, err := gradcheck.Check(md, cfg, nil, gradcheck.Options{Directions: 3, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range res.Graphs.Manifest.Params {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, []string{"W", "B"}) {
				t.Errorf(`"*" selected %v, want the Conv's [W B]`, got)
			}
			if res.MaxRelErr > tol {
				t.Errorf("max relative error %.3g > %g", res.MaxRelErr, tol)
			}
		})
	}
}

// TestTrainablePatternsSelectParameters: globs and regular expressions see
// parameter inputs only (Conv weight and bias, BatchNormalization scale and
// bias), never Resize scales, a Mul constant or running statistics; a
// plain name still selects any float initializer.
func TestTrainablePatternsSelectParameters(t *testing.T) {
	m := newOpModel(13)
	m.node("Conv", []string{"x", m.rand("conv.weight", 2, 2, 1, 1), m.rand("conv.bias", 2)}, []string{"c"})
	m.node("BatchNormalization", []string{"c", m.rand("bn.weight", 2), m.rand("bn.bias", 2), m.rand("bn.mean", 2), m.floats("bn.var", []int64{2}, 1, 2)}, []string{"b"})
	m.node("Mul", []string{"b", m.floats("mul.k", []int64{1}, 3)}, []string{"k"})
	m.node("Resize", []string{"k", "", m.floats("resize.scales", []int64{4}, 1, 1, 2, 2)}, []string{"up"})
	m.outs = []string{"up"}
	for _, tc := range []struct {
		pats []string
		want []string
	}{
		{[]string{"*"}, []string{"conv.weight", "conv.bias", "bn.weight", "bn.bias"}},
		{[]string{"re:.*"}, []string{"conv.weight", "conv.bias", "bn.weight", "bn.bias"}},
		{[]string{"bn.*"}, []string{"bn.weight", "bn.bias"}},
		{[]string{"*.weight", "mul.k"}, []string{"conv.weight", "bn.weight", "mul.k"}},
	} {
		gs, err := grad.Build(withInput(m.model(), "x", 1, 2, 3, 3), grad.Config{Prober: ortprobe.Prober{}, Trainable: tc.pats,
			Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"up"}})
		if err != nil {
			t.Fatalf("%v: %v", tc.pats, err)
		}
		var got []string
		for _, p := range gs.Manifest.Params {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v selected %v, want %v", tc.pats, got, tc.want)
		}
	}
	// "resize.*" names only a constant: refused, as a pattern that matches nothing.
	_, err := grad.Build(withInput(m.model(), "x", 1, 2, 3, 3), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"resize.*"},
		Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"up"}})
	wantUnsupported(t, err, "", "", "resize.*")
}

// TestTrainableExactNames: an exact name selects a non-parameter float
// initializer whether written plainly or quoted as a regular expression
// (as finetune passes the size head's Add bias).
func TestTrainableExactNames(t *testing.T) {
	m := newOpModel(13)
	m.node("MatMul", []string{"x", m.rand("head/w[0]", 3, 2)}, []string{"mm"})
	m.node("Add", []string{"mm", m.rand("head/b", 2)}, []string{"y"})
	m.outs = []string{"y"}
	for _, pats := range [][]string{{`re:head/w\[0\]`, `re:head/b`}, {`re:head/w\[0\]`, "head/b"}} {
		gs, err := grad.Build(withInput(m.model(), "x", 4, 3), grad.Config{Prober: ortprobe.Prober{}, Trainable: pats,
			Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"y"}})
		if err != nil {
			t.Fatalf("%v: %v", pats, err)
		}
		if len(gs.Manifest.Params) != 2 {
			t.Errorf("%v: %d parameters, want 2", pats, len(gs.Manifest.Params))
		}
	}
	// A pattern reaches the Linear's bias (a parameter by onnx.ParameterNames)
	// but not a size-1 constant added after it.
	m.node("Add", []string{"y", m.rand("head/eps", 1)}, []string{"z"})
	m.outs = []string{"z"}
	gs, err := grad.Build(withInput(m.model(), "x", 4, 3), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"head/*"},
		Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"z"}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := gs.Manifest.Params; len(ps) != 2 || ps[0].Name != "head/w[0]" || ps[1].Name != "head/b" {
		t.Errorf(`"head/*" selected %+v, want the MatMul weight and the bias`, ps)
	}
}
