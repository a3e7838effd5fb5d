package grad

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/onnx"
)

// builder is the compiler's onnx.Builder plus what only the compiler needs:
// the model's float element type, which every float constant takes, and
// the upgrade pass's tail. Its lower-case methods are the names the rule
// files use.
type builder struct {
	*onnx.Builder
	nodes []*onnx.NodeProto // what the builder emitted (Builder.Nodes points here)
	inits []*onnx.TensorProto
	tail  []*onnx.NodeProto // nodes to place after the node being rewritten (upgrade)
	// floatType is the element type of every float tensor the builder makes.
	floatType int32
	taken     func(string) bool // reports names already used by the model
	// matrixReductions splits reductions into contiguous runs of axes
	// (Config.MatrixReductions).
	matrixReductions bool
}

// newBuilder returns a builder whose names start with prefix, so that they
// never collide with the model's own, and avoid every name taken reports.
func newBuilder(prefix string, floatType int32, taken func(string) bool) *builder {
	b := &builder{floatType: floatType, taken: taken}
	b.Builder = &onnx.Builder{Prefix: prefix, Taken: taken, Nodes: &b.nodes, Inits: &b.inits}
	return b
}

// fresh returns an unused tensor or node name with the given hint.
func (b *builder) fresh(hint string) string { return b.Fresh(hint) }

// op emits a node with nOut fresh outputs and returns their names.
func (b *builder) op(opType string, inputs []string, nOut int, attrs ...*onnx.AttributeProto) []string {
	return b.Op(opType, inputs, nOut, attrs...)
}

// op1 emits a node with one fresh output.
func (b *builder) op1(opType string, inputs []string, attrs ...*onnx.AttributeProto) string {
	return b.Op1(opType, inputs, attrs...)
}

// opTo emits a node writing to the given output names.
func (b *builder) opTo(opType string, inputs, outputs []string, attrs ...*onnx.AttributeProto) {
	b.OpTo(opType, inputs, outputs, attrs...)
}

// opToTail is opTo for a node that consumes the output of the node being
// upgraded: it goes to the tail, which upgrade places after that node.
func (b *builder) opToTail(opType string, inputs, outputs []string, attrs ...*onnx.AttributeProto) {
	b.tail = append(b.tail, b.OpTo(opType, inputs, outputs, attrs...))
	b.nodes = b.nodes[:len(b.nodes)-1]
}

// constInt64 returns the name of an INT64 initializer holding vals.
func (b *builder) constInt64(vals []int64, dims []int64) string {
	return b.ConstInt64("", dims, vals...)
}

// ints is a 1-D INT64 constant.
func (b *builder) ints(vals ...int64) string {
	return b.constInt64(vals, []int64{int64(len(vals))})
}

// constFloat returns the name of a float initializer (of the builder's float
// type) holding vals.
func (b *builder) constFloat(vals []float64, dims []int64) string {
	return b.ConstFloat("", onnx.DataType(b.floatType), dims, vals...)
}

// constOf is constFloat in element type dtype: behind a Cast where dtype
// is not the builder's float type (a half type in a mixed-precision graph).
// ONNX Runtime folds the Cast of an initializer when it loads the graph,
// and the values rules make this way (0 and 1) are exact in every type.
func (b *builder) constOf(dtype int32, vals []float64, dims []int64) string {
	c := b.constFloat(vals, dims)
	if dtype == 0 || dtype == b.floatType {
		return c
	}
	return b.op1("Cast", []string{c}, onnx.IntAttr("to", int64(dtype)))
}

// scalar is a rank-0 float constant.
func (b *builder) scalar(v float64) string {
	return b.constFloat([]float64{v}, nil)
}

// zeros returns a float tensor of zeros of the given shape, made at run time
// (ConstantOfShape) so that large zero tensors do not bloat the file.
func (b *builder) zeros(shape []int64) string {
	if len(shape) == 0 {
		return b.scalar(0)
	}
	zero := onnx.NewFloatTensor("", onnx.DataType(b.floatType), []int64{1}, []float64{0})
	return b.op1("ConstantOfShape", []string{b.ints(shape...)}, onnx.TensorAttr("value", zero))
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

// reduceSum sums over axes (opset 13+ form, axes as an input). With
// matrixReductions, axes that are not one contiguous run are summed one
// run at a time, the last run first, so that the earlier runs' axis
// numbers hold whether or not the reduced axes are kept.
func (b *builder) reduceSum(x string, axes []int64, keepdims bool) string {
	k := int64(0)
	if keepdims {
		k = 1
	}
	runs := [][]int64{axes}
	if b.matrixReductions {
		runs = contiguousRuns(axes)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		x = b.op1("ReduceSum", []string{x, b.ints(runs[i]...)}, onnx.IntAttr("keepdims", k))
	}
	return x
}

// contiguousRuns splits ascending non-negative axes into runs of
// consecutive ones ({0, 2, 3} → {0}, {2, 3}); anything else is one run.
func contiguousRuns(axes []int64) [][]int64 {
	if len(axes) == 0 || !slices.IsSorted(axes) || axes[0] < 0 {
		return [][]int64{axes}
	}
	var runs [][]int64
	start := 0
	for i := 1; i <= len(axes); i++ {
		if i == len(axes) || axes[i] != axes[i-1]+1 {
			runs = append(runs, axes[start:i])
			start = i
		}
	}
	return runs
}

// viaFloat32 is op(halves..., rest...) for bfloat16 operands of dtype
// where ONNX Runtime has no bfloat16 kernel (ConvTranspose on any
// provider, Pad on CUDA): the halves are cast to float32, op runs there,
// and its result is cast back to bfloat16. Other types run op as it is.
func (b *builder) viaFloat32(dtype int32, op string, halves, rest []string, attrs ...*onnx.AttributeProto) string {
	if dtype != int32(onnx.BFloat16) {
		return b.op1(op, slices.Concat(halves, rest), attrs...)
	}
	toFloat := onnx.IntAttr("to", int64(onnx.Float32))
	ins := make([]string, 0, len(halves)+len(rest))
	for _, h := range halves {
		ins = append(ins, b.op1("Cast", []string{h}, toFloat))
	}
	y := b.op1(op, append(ins, rest...), attrs...)
	return b.op1("Cast", []string{y}, onnx.IntAttr("to", int64(onnx.BFloat16)))
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
