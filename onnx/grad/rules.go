package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// rule emits the backward nodes of one forward node. It returns one
// gradient name per input ("" where none is produced); it only has to
// produce the ones marked in need.
type rule func(c *gradCtx) ([]string, error)

// rules maps default-domain operator types to their backward rules. Each
// op family registers its rules in its own file.
var rules = map[string]rule{}

func register(r rule, ops ...string) {
	for _, op := range ops {
		rules[op] = r
	}
}

// gradCtx is what a rule sees: the forward node, the gradients of its
// outputs, which inputs want gradients, and a builder for new nodes.
type gradCtx struct {
	*builder
	c    *compiler
	n    *onnxpb.NodeProto
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
func (c *gradCtx) constInit(i int) (*onnxpb.TensorProto, error) {
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
