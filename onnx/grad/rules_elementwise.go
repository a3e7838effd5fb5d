package grad

import "fmt"

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
