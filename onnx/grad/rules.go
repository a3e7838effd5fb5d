package grad

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/onnx"
)

// rule emits the backward nodes of one forward node. It returns one
// gradient name per input ("" where none is produced); it only has to
// produce the ones marked in need.
type rule func(c *gradCtx) ([]string, error)

// opSpec is everything the compiler and its tests know about one
// default-domain operator. Each operator family registers its operators
// from the init of its rules_*.go file, next to their rules; nothing else
// lists operators (see "Adding an operator" in the package doc).
type opSpec struct {
	// rule emits the backward nodes; nil when the operator has none (its
	// outputs carry no gradient, or it is only upgraded).
	rule rule
	// nature says how the outputs depend on the float inputs: required with
	// a rule; stepwise and shapeOnly stop gradient propagation.
	nature nature
	// indexOutputs are the outputs holding indices rather than values
	// (MaxPool's and TopK's Indices): no gradient flows into them.
	indexOutputs []int
	// upgrade rewrites nodes of older opsets into their opset-17 form.
	upgrade opsetUpgrade
}

// nature is how an operator's outputs depend on its float inputs, the other
// inputs held fixed. The compiler reads only whether gradient flows
// (noGrad); the whole-model tests read the rest, to freeze kinks and to
// recognise outputs that are affine in a parameter.
type nature uint8

const (
	undeclared nature = iota
	// smooth: differentiable without kinks where defined, no linearity
	// claimed (Sigmoid, Exp, Softmax, Div, BatchNormalization).
	smooth
	// linear: linear (affine, with constant inputs) in all its float inputs
	// together: sums, copies and rearrangements (Add, Concat, Reshape, Pad,
	// Resize with constant scales).
	linear
	// multilinear: linear in each float input while the others are fixed,
	// not in several at once (Mul, MatMul, Gemm, Conv).
	multilinear
	// piecewiseLinear: affine between kinks, where the derivative jumps
	// (Relu, Clip, MaxPool, Min, Max).
	piecewiseLinear
	// piecewise: smooth between kinks (HardSwish).
	piecewise
	// stepwise: piecewise constant, so the gradient is zero wherever it
	// exists (comparisons, Floor, ArgMax): no gradient flows.
	stepwise
	// shapeOnly: reads its inputs' shapes, not their values (Shape, Size):
	// no gradient flows.
	shapeOnly
)

// noGrad reports natures whose outputs carry no gradient.
func (n nature) noGrad() bool { return n == stepwise || n == shapeOnly }

// opsetUpgrade rewrites a node of a model whose default-domain opset is
// older than since (at most 13) into the opset-17 form of the operator.
type opsetUpgrade struct {
	since int64
	apply func(n *onnx.NodeProto, b *builder) error
}

// registry maps default-domain operator types to their specs.
var registry = map[string]opSpec{}

// register adds op's spec. It panics on a second registration and on specs
// the compiler or the tests would misread, so a bad one fails every test.
func register(op string, s opSpec) {
	_, dup := registry[op]
	switch {
	case dup:
		panic("grad: operator " + op + " registered twice")
	case s.rule != nil && (s.nature == undeclared || s.nature.noGrad()):
		panic("grad: operator " + op + " has a rule, so it needs a nature through which gradient flows")
	case s.rule == nil && len(s.indexOutputs) > 0:
		panic("grad: operator " + op + " has index outputs but no rule")
	case (s.upgrade.apply == nil) != (s.upgrade.since == 0) || s.upgrade.since > targetOpset:
		panic("grad: operator " + op + ": an upgrade needs a function and a first opset (targetOpset at most) that needs none")
	case s.rule == nil && !s.nature.noGrad() && s.upgrade.apply == nil:
		panic("grad: operator " + op + " is registered with nothing to say about it")
	}
	registry[op] = s
}

// isIndexOutput reports whether output j of an op holds indices.
func (s opSpec) isIndexOutput(j int) bool { return slices.Contains(s.indexOutputs, j) }

// gradCtx is what a rule sees: the forward node, the gradients of its
// outputs, which inputs want gradients, and a builder for new nodes.
type gradCtx struct {
	*builder
	c    *compiler
	n    *onnx.NodeProto
	dY   []string
	need []bool
}

// in returns the name of input i ("" when absent).
func (c *gradCtx) in(i int) string { return input(c.n, i) }

// out returns the name of output i.
func (c *gradCtx) out(i int) string {
	if i < len(c.n.Output) {
		return c.n.Output[i]
	}
	return ""
}

// shape returns the probed shape of a forward tensor.
func (c *gradCtx) shape(name string) []int64 {
	if i, ok := c.c.info[name]; ok {
		return i.shape
	}
	return nil
}

// dtype returns the probed element type of a forward tensor, the graph's
// float type when the probe did not record it.
func (c *gradCtx) dtype(name string) int32 {
	if i := c.c.info[name]; i != nil {
		return i.dtype
	}
	return c.floatType
}

// wants reports whether input i needs a gradient.
func (c *gradCtx) wants(i int) bool { return i < len(c.need) && c.need[i] }

// grads allocates the result slice.
func (c *gradCtx) grads() []string { return make([]string, len(c.n.Input)) }

// dy returns the gradient of output i, or zeros of its shape when none flows.
func (c *gradCtx) dy(i int) string {
	if c.dY[i] != "" {
		return c.dY[i]
	}
	return c.zeros(c.shape(c.out(i)))
}

// constInit returns input i's constant tensor (folded or initializer), nil
// for an absent optional input, or an error when the input is computed or
// trainable.
func (c *gradCtx) constInit(i int) (*onnx.TensorProto, error) {
	name := c.in(i)
	if name == "" {
		return nil, nil
	}
	t, ok := c.c.inits[name]
	if !ok || c.c.isTrain[name] {
		return nil, unsupportedf("input %d (%q) must be constant (it is computed from the model's inputs, or trainable)", i, name)
	}
	return t, nil
}

// constInts reads input i as constant integers (folded or initializer).
func (c *gradCtx) constInts(i int) ([]int64, bool, error) {
	t, err := c.constInit(i)
	if t == nil || err != nil {
		return nil, false, err
	}
	v, err := onnx.Int64s(t)
	if err != nil {
		return nil, false, fmt.Errorf("input %d (%q): %w", i, c.in(i), err)
	}
	return v, true, nil
}

// constFloats reads input i as constant floats (folded or initializer).
func (c *gradCtx) constFloats(i int) ([]float64, bool, error) {
	t, err := c.constInit(i)
	if t == nil || err != nil {
		return nil, false, err
	}
	v, err := onnx.Float64s(t)
	if err != nil {
		return nil, false, fmt.Errorf("input %d (%q): %w", i, c.in(i), err)
	}
	return v, true, nil
}

// castLike casts an integer or boolean tensor to the graph's float type.
func (c *gradCtx) toFloat(x string) string {
	return c.op1("Cast", []string{x}, onnx.IntAttr("to", int64(c.floatType)))
}

// HasKinks reports whether the default-domain operator op is registered as
// piecewise (linear or not): its derivative jumps at kinks, so a finite
// difference across one disagrees with any gradient. gradcheck reads it to
// freeze kinks.
func HasKinks(op string) bool {
	n := registry[op].nature
	return n == piecewiseLinear || n == piecewise
}
