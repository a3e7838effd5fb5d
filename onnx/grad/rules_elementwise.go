package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Add", opSpec{rule: addSubRule, nature: linear})
	register("Sub", opSpec{rule: addSubRule, nature: linear})
	register("Mul", opSpec{rule: mulRule, nature: multilinear})
	register("Div", opSpec{rule: divRule, nature: smooth})
	register("Sum", opSpec{rule: sumRule, nature: linear})
	register("Neg", opSpec{rule: negRule, nature: linear})
	register("Where", opSpec{rule: whereRule, nature: linear})
	register("Min", opSpec{rule: minMaxRule, nature: piecewiseLinear})
	register("Max", opSpec{rule: minMaxRule, nature: piecewiseLinear})
	register("Expand", opSpec{rule: expandRule, nature: linear})
	register("Sqrt", opSpec{rule: sqrtRule, nature: smooth})
	register("Reciprocal", opSpec{rule: reciprocalRule, nature: smooth})
	register("Log", opSpec{rule: logRule, nature: smooth})
	register("Abs", opSpec{rule: absRule, nature: piecewiseLinear})
	register("Pow", opSpec{rule: powRule, nature: smooth})
	for _, op := range []string{"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
		"IsNaN", "IsInf", "Sign", "Floor", "Ceil", "Round"} {
		register(op, opSpec{nature: stepwise})
	}
}

// binaryShapes returns the shapes of inputs 0 and 1 and of output 0.
func binaryShapes(c *gradCtx) (a, b, y []int64) {
	return c.shape(c.in(0)), c.shape(c.in(1)), c.shape(c.out(0))
}

func addSubRule(c *gradCtx) ([]string, error) {
	as, bs, ys := binaryShapes(c)
	dx := c.grads()
	if c.wants(0) {
		dx[0] = c.unbroadcast(c.dY[0], ys, as)
	}
	if c.wants(1) {
		g := c.dY[0]
		if c.n.GetOpType() == "Sub" {
			g = c.neg(g)
		}
		dx[1] = c.unbroadcast(g, ys, bs)
	}
	return dx, nil
}

func mulRule(c *gradCtx) ([]string, error) {
	as, bs, ys := binaryShapes(c)
	dx := c.grads()
	if c.wants(0) {
		dx[0] = c.unbroadcast(c.mul(c.dY[0], c.in(1)), ys, as)
	}
	if c.wants(1) {
		dx[1] = c.unbroadcast(c.mul(c.dY[0], c.in(0)), ys, bs)
	}
	return dx, nil
}

// divRule: d/da = dy/b, d/db = −dy·y/b.
func divRule(c *gradCtx) ([]string, error) {
	as, bs, ys := binaryShapes(c)
	dx := c.grads()
	q := c.div(c.dY[0], c.in(1))
	if c.wants(0) {
		dx[0] = c.unbroadcast(q, ys, as)
	}
	if c.wants(1) {
		dx[1] = c.unbroadcast(c.neg(c.mul(q, c.out(0))), ys, bs)
	}
	return dx, nil
}

func sumRule(c *gradCtx) ([]string, error) {
	ys := c.shape(c.out(0))
	dx := c.grads()
	for i := range c.n.Input {
		if c.wants(i) {
			dx[i] = c.unbroadcast(c.dY[0], ys, c.shape(c.in(i)))
		}
	}
	return dx, nil
}

func negRule(c *gradCtx) ([]string, error) {
	return []string{c.neg(c.dY[0])}, nil
}

func expandRule(c *gradCtx) ([]string, error) {
	dx := c.grads()
	if c.wants(0) {
		dx[0] = c.unbroadcast(c.dY[0], c.shape(c.out(0)), c.shape(c.in(0)))
	}
	return dx, nil
}

// whereRule routes dy to the operand the condition selected.
func whereRule(c *gradCtx) ([]string, error) {
	ys := c.shape(c.out(0))
	zero := c.scalar(0)
	dx := c.grads()
	if c.wants(1) {
		dx[1] = c.unbroadcast(c.where(c.in(0), c.dY[0], zero), ys, c.shape(c.in(1)))
	}
	if c.wants(2) {
		dx[2] = c.unbroadcast(c.where(c.in(0), zero, c.dY[0]), ys, c.shape(c.in(2)))
	}
	return dx, nil
}

// minMaxRule gives dy to the operand that produced the result; on ties the
// first such operand takes it all, so the gradients still sum to dy.
func minMaxRule(c *gradCtx) ([]string, error) {
	ys := c.shape(c.out(0))
	if len(c.n.Input) == 0 {
		return nil, fmt.Errorf("no inputs")
	}
	zero := c.scalar(0)
	dx := c.grads()
	taken := ""
	for i, x := range c.n.Input {
		win := c.op1("Equal", []string{x, c.out(0)})
		if taken != "" {
			win = c.op1("And", []string{win, c.op1("Not", []string{taken})})
		}
		if c.wants(i) {
			dx[i] = c.unbroadcast(c.where(win, c.dY[0], zero), ys, c.shape(x))
		}
		if i < len(c.n.Input)-1 {
			if taken == "" {
				taken = win
			} else {
				taken = c.op1("Or", []string{taken, win})
			}
		}
	}
	return dx, nil
}

// sqrtRule: dx = dy / (2·y), from the output so x need not stay alive.
func sqrtRule(c *gradCtx) ([]string, error) {
	return []string{c.div(c.mul(c.dY[0], c.scalar(0.5)), c.out(0))}, nil
}

// reciprocalRule: dx = −dy·y².
func reciprocalRule(c *gradCtx) ([]string, error) {
	y := c.out(0)
	return []string{c.neg(c.mul(c.dY[0], c.mul(y, y)))}, nil
}

func logRule(c *gradCtx) ([]string, error) {
	return []string{c.div(c.dY[0], c.in(0))}, nil
}

// absRule: dx = dy·sign(x), 0 at x = 0 like PyTorch. The sign is built from
// Greater and Less because ONNX Runtime's CUDA provider has no float Sign.
func absRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	zero := c.scalar(0)
	sign := c.sub(c.toFloat(c.op1("Greater", []string{x, zero})), c.toFloat(c.op1("Less", []string{x, zero})))
	return []string{c.mul(c.dY[0], sign)}, nil
}

// powRule: y = x^b; dx = dy·b·x^(b−1), db = dy·y·ln x (0 where x = 0 and
// b ≥ 0, like PyTorch). A constant exponent is folded: b = 2 gives 2·x·dy
// with no Pow, b = 0.5 reads the output (dy·0.5/y).
func powRule(c *gradCtx) ([]string, error) {
	x, b, y := c.in(0), c.in(1), c.out(0)
	xs, bs, ys := binaryShapes(c)
	dx := c.grads()
	if c.wants(0) {
		var slope string
		if v, ok := c.constScalar(1); ok {
			switch v {
			case 0:
				slope = c.scalar(0)
			case 1:
				slope = c.scalar(1)
			case 2:
				slope = c.mul(x, c.scalar(2))
			case 0.5:
				slope = c.div(c.scalar(0.5), y)
			default:
				slope = c.mul(c.op1("Pow", []string{x, c.scalar(v - 1)}), c.scalar(v))
			}
		} else {
			bf := b
			if !c.c.isFloat(b) {
				bf = c.toFloat(b)
			}
			slope = c.mul(c.op1("Pow", []string{x, c.sub(bf, c.scalar(1))}), bf)
		}
		dx[0] = c.unbroadcast(c.mul(c.dY[0], slope), ys, xs)
	}
	if c.wants(1) {
		zero := c.scalar(0)
		atZero := c.op1("And", []string{c.op1("Equal", []string{x, zero}), c.op1("GreaterOrEqual", []string{b, zero})})
		g := c.where(atZero, zero, c.mul(c.dY[0], c.mul(y, c.op1("Log", []string{x}))))
		dx[1] = c.unbroadcast(g, ys, bs)
	}
	return dx, nil
}

// constScalar reads input i as a constant holding one number (float or
// integer), or reports false.
func (c *gradCtx) constScalar(i int) (float64, bool) {
	t, err := c.constInit(i)
	if t == nil || err != nil || numel(t.GetDims()) != 1 {
		return 0, false
	}
	switch onnx.DataType(t.GetDataType()) {
	case onnx.Int64:
		v, err := onnx.Int64s(t)
		if err != nil || len(v) != 1 {
			return 0, false
		}
		return float64(v[0]), true
	}
	v, err := onnx.Float64s(t)
	if err != nil || len(v) != 1 {
		return 0, false
	}
	return v[0], true
}
