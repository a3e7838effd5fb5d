package models

import (
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Opset is the default-domain operator set the builders emit; it is the
// gradient compiler's target opset, so grad.Build has nothing to upgrade.
const Opset = 17

// Producer is the producer_name written into built models.
const Producer = "segtune/models"

// graph is an onnx.Builder (no prefix: the models choose every name)
// plus the seeded parameter initialisation: initial values come from rng,
// so a seed fixes the whole model.
type graph struct {
	*onnx.Builder
	rng    *rand.Rand
	params int64
}

func newGraph(seed uint64) *graph {
	return &graph{Builder: &onnx.Builder{}, rng: rand.New(rand.NewPCG(seed, 0x5e97a9e))}
}

// param adds a float parameter of the given shape drawn from N(0, std²)
// (zeros when std is 0).
func (g *graph) param(name string, dims []int64, std float64) string {
	if std == 0 {
		return g.fill(name, dims, nil)
	}
	return g.fill(name, dims, func() float64 { return g.rng.NormFloat64() * std })
}

// fill adds a float parameter whose values come from draw (zeros when nil)
// and counts it.
func (g *graph) fill(name string, dims []int64, draw func() float64) string {
	n, err := onnx.NumElements(dims)
	if err != nil {
		panic(fmt.Sprintf("models: %s: %v", name, err)) // shapes are computed here, never read from files
	}
	v := make([]float32, n)
	if draw != nil {
		for i := range v {
			v[i] = float32(draw())
		}
	}
	g.params += n
	return g.Initializer(onnx.NewFloat32Tensor(name, dims, v))
}

// ints adds (once) a constant int64 initializer.
func (g *graph) ints(name string, dims []int64, v ...int64) string {
	return g.ConstInt64(name, dims, v...)
}

// scalar adds (once) a constant float32 scalar initializer.
func (g *graph) scalar(name string, v float32) string {
	return g.ConstFloat(name, onnx.Float32, nil, float64(v))
}

// conv is a k×k convolution with "same" padding (k odd), Kaiming-normal
// weights of the given gain (√2 before a ReLU, 1 before a linear use) and a
// zero bias — a convolution with its batch normalisation folded in. The
// parameters are named prefix.weight and prefix.bias, the output prefix.
func (g *graph) conv(prefix, x string, cin, cout, k, stride, dilation, group int, gain float64) string {
	fanIn := cin / group * k * k
	w := g.param(prefix+".weight", []int64{int64(cout), int64(cin / group), int64(k), int64(k)}, gain/math.Sqrt(float64(fanIn)))
	b := g.param(prefix+".bias", []int64{int64(cout)}, 0)
	pad := int64(dilation * (k - 1) / 2)
	attrs := []*onnx.AttributeProto{
		onnx.IntsAttr("kernel_shape", int64(k), int64(k)),
		onnx.IntsAttr("strides", int64(stride), int64(stride)),
		onnx.IntsAttr("dilations", int64(dilation), int64(dilation)),
		onnx.IntsAttr("pads", pad, pad, pad, pad),
	}
	if group != 1 {
		attrs = append(attrs, onnx.IntAttr("group", int64(group)))
	}
	return g.Node("Conv", prefix, []string{x, w, b}, attrs...)
}

// relu6 clips x to [0, 6] (MobileNetV2's activation).
func (g *graph) relu6(name, x string) string {
	return g.Node("Clip", name, []string{x, g.scalar("const.zero", 0), g.scalar("const.six", 6)})
}

func (g *graph) relu(name, x string) string { return g.Node("Relu", name, []string{x}) }

// resizeLike bilinearly resizes x [N,C,h,w] to the spatial size of ref
// [*,*,H,W], with the sizes computed at run time the way exporters spell
// them: Concat(Shape(x)[0:2], Shape(ref)[2:4]). The gradient compiler folds
// the shape arithmetic once the training shapes are fixed.
func (g *graph) resizeLike(name, x, ref string) string {
	i0 := g.ints("const.i64_0", []int64{1}, 0)
	i2 := g.ints("const.i64_2", []int64{1}, 2)
	i4 := g.ints("const.i64_4", []int64{1}, 4)
	nc := g.Node("Slice", name+"/nc", []string{g.Node("Shape", name+"/shape_x", []string{x}), i0, i2})
	hw := g.Node("Slice", name+"/hw", []string{g.Node("Shape", name+"/shape_ref", []string{ref}), i2, i4})
	sizes := g.Node("Concat", name+"/sizes", []string{nc, hw}, onnx.IntAttr("axis", 0))
	return g.Node("Resize", name, []string{x, "", "", sizes},
		onnx.StringAttr("mode", "linear"), onnx.StringAttr("coordinate_transformation_mode", "half_pixel"))
}

// model wraps the graph with one float input and the given outputs.
func (g *graph) model(name, doc string, input *onnx.ValueInfoProto, outputs []*onnx.ValueInfoProto, meta map[string]string) *onnx.Model {
	m := onnx.NewModel(g.Graph(name, []*onnx.ValueInfoProto{input}, outputs), Opset)
	m.Proto.ProducerName = proto.String(Producer)
	m.Proto.ProducerVersion = proto.String("1")
	m.Proto.DocString = proto.String(doc)
	for _, k := range sortedKeys(meta) {
		m.Proto.MetadataProps = append(m.Proto.MetadataProps, &onnx.StringStringEntryProto{Key: proto.String(k), Value: proto.String(meta[k])})
	}
	return m
}

// floatValue describes a float32 tensor; each dim is an int (fixed) or a
// string (symbolic).
func floatValue(name string, dims ...any) *onnx.ValueInfoProto {
	return onnx.SymbolicValueInfo(name, onnx.Float32, dims...)
}

// uniform adds a float parameter drawn from U(−bound, bound) and counts it.
func (g *graph) uniform(name string, dims []int64, bound float64) string {
	return g.fill(name, dims, func() float64 { return (2*g.rng.Float64() - 1) * bound })
}
