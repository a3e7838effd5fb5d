package grad

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// builder appends nodes and constant initializers to a graph under a name
// prefix, so that emitted names never collide with the model's own.
type builder struct {
	prefix string
	nodes  []*onnxpb.NodeProto
	tail   []*onnxpb.NodeProto // nodes to place after the node being rewritten (upgrade)
	inits  []*onnxpb.TensorProto
	// floatType is the element type of every float tensor the builder makes.
	floatType int32
	count     int
	consts    map[string]string // dedupes small constants by value
	taken     func(string) bool // reports names already used by the model
}

func newBuilder(prefix string, floatType int32, taken func(string) bool) *builder {
	return &builder{prefix: prefix, floatType: floatType, consts: map[string]string{}, taken: taken}
}

// fresh returns an unused tensor or node name with the given hint.
func (b *builder) fresh(hint string) string {
	for {
		b.count++
		name := fmt.Sprintf("%s%s_%d", b.prefix, hint, b.count)
		if b.taken == nil || !b.taken(name) {
			return name
		}
	}
}

// op emits a node with nOut fresh outputs and returns their names.
func (b *builder) op(opType string, inputs []string, nOut int, attrs ...*onnxpb.AttributeProto) []string {
	outs := make([]string, nOut)
	for i := range outs {
		outs[i] = b.fresh(opType)
	}
	b.opTo(opType, inputs, outs, attrs...)
	return outs
}

// op1 emits a node with one fresh output.
func (b *builder) op1(opType string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	return b.op(opType, inputs, 1, attrs...)[0]
}

// opTo emits a node writing to the given output names.
func (b *builder) opTo(opType string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) {
	n := &onnxpb.NodeProto{
		Name:   proto.String(b.fresh("node_" + opType)),
		OpType: proto.String(opType),
		Input:  append([]string{}, inputs...),
		Output: append([]string{}, outputs...),
	}
	for _, a := range attrs {
		if a != nil {
			n.Attribute = append(n.Attribute, a)
		}
	}
	b.nodes = append(b.nodes, n)
}

// constInt64 returns the name of an INT64 initializer holding vals.
func (b *builder) constInt64(vals []int64, dims []int64) string {
	key := fmt.Sprintf("i%v%v", dims, vals)
	if len(vals) <= 64 {
		if name, ok := b.consts[key]; ok {
			return name
		}
	}
	name := b.fresh("const")
	b.inits = append(b.inits, onnx.NewInt64Tensor(name, dims, vals))
	if len(vals) <= 64 {
		b.consts[key] = name
	}
	return name
}

// ints is a 1-D INT64 constant.
func (b *builder) ints(vals ...int64) string {
	return b.constInt64(vals, []int64{int64(len(vals))})
}

// constFloat returns the name of a float initializer (of the builder's float
// type) holding vals.
func (b *builder) constFloat(vals []float64, dims []int64) string {
	small := len(vals) <= 64
	key := fmt.Sprintf("f%d%v%v", b.floatType, dims, vals)
	if small {
		if name, ok := b.consts[key]; ok {
			return name
		}
	}
	name := b.fresh("const")
	b.inits = append(b.inits, floatTensor(name, b.floatType, dims, vals))
	if small {
		b.consts[key] = name
	}
	return name
}

// scalar is a rank-0 float constant.
func (b *builder) scalar(v float64) string {
	return b.constFloat([]float64{v}, nil)
}

// floatTensor builds a FLOAT or DOUBLE tensor.
func floatTensor(name string, dt int32, dims []int64, vals []float64) *onnxpb.TensorProto {
	if dt == int32(onnxpb.TensorProto_DOUBLE) {
		return onnx.NewFloat64Tensor(name, dims, vals)
	}
	f := make([]float32, len(vals))
	for i, v := range vals {
		f[i] = float32(v)
	}
	return onnx.NewFloat32Tensor(name, dims, f)
}

// zeros returns a float tensor of zeros of the given shape, made at run time
// (ConstantOfShape) so that large zero tensors do not bloat the file.
func (b *builder) zeros(shape []int64) string {
	if len(shape) == 0 {
		return b.scalar(0)
	}
	return b.op1("ConstantOfShape", []string{b.ints(shape...)},
		aTensor("value", floatTensor("", b.floatType, []int64{1}, []float64{0})))
}

// Convenience wrappers for the operators rules use most.

func (b *builder) add(x, y string) string { return b.op1("Add", []string{x, y}) }
func (b *builder) sub(x, y string) string { return b.op1("Sub", []string{x, y}) }
func (b *builder) mul(x, y string) string { return b.op1("Mul", []string{x, y}) }
func (b *builder) div(x, y string) string { return b.op1("Div", []string{x, y}) }
func (b *builder) neg(x string) string    { return b.op1("Neg", []string{x}) }

func (b *builder) reshape(x string, shape []int64) string {
	return b.op1("Reshape", []string{x, b.ints(shape...)})
}

func (b *builder) transpose(x string, perm []int64) string {
	return b.op1("Transpose", []string{x}, onnx.IntsAttr("perm", perm...))
}

// reduceSum sums over axes (opset 13+ form, axes as an input).
func (b *builder) reduceSum(x string, axes []int64, keepdims bool) string {
	k := int64(0)
	if keepdims {
		k = 1
	}
	return b.op1("ReduceSum", []string{x, b.ints(axes...)}, onnx.IntAttr("keepdims", k))
}

// where selects x where cond holds and y elsewhere.
func (b *builder) where(cond, x, y string) string {
	return b.op1("Where", []string{cond, x, y})
}

// slice takes [starts, ends) along axes with unit steps.
func (b *builder) slice(x string, starts, ends, axes []int64) string {
	return b.op1("Slice", []string{x, b.ints(starts...), b.ints(ends...), b.ints(axes...)})
}

// unbroadcast reduces a gradient of shape from to the operand shape to,
// summing over the axes that broadcasting expanded.
func (b *builder) unbroadcast(g string, from, to []int64) string {
	if equalShape(from, to) {
		return g
	}
	var axes []int64
	off := len(from) - len(to)
	for i := range from {
		j := i - off
		if j < 0 || (to[j] == 1 && from[i] != 1) {
			axes = append(axes, int64(i))
		}
	}
	if len(axes) > 0 {
		g = b.reduceSum(g, axes, true)
	}
	if len(to) != len(from) || len(axes) > 0 && !equalShape(keepShape(from, axes), to) {
		g = b.reshape(g, to)
	}
	return g
}

func keepShape(s []int64, axes []int64) []int64 {
	out := append([]int64{}, s...)
	for _, a := range axes {
		out[a] = 1
	}
	return out
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// broadcastShape returns the numpy broadcast of shapes, or an error.
func broadcastShape(shapes ...[]int64) ([]int64, error) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int64, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := r - len(s)
		for i, d := range s {
			switch {
			case d == out[off+i] || d == 1:
			case out[off+i] == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(a int64, rank int) (int64, error) {
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, fmt.Errorf("axis out of range for rank %d", rank)
	}
	return a, nil
}

// isFinite reports whether all values are finite numbers.
func isFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// sanitize makes a tensor name usable inside generated names.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 32 || r == 127 {
			return '_'
		}
		return r
	}, s)
}
