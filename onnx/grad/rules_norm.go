package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("BatchNormalization", opSpec{rule: batchNormRule, nature: smooth, upgrade: opsetUpgrade{13, upgradeBatchNorm}})
	register("LayerNormalization", opSpec{rule: layerNormRule, nature: smooth})
	register("InstanceNormalization", opSpec{rule: instanceNormRule, nature: smooth})
	register("GroupNormalization", opSpec{rule: groupNormRule, nature: smooth})
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

// The normalisations share one backward: with x̂ = (x − mean)·inv, mean and
// variance taken over axes and g = ∂L/∂x̂,
//
//	dx = inv·(g − mean(g) − x̂·mean(g·x̂)),
//
// two reductions and a few elementwise ops over the whole tensor.
func normInputGrad(c *gradCtx, g, xhat, inv string, axes []int64) string {
	mg := c.reduceMean(g, axes)
	mgx := c.reduceMean(c.mul(g, xhat), axes)
	return c.mul(c.sub(c.sub(g, mg), c.mul(xhat, mgx)), inv)
}

// reduceMean averages over axes, keeping them.
func (c *gradCtx) reduceMean(x string, axes []int64) string {
	return c.op1("ReduceMean", []string{x, c.ints(axes...)}, onnx.IntAttr("keepdims", 1))
}

// normalized recomputes x̂ and inv = 1/√(var + ε) over axes, for the
// operators whose forward node does not output its statistics.
func normalized(c *gradCtx, x string, axes []int64, eps float64) (xhat, inv string) {
	xc := c.sub(x, c.reduceMean(x, axes))
	inv = c.op1("Reciprocal", []string{c.op1("Sqrt", []string{c.add(c.reduceMean(c.mul(xc, xc), axes), c.scalar(eps))})})
	return c.mul(xc, inv), inv
}

// axisRange is [from, to).
func axisRange(from, to int) []int64 {
	var r []int64
	for i := from; i < to; i++ {
		r = append(r, int64(i))
	}
	return r
}

// channelShape is [1, ch, 1, ...] of the given rank.
func channelShape(rank int, ch int64) []int64 {
	s := make([]int64, rank)
	for i := range s {
		s[i] = 1
	}
	s[1] = ch
	return s
}

// layerNormRule differentiates LayerNormalization (opset 17), normalised
// over the axes from axis on. The forward node keeps ONNX Runtime's fused
// kernel; the backward reads its Mean and InvStdDev outputs, which the rule
// asks for when the model does not.
func layerNormRule(c *gradCtx) ([]string, error) {
	for j := 1; j < len(c.dY); j++ {
		if c.dY[j] != "" {
			return nil, unsupportedf("gradient through LayerNormalization's Mean or InvStdDev output is not supported")
		}
	}
	x, scale := c.in(0), c.in(1)
	xs := c.shape(x)
	axis, err := normAxis(attrInt(c.n, "axis", -1), len(xs))
	if err != nil {
		return nil, err
	}
	for len(c.n.Output) < 3 {
		c.n.Output = append(c.n.Output, "")
	}
	for j, hint := range []string{1: "layernorm_mean", 2: "layernorm_invstd"} {
		if j > 0 && c.n.Output[j] == "" {
			c.n.Output[j] = c.fresh(hint)
		}
	}
	// Mean and InvStdDev have the stash type (float): cast to x's type.
	xType := onnx.IntAttr("to", int64(c.c.info[x].dtype))
	mean, inv := c.op1("Cast", []string{c.out(1)}, xType), c.op1("Cast", []string{c.out(2)}, xType)
	axes := axisRange(int(axis), len(xs))
	outer := axisRange(0, int(axis))
	xhat := c.mul(c.sub(x, mean), inv)
	dy := c.dy(0)
	paramGrad := func(g string, i int) string {
		if len(outer) > 0 {
			g = c.reduceSum(g, outer, false)
		}
		return c.unbroadcast(g, xs[axis:], c.shape(c.in(i)))
	}
	dx := c.grads()
	if c.wants(0) {
		dx[0] = normInputGrad(c, c.mul(dy, scale), xhat, inv, axes)
	}
	if c.wants(1) {
		dx[1] = paramGrad(c.mul(dy, xhat), 1)
	}
	if c.wants(2) {
		dx[2] = paramGrad(dy, 2)
	}
	return dx, nil
}

// instanceNormRule: y = x̂·scale + B per channel, x̂ normalised over each
// sample's channel (the spatial axes).
func instanceNormRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	xs := c.shape(x)
	if len(xs) < 3 {
		return nil, fmt.Errorf("input rank %d < 3", len(xs))
	}
	axes := axisRange(2, len(xs))
	xhat, inv := normalized(c, x, axes, float64(attrFloat(c.n, "epsilon", 1e-5)))
	dy := c.dY[0]
	perChannel := append([]int64{0}, axes...)
	dx := c.grads()
	if c.wants(0) {
		g := c.mul(dy, c.reshape(c.in(1), channelShape(len(xs), xs[1])))
		dx[0] = normInputGrad(c, g, xhat, inv, axes)
	}
	if c.wants(1) {
		dx[1] = c.reduceSum(c.mul(dy, xhat), perChannel, false)
	}
	if c.wants(2) {
		dx[2] = c.reduceSum(dy, perChannel, false)
	}
	return dx, nil
}

// groupNormRule differentiates GroupNormalization, normalised over each
// sample's group of channels (viewed as [N, G, M]). Its scale and bias are
// per group in opset 18 (applied to that view) and per channel from opset
// 21 (applied to x's own shape).
func groupNormRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	xs := c.shape(x)
	groups := attrInt(c.n, "num_groups", 0)
	if len(xs) < 2 || groups <= 0 || xs[1]%groups != 0 {
		return nil, fmt.Errorf("num_groups %d does not divide the %v input's channels", groups, xs)
	}
	grouped := []int64{xs[0], groups, numel(xs[1:]) / groups}
	xhat, inv := normalized(c, c.reshape(x, grouped), []int64{2}, float64(attrFloat(c.n, "epsilon", 1e-5)))
	dy := c.dY[0]
	dx := c.grads()
	if c.c.opset < 21 {
		dyg := c.reshape(dy, grouped)
		if c.wants(0) {
			g := c.mul(dyg, c.reshape(c.in(1), []int64{1, groups, 1}))
			dx[0] = c.reshape(normInputGrad(c, g, xhat, inv, []int64{2}), xs)
		}
		if c.wants(1) {
			dx[1] = c.reduceSum(c.mul(dyg, xhat), []int64{0, 2}, false)
		}
		if c.wants(2) {
			dx[2] = c.reduceSum(dyg, []int64{0, 2}, false)
		}
		return dx, nil
	}
	perChannel := append([]int64{0}, axisRange(2, len(xs))...)
	if c.wants(0) {
		g := c.reshape(c.mul(dy, c.reshape(c.in(1), channelShape(len(xs), xs[1]))), grouped)
		dx[0] = c.reshape(normInputGrad(c, g, xhat, inv, []int64{2}), xs)
	}
	if c.wants(1) {
		dx[1] = c.reduceSum(c.mul(dy, c.reshape(xhat, xs)), perChannel, false)
	}
	if c.wants(2) {
		dx[2] = c.reduceSum(dy, perChannel, false)
	}
	return dx, nil
}
