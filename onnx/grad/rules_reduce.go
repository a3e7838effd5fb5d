package grad

import "fmt"

func init() {
	register("ReduceSum", opSpec{rule: reduceRule, nature: linear, upgrade: opsetUpgrade{13, moveAttrToInput("axes", 1)}})
	register("ReduceMean", opSpec{rule: reduceRule, nature: linear, upgrade: opsetUpgrade{18, moveAttrToInput("axes", 1)}})
	// The other reductions have no rule (no gradient flows through them),
	// but a graph stamped with opset 18 may only hold their input form.
	for _, op := range []string{"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"} {
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
