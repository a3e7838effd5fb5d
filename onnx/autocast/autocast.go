// Package autocast rewrites an inference graph for mixed-precision
// training, as PyTorch's autocast does at run time: the operators whose
// cost is their multiply-adds — Conv, ConvTranspose, MatMul, Gemm — run in
// float16 or bfloat16 behind Casts, and everything else (normalisation,
// Softmax, reductions, the loss the gradient compiler appends) stays in
// float32.
//
// The parameters stay float32 graph tensors: a Cast inside the graph makes
// each step's half-precision copy, so the weights the optimiser updates
// are float32 masters, and the gradient compiler's Cast rule turns the
// half-precision gradients back into float32 ones.
//
// Apply runs before onnx/grad's Build. Trainable parameters must then be
// named exactly (grad.Config.Trainable with their names): a weight now
// feeds a Cast, not its operator's parameter input, so patterns that pick
// parameters by their consumer no longer find it.
package autocast

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Type is the half-precision element type Apply computes in.
type Type int

const (
	// Float16 needs loss scaling (its smallest normal is 6e-5); every
	// operator of the set has float16 kernels on CPU (behind ONNX
	// Runtime's own Casts) and CUDA.
	Float16 Type = iota
	// BFloat16 has float32's exponent range, so gradients need no loss
	// scale, but only 8 bits of mantissa. Conv takes it from ONNX opset
	// 22 (MinOpset); ONNX Runtime has bfloat16 kernels for these
	// operators only in its CUDA provider, and none for ConvTranspose.
	BFloat16
)

// ForPrecision returns the Type a --precision value names: fp16 or bf16
// (false for the others, which are no half precision).
func ForPrecision(s string) (Type, bool) {
	switch strings.ToLower(s) {
	case "fp16":
		return Float16, true
	case "bf16":
		return BFloat16, true
	}
	return 0, false
}

// String is the type's ONNX name.
func (t Type) String() string {
	if t == BFloat16 {
		return "bfloat16"
	}
	return "float16"
}

// Elem is the type's ONNX element type.
func (t Type) Elem() onnx.DataType {
	if t == BFloat16 {
		return onnx.BFloat16
	}
	return onnx.Float16
}

// MinOpset is the lowest default-domain opset whose operators of Ops take
// the type. Apply leaves the model's opset as it is, since the gradient
// compiler upgrades older operators from it: pass MinOpset on
// (grad.Config.MinOpset) to have the training graphs declare it.
func (t Type) MinOpset() int64 {
	if t == BFloat16 {
		return 22 // Conv-22 added bfloat16
	}
	return 0
}

// Ops are the operators Apply runs in type t: Conv, MatMul, Gemm, and for
// float16 ConvTranspose too (ONNX Runtime's CUDA provider has no bfloat16
// ConvTranspose, and its CPU provider none at all).
func (t Type) Ops() map[string]bool {
	ops := map[string]bool{"Conv": true, "MatMul": true, "Gemm": true}
	if t == Float16 {
		ops["ConvTranspose"] = true
	}
	return ops
}

// Report says what Apply changed.
type Report struct {
	Nodes int // operators moved to half precision
	Casts int // Cast nodes inserted
	// Already counts the operators the model computes in type t itself
	// (a model converted to float16 whole, its weights read in float16):
	// left as they are, they make the run a half-precision one too.
	Already int
}

// Apply rewrites m in place: every node of t.Ops() whose inputs are
// float32 computes in type t. An input that several such nodes read is cast
// once. Element types come from the graph's inputs, initializers and
// value_info, and are carried through the other nodes by elemTypes. A
// graph with none of t.Ops() in float32 or in type t is an error.
func Apply(m *onnx.Model, t Type) (Report, error) {
	g := m.Graph()
	if g == nil {
		return Report{}, fmt.Errorf("autocast: model has no graph")
	}
	types := elemTypes(g)
	isF32 := map[string]bool{}
	for name, t := range types {
		isF32[name] = t == onnx.Float32
	}
	taken := map[string]bool{}
	for _, n := range g.Node {
		for _, s := range append(append([]string{}, n.Input...), n.Output...) {
			taken[s] = true
		}
	}
	for name := range isF32 {
		taken[name] = true
	}
	fresh := func(base string) string {
		s := base
		for i := 1; taken[s]; i++ {
			s = fmt.Sprintf("%s_%d", base, i)
		}
		taken[s] = true
		return s
	}
	cast := func(in, out string, to onnx.DataType) *onnx.NodeProto {
		return &onnx.NodeProto{OpType: proto.String("Cast"), Name: proto.String("autocast/" + out),
			Input: []string{in}, Output: []string{out}, Attribute: []*onnx.AttributeProto{onnx.IntAttr("to", int64(to))}}
	}
	var r Report
	ops, suffix := t.Ops(), "/fp16"
	if t == BFloat16 {
		suffix = "/bf16"
	}
	halves := map[string]string{} // float32 tensor → its half-precision copy
	out := make([]*onnx.NodeProto, 0, len(g.Node))
	for _, n := range g.Node {
		if !ops[n.GetOpType()] || n.GetDomain() != "" || !allF32(n.Input, isF32) {
			if ops[n.GetOpType()] && n.GetDomain() == "" && allOf(n.Input, types, t.Elem()) {
				r.Already++
			}
			out = append(out, n)
			continue
		}
		for i, in := range n.Input {
			if in == "" {
				continue
			}
			h, ok := halves[in]
			if !ok {
				h = fresh(in + suffix)
				halves[in] = h
				out = append(out, cast(in, h, t.Elem()))
				r.Casts++
			}
			n.Input[i] = h
		}
		y := n.Output[0]
		yh := fresh(y + suffix)
		n.Output[0] = yh
		out = append(out, n, cast(yh, y, onnx.Float32))
		isF32[y] = true
		r.Casts++
		r.Nodes++
	}
	g.Node = out
	if r.Nodes == 0 && r.Already == 0 {
		return r, fmt.Errorf("autocast: no %s with float32 or %s inputs of known type", strings.Join(slices.Sorted(maps.Keys(ops)), ", "), t)
	}
	return r, nil
}

// elemTypes returns the element type of every tensor it can tell: those
// the graph records, then each node's outputs in order — a Cast's "to",
// int64 for shape and index operators, bool for comparisons, and otherwise
// the type of the node's first typed input (which holds for the
// element-wise, layout and normalisation operators of a segmenter).
func elemTypes(g *onnx.GraphProto) map[string]onnx.DataType {
	t := map[string]onnx.DataType{}
	for _, v := range append(append(append([]*onnx.ValueInfoProto{}, g.Input...), g.ValueInfo...), g.Output...) {
		if et := v.GetType().GetTensorType().GetElemType(); et != 0 {
			t[v.GetName()] = onnx.DataType(et)
		}
	}
	for _, in := range g.Initializer {
		t[in.GetName()] = onnx.DataType(in.GetDataType())
	}
	for _, n := range g.Node {
		var et onnx.DataType
		switch n.GetOpType() {
		case "Cast":
			et = onnx.DataType(onnx.AttrInt(n, "to", 0))
		case "Shape", "Size", "ArgMax", "ArgMin", "NonZero":
			et = onnx.Int64
		case "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
			et = onnx.Bool
		case "Constant":
			if v := onnx.Attr(n, "value"); v.GetT() != nil {
				et = onnx.DataType(v.GetT().GetDataType())
			}
		default:
			for _, in := range n.Input {
				if x, ok := t[in]; ok && in != "" {
					et = x
					break
				}
			}
		}
		for i, o := range n.Output {
			if _, known := t[o]; !known && et != 0 && (i == 0 || n.GetOpType() != "TopK") {
				t[o] = et
			}
		}
	}
	return t
}

// allOf says whether every input of ins has element type dt.
func allOf(ins []string, types map[string]onnx.DataType, dt onnx.DataType) bool {
	for _, in := range ins {
		if in != "" && types[in] != dt {
			return false
		}
	}
	return true
}

// allF32 reports whether every named input is a float32 tensor.
func allF32(ins []string, isF32 map[string]bool) bool {
	for _, in := range ins {
		if in != "" && !isF32[in] {
			return false
		}
	}
	return true
}
