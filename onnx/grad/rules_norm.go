package grad

import "fmt"

func init() {
	register("BatchNormalization", opSpec{rule: batchNormRule, nature: smooth, upgrade: opsetUpgrade{13, upgradeBatchNorm}})
}

// batchNormRule differentiates the inference form, an affine map per
// channel: y = (x − mean)·s + b with s = scale/√(var + ε).
func batchNormRule(c *gradCtx) ([]string, error) {
	if attrInt(c.n, "training_mode", 0) != 0 {
		return nil, unsupportedf("BatchNormalization in training mode is not supported (only the inference form)")
	}
	if len(c.n.Output) > 1 {
		for _, o := range c.n.Output[1:] {
			if o != "" {
				return nil, unsupportedf("BatchNormalization running-statistics outputs are not supported")
			}
		}
	}
	x, scale, mean, variance := c.in(0), c.in(1), c.in(3), c.in(4)
	xs := c.shape(x)
	if len(xs) < 2 {
		return nil, fmt.Errorf("input rank %d < 2", len(xs))
	}
	ch := xs[1]
	bshape := make([]int64, len(xs))
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[1] = ch
	axes := spatialAndBatch(len(xs))
	eps := float64(attrFloat(c.n, "epsilon", 1e-5))
	inv := c.op1("Reciprocal", []string{c.op1("Sqrt", []string{c.add(variance, c.scalar(eps))})}) // [C]
	s := c.mul(scale, inv)
	dy := c.dY[0]
	dx := c.grads()
	if c.wants(0) {
		dx[0] = c.mul(dy, c.reshape(s, bshape))
	}
	var sumDy, sumDyXc string
	if c.wants(2) || c.wants(3) {
		sumDy = c.reduceSum(dy, axes, false)
	}
	if c.wants(1) || c.wants(4) {
		sumDyXc = c.reduceSum(c.mul(dy, c.sub(x, c.reshape(mean, bshape))), axes, false)
	}
	if c.wants(1) {
		dx[1] = c.mul(sumDyXc, inv)
	}
	if c.wants(2) {
		dx[2] = sumDy
	}
	if c.wants(3) {
		dx[3] = c.neg(c.mul(sumDy, s))
	}
	if c.wants(4) {
		// d/dvar of (x−m)·scale·(var+ε)^(−1/2) = −½·(x−m)·scale·inv³
		inv3 := c.mul(inv, c.mul(inv, inv))
		dx[4] = c.mul(sumDyXc, c.mul(c.mul(scale, inv3), c.scalar(-0.5)))
	}
	return dx, nil
}
