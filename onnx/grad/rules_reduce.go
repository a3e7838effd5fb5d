package grad

import "fmt"

func init() {
	register("ReduceSum", opSpec{rule: reduceRule, nature: linear, upgrade: opsetUpgrade{13, moveAttrToInput("axes", 1)}})
	register("ReduceMean", opSpec{rule: reduceRule, nature: linear, upgrade: opsetUpgrade{18, moveAttrToInput("axes", 1)}})
	register("ReduceMax", opSpec{rule: reduceMaxRule, nature: piecewiseLinear, upgrade: opsetUpgrade{18, moveAttrToInput("axes", 1)}})
	register("ReduceL2", opSpec{rule: reduceL2Rule, nature: smooth, upgrade: opsetUpgrade{18, moveAttrToInput("axes", 1)}})
	// The other reductions have no rule (no gradient flows through them),
	// but a graph stamped with opset 18 may only hold their input form.
	for _, op := range []string{"ReduceMin", "ReduceProd", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"} {
		register(op, opSpec{upgrade: opsetUpgrade{18, moveAttrToInput("axes", 1)}})
	}
	register("ArgMax", opSpec{nature: stepwise})
	register("ArgMin", opSpec{nature: stepwise})
}

// reduceAxes reads a Reduce node's axes (attribute before opsets 13/18,
// input after) and normalises them; empty means all axes unless
// noop_with_empty_axes is set.
func reduceAxes(c *gradCtx, rank int) ([]int64, bool, error) {
	axes := attrInts(c.n, "axes")
	if axes == nil && c.in(1) != "" {
		v, _, err := c.constInts(1)
		if err != nil {
			return nil, false, err
		}
		axes = v
	}
	if len(axes) == 0 {
		if attrInt(c.n, "noop_with_empty_axes", 0) != 0 {
			return nil, true, nil
		}
		for i := 0; i < rank; i++ {
			axes = append(axes, int64(i))
		}
	}
	for i, a := range axes {
		n, err := normAxis(a, rank)
		if err != nil {
			return nil, false, fmt.Errorf("axes %v: %w", axes, err)
		}
		axes[i] = n
	}
	return axes, false, nil
}

// reduceRule broadcasts dy back over the reduced axes (divided by the count
// for ReduceMean).
func reduceRule(c *gradCtx) ([]string, error) {
	xs := c.shape(c.in(0))
	axes, noop, err := reduceAxes(c, len(xs))
	if err != nil {
		return nil, err
	}
	dx := c.grads()
	if noop {
		dx[0] = c.dY[0]
		return dx, nil
	}
	g := c.dY[0]
	if attrInt(c.n, "keepdims", 1) == 0 {
		g = c.reshape(g, keepShape(xs, axes))
	}
	if c.n.GetOpType() == "ReduceMean" {
		count := int64(1)
		for _, a := range axes {
			count *= xs[a]
		}
		g = c.mul(g, c.scalar(1/float64(count)))
	}
	dx[0] = c.op1("Expand", []string{g, c.ints(xs...)})
	return dx, nil
}

// keptReduced returns the reduction's output and its gradient with the
// reduced axes kept (size 1), so both broadcast against the input; noop
// reports a reduction over no axes (noop_with_empty_axes).
func keptReduced(c *gradCtx) (y, dy string, axes []int64, noop bool, err error) {
	xs := c.shape(c.in(0))
	axes, noop, err = reduceAxes(c, len(xs))
	if err != nil || noop {
		return "", "", nil, noop, err
	}
	y, dy = c.out(0), c.dY[0]
	if attrInt(c.n, "keepdims", 1) == 0 {
		ks := keepShape(xs, axes)
		y, dy = c.reshape(y, ks), c.reshape(dy, ks)
	}
	return y, dy, axes, false, nil
}

// reduceMaxRule splits dy evenly between the positions holding the maximum,
// as PyTorch's amax does.
func reduceMaxRule(c *gradCtx) ([]string, error) {
	y, dy, axes, noop, err := keptReduced(c)
	if err != nil || noop {
		return []string{c.dY[0]}, err
	}
	hit := c.toFloat(c.op1("Equal", []string{c.in(0), y}))
	count := c.reduceSum(hit, axes, true)
	return []string{c.mul(hit, c.div(dy, count))}, nil
}

// reduceL2Rule: dx = dy·x/y, 0 where the norm is 0 (like PyTorch).
func reduceL2Rule(c *gradCtx) ([]string, error) {
	y, dy, _, noop, err := keptReduced(c)
	if err != nil || noop {
		return []string{c.dY[0]}, err
	}
	zero := c.scalar(0)
	q := c.where(c.op1("Equal", []string{y, zero}), zero, c.div(dy, y))
	return []string{c.mul(c.in(0), q)}, nil
}
