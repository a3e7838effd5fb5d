// Package onnxtest builds a small segmentation network (3×3 Conv, Relu,
// 1×1 Conv to 2 classes; input "input" [n,3,h,w], output "logits") the
// way exporters users bring models from write it: weights behind the ops
// torch.onnx leaves without constant folding, fp16 storage behind Casts,
// and three forms of int8 quantization. Every form holds the same float
// weights (or their quantization), so tests can compare them. For tests
// only; small enough for CI.
package onnxtest

import (
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Kind is a way of writing the network.
type Kind string

const (
	// Float is the plain float32 network.
	Float Kind = "float"
	// NoFold writes the classifier's weight transposed and reshaped
	// (Transpose → Reshape before the Conv) and the first layer's bias as
	// Unsqueeze(b) added after a bias-less Conv.
	NoFold Kind = "nofold"
	// Half stores every weight in float16, each Cast to float32 before its
	// layer.
	Half Kind = "fp16"
	// HalfGraph stores every weight in float16 and reads it so, without a
	// Cast: the whole network runs in float16 between a Cast of the input
	// and one of the logits back to float32 (a float16 converter's
	// keep_io_types form).
	HalfGraph Kind = "fp16graph"
	// ConvInteger is onnxruntime's dynamic quantization: DynamicQuantizeLinear
	// → ConvInteger (uint8 weights, zero point 128) → Cast → Mul(scale) →
	// Add(bias).
	ConvInteger Kind = "convinteger"
	// QDQ is the QDQ format: int8 per-channel weights behind
	// DequantizeLinear, activations through QuantizeLinear → DequantizeLinear.
	QDQ Kind = "qdq"
	// QLinear is the QOperator format: QLinearConv layers between
	// QuantizeLinear and DequantizeLinear.
	QLinear Kind = "qlinear"
)

// Kinds lists every kind.
var Kinds = []Kind{Float, NoFold, Half, HalfGraph, ConvInteger, QDQ, QLinear}

type weights struct {
	w1, b1, w2, b2 []float32
}

func newWeights() weights {
	rng := rand.New(rand.NewPCG(7, 7))
	randn := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return v
	}
	return weights{w1: randn(8*27, 0.3), b1: randn(8, 0.1), w2: randn(16, 0.3), b2: randn(2, 0.1)}
}

// Build returns the network written as kind, at opset 17.
func Build(kind Kind) *onnx.Model {
	w := newWeights()
	b := &onnx.Builder{}
	pads := []*onnx.AttributeProto{onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", 3, 3)}
	f32 := onnx.Float32
	switch kind {
	case Float, NoFold, Half:
		floatNet(b, w, kind, pads)
	case HalfGraph:
		half := func(name string, dims []int64, v []float32) string {
			t := onnx.NewFloat32Tensor(name, dims, v)
			t.DataType = proto.Int32(int32(onnx.Float16))
			if err := onnx.SetFloat32s(t, v); err != nil {
				panic(err)
			}
			return b.Initializer(t)
		}
		b.Emit("Cast", "input_f16", []string{"input"}, []string{"x16"}, onnx.IntAttr("to", int64(onnx.Float16)))
		b.Emit("Conv", "conv1", []string{"x16", half("w1", []int64{8, 3, 3, 3}, w.w1), half("b1", []int64{8}, w.b1)}, []string{"h"}, pads...)
		b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
		b.Emit("Conv", "classifier", []string{"hr", half("w2", []int64{2, 8, 1, 1}, w.w2), half("b2", []int64{2}, w.b2)}, []string{"logits16"})
		b.Emit("Cast", "logits_f32", []string{"logits16"}, []string{"logits"}, onnx.IntAttr("to", int64(f32)))
	case ConvInteger:
		dynamicLayer(b, "conv1", "input", "h", w.w1, []int64{8, 3, 3, 3}, w.b1, pads)
		b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
		dynamicLayer(b, "classifier", "hr", "logits", w.w2, []int64{2, 8, 1, 1}, w.b2, nil)
	case QDQ:
		qdqActivation(b, "input", "input_dq", 2.0/255, 128)
		b.Emit("Conv", "conv1", []string{"input_dq", qdqWeight(b, "w1", w.w1, []int64{8, 3, 3, 3}), b.Initializer(onnx.NewFloat32Tensor("b1", []int64{8}, w.b1))},
			[]string{"h"}, pads...)
		b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
		qdqActivation(b, "hr", "hr_dq", 4.0/255, 0)
		b.Emit("Conv", "classifier", []string{"hr_dq", qdqWeight(b, "w2", w.w2, []int64{2, 8, 1, 1}), b.Initializer(onnx.NewFloat32Tensor("b2", []int64{2}, w.b2))},
			[]string{"logits"})
	case QLinear:
		xs, hs, ys := float32(2.0/255), float32(8.0/255), float32(8.0/255)
		quantize(b, "input", "input_q", xs, 128)
		qlinearConv(b, "conv1", "input_q", xs, 128, w.w1, []int64{8, 3, 3, 3}, w.b1, "h_q", hs, 128, pads)
		dequantize(b, "h_q", "h", hs, 128)
		b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
		quantize(b, "hr", "hr_q", hs, 0)
		qlinearConv(b, "classifier", "hr_q", hs, 0, w.w2, []int64{2, 8, 1, 1}, w.b2, "logits_q", ys, 128, nil)
		dequantize(b, "logits_q", "logits", ys, 128)
	default:
		panic("onnxtest: unknown kind " + string(kind))
	}
	return onnx.NewModel(b.Graph("toy_"+string(kind),
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
}

func floatNet(b *onnx.Builder, w weights, kind Kind, pads []*onnx.AttributeProto) {
	stored := func(name string, dims []int64, v []float32) string {
		t := onnx.NewFloat32Tensor(name, dims, v)
		if kind != Half {
			return b.Initializer(t)
		}
		t.DataType = proto.Int32(int32(onnx.Float16))
		if err := onnx.SetFloat32s(t, v); err != nil {
			panic(err)
		}
		b.Initializer(t)
		b.Emit("Cast", name+"_cast", []string{name}, []string{name + "_f32"}, onnx.IntAttr("to", int64(onnx.Float32)))
		return name + "_f32"
	}
	w1 := stored("w1", []int64{8, 3, 3, 3}, w.w1)
	switch kind {
	case NoFold:
		b.Emit("Conv", "conv1", []string{"input", w1}, []string{"h0"}, pads...)
		b.Emit("Unsqueeze", "b1_unsqueeze", []string{stored("b1", []int64{8}, w.b1), b.ConstInt64("b1_axes", []int64{2}, 1, 2)}, []string{"b1_3d"})
		b.Emit("Add", "conv1_bias", []string{"h0", "b1_3d"}, []string{"h"})
	default:
		b.Emit("Conv", "conv1", []string{"input", w1, stored("b1", []int64{8}, w.b1)}, []string{"h"}, pads...)
	}
	b.Emit("Relu", "relu", []string{"h"}, []string{"hr"})
	w2 := stored("w2", []int64{2, 8, 1, 1}, w.w2)
	if kind == NoFold {
		wt := make([]float32, 16) // stored [8, 2], as a Linear's transpose
		for o := range 2 {
			for i := range 8 {
				wt[i*2+o] = w.w2[o*8+i]
			}
		}
		b.Emit("Transpose", "w2_t", []string{stored("w2_t8x2", []int64{8, 2}, wt)}, []string{"w2_2x8"}, onnx.IntsAttr("perm", 1, 0))
		b.Emit("Reshape", "w2_r", []string{"w2_2x8", b.ConstInt64("w2_shape", []int64{4}, 2, 8, 1, 1)}, []string{"w2_4d"})
		w2 = "w2_4d"
	}
	b.Emit("Conv", "classifier", []string{"hr", w2, stored("b2", []int64{2}, w.b2)}, []string{"logits"})
}

// quantU8 quantizes v per tensor to uint8 with zero point 128.
func quantU8(v []float32) ([]byte, float32) {
	m := float32(0)
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	s := m / 127
	q := make([]byte, len(v))
	for i, x := range v {
		q[i] = byte(min(255, max(0, int(math.Round(float64(x/s)))+128)))
	}
	return q, s
}

func uint8Tensor(name string, dims []int64, q []byte) *onnx.TensorProto {
	return &onnx.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnx.Uint8)), Dims: dims, RawData: q}
}

func int8Tensor(name string, dims []int64, q []int8) *onnx.TensorProto {
	raw := make([]byte, len(q))
	for i, x := range q {
		raw[i] = byte(x)
	}
	return &onnx.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnx.Int8)), Dims: dims, RawData: raw}
}

func dynamicLayer(b *onnx.Builder, name, x, y string, w []float32, dims []int64, bias []float32, attrs []*onnx.AttributeProto) {
	q, s := quantU8(w)
	b.Emit("DynamicQuantizeLinear", name+"_xq", []string{x}, []string{name + "_x_q", name + "_x_scale", name + "_x_zp"})
	wq := b.Initializer(uint8Tensor(name+".weight_quantized", dims, q))
	wzp := b.Initializer(uint8Tensor(name+".weight_zero_point", nil, []byte{128}))
	ws := b.Initializer(onnx.NewFloat32Tensor(name+".weight_scale", nil, []float32{s}))
	b.Emit("Mul", name+"_scale", []string{name + "_x_scale", ws}, []string{name + "_s"})
	b.Emit("ConvInteger", name, []string{name + "_x_q", wq, name + "_x_zp", wzp}, []string{name + "_i32"}, attrs...)
	b.Emit("Cast", name+"_cast", []string{name + "_i32"}, []string{name + "_f"}, onnx.IntAttr("to", int64(onnx.Float32)))
	b.Emit("Mul", name+"_mul", []string{name + "_f", name + "_s"}, []string{name + "_scaled"})
	bb := b.Initializer(onnx.NewFloat32Tensor(name+".bias", []int64{int64(len(bias)), 1, 1}, bias))
	b.Emit("Add", name+"_bias", []string{name + "_scaled", bb}, []string{y})
}

func qdqWeight(b *onnx.Builder, name string, w []float32, dims []int64) string {
	per := len(w) / int(dims[0])
	q := make([]int8, len(w))
	scales := make([]float32, dims[0])
	for c := range scales {
		m := float32(0)
		for _, x := range w[c*per : (c+1)*per] {
			m = max(m, float32(math.Abs(float64(x))))
		}
		scales[c] = m / 127
		for i := c * per; i < (c+1)*per; i++ {
			q[i] = int8(math.Round(float64(w[i] / scales[c])))
		}
	}
	b.Initializer(int8Tensor(name+"_quantized", dims, q))
	b.Initializer(onnx.NewFloat32Tensor(name+"_scale", []int64{dims[0]}, scales))
	b.Initializer(int8Tensor(name+"_zero_point", []int64{dims[0]}, make([]int8, dims[0])))
	b.Emit("DequantizeLinear", name+"_dq", []string{name + "_quantized", name + "_scale", name + "_zero_point"}, []string{name}, onnx.IntAttr("axis", 0))
	return name
}

func quantize(b *onnx.Builder, x, y string, s float32, zp byte) {
	b.Emit("QuantizeLinear", y, []string{x, b.Initializer(onnx.NewFloat32Tensor(y+"_scale", nil, []float32{s})), b.Initializer(uint8Tensor(y+"_zp", nil, []byte{zp}))}, []string{y})
}

func dequantize(b *onnx.Builder, x, y string, s float32, zp byte) {
	b.Emit("DequantizeLinear", y, []string{x, b.Initializer(onnx.NewFloat32Tensor(y+"_scale", nil, []float32{s})), b.Initializer(uint8Tensor(y+"_zp", nil, []byte{zp}))}, []string{y})
}

func qdqActivation(b *onnx.Builder, x, y string, s float32, zp byte) {
	quantize(b, x, y+"_q", s, zp)
	dequantize(b, y+"_q", y, s, zp)
}

func qlinearConv(b *onnx.Builder, name, xq string, xs float32, xzp byte, w []float32, dims []int64, bias []float32, yq string, ys float32, yzp byte, attrs []*onnx.AttributeProto) {
	q, s := quantU8(w)
	bq := make([]int32, len(bias))
	for i, v := range bias {
		bq[i] = int32(math.Round(float64(v / (xs * s))))
	}
	raw := make([]byte, 4*len(bq))
	for i, v := range bq {
		u := uint32(v)
		raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	ins := []string{
		xq,
		b.Initializer(onnx.NewFloat32Tensor(name+"_x_scale", nil, []float32{xs})),
		b.Initializer(uint8Tensor(name+"_x_zp", nil, []byte{xzp})),
		b.Initializer(uint8Tensor(name+".weight_quantized", dims, q)),
		b.Initializer(onnx.NewFloat32Tensor(name+".weight_scale", nil, []float32{s})),
		b.Initializer(uint8Tensor(name+".weight_zero_point", nil, []byte{128})),
		b.Initializer(onnx.NewFloat32Tensor(name+"_y_scale", nil, []float32{ys})),
		b.Initializer(uint8Tensor(name+"_y_zp", nil, []byte{yzp})),
		b.Initializer(&onnx.TensorProto{Name: proto.String(name + ".bias_quantized"), DataType: proto.Int32(int32(onnx.Int32)), Dims: []int64{int64(len(bq))}, RawData: raw}),
	}
	b.Emit("QLinearConv", name, ins, []string{yq}, attrs...)
}
