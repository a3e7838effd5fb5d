package grad

import (
	"math"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Relu", opSpec{rule: reluRule, nature: piecewiseLinear})
	register("LeakyRelu", opSpec{rule: leakyReluRule, nature: piecewiseLinear})
	register("PRelu", opSpec{rule: preluRule, nature: piecewiseLinear})
	register("Clip", opSpec{rule: clipRule, nature: piecewiseLinear, upgrade: opsetUpgrade{11, upgradeClip}})
	register("Sigmoid", opSpec{rule: sigmoidRule, nature: smooth})
	register("Tanh", opSpec{rule: tanhRule, nature: smooth})
	register("HardSigmoid", opSpec{rule: hardSigmoidRule, nature: piecewiseLinear})
	register("HardSwish", opSpec{rule: hardSwishRule, nature: piecewise})
	register("Exp", opSpec{rule: expRule, nature: smooth})
	register("Erf", opSpec{rule: erfRule, nature: smooth})
	register("Gelu", opSpec{rule: geluRule, nature: smooth})
	register("Softmax", opSpec{rule: softmaxRule, nature: smooth, upgrade: opsetUpgrade{13, upgradeSoftmax}})
	register("LogSoftmax", opSpec{rule: logSoftmaxRule, nature: smooth, upgrade: opsetUpgrade{13, upgradeSoftmax}})
	// No rule: upgraded so that the forward graph keeps its meaning.
	register("Hardmax", opSpec{upgrade: opsetUpgrade{13, upgradeSoftmax}})
}

// Kinks: the gradient at exactly the kink is 0 for Relu (like PyTorch) and,
// for Clip with constant bounds, 0 at both bounds (like PyTorch's ReLU6 /
// hardtanh, whose backward also reads the output); with trainable bounds,
// Clip keeps the bounds inside (like torch.clamp).

// Masks: by default dy is multiplied by Cast(mask) rather than selected by
// Where(mask, dy, 0): ONNX Runtime's CPU Where with a scalar operand is
// about 1.7× slower than the Cast + Mul pair. Config.WhereMasks (GPU
// sessions) selects with one Where instead, one kernel per mask as PyTorch
// runs. Relu, Clip and LeakyRelu read the mask off the forward *output*, so
// the forward input (typically a Conv output) is not kept alive for the
// backward pass, and ONNX Runtime can fuse Conv + Relu/Clip.

// maskGrad returns dy where mask holds and 0 elsewhere.
func maskGrad(c *gradCtx, mask, dy string) string {
	if c.c.cfg.WhereMasks {
		return c.where(mask, dy, c.zeroLike(dy))
	}
	dt := c.dtype(c.forwardOf(dy))
	return c.mul(dy, c.op1("Cast", []string{mask}, onnx.IntAttr("to", int64(dt))))
}

// zeroLike is a rank-0 zero of the element type of forward tensor x or of
// the gradient of one (a half type in a half-precision graph).
func (c *gradCtx) zeroLike(x string) string {
	return c.constOf(c.dtype(c.forwardOf(x)), []float64{0}, nil)
}

// forwardOf returns the forward tensor whose element type gradient g
// shares: the node's output whose gradient g is, else g itself.
func (c *gradCtx) forwardOf(g string) string {
	for j, d := range c.dY {
		if d == g {
			return c.out(j)
		}
	}
	return g
}

func reluRule(c *gradCtx) ([]string, error) {
	// y > 0 exactly where x > 0.
	pos := c.op1("Greater", []string{c.out(0), c.zeroLike(c.out(0))})
	return []string{maskGrad(c, pos, c.dY[0])}, nil
}

func leakyReluRule(c *gradCtx) ([]string, error) {
	alpha := float64(attrFloat(c.n, "alpha", 0.01))
	// With a positive slope y > 0 exactly where x > 0, so the mask reads
	// the output, as Relu's does.
	x := c.in(0)
	if alpha > 0 {
		x = c.out(0)
	}
	pos := c.op1("Greater", []string{x, c.zeroLike(x)})
	dt := c.dtype(c.out(0))
	return []string{c.where(pos, c.dY[0], c.mul(c.dY[0], c.constOf(dt, []float64{alpha}, nil)))}, nil
}

func preluRule(c *gradCtx) ([]string, error) {
	x, slope := c.in(0), c.in(1)
	xs, ss, ys := binaryShapes(c)
	pos := c.op1("Greater", []string{x, c.scalar(0)})
	zero := c.scalar(0)
	dx := c.grads()
	if c.wants(0) {
		dx[0] = c.unbroadcast(c.where(pos, c.dY[0], c.mul(c.dY[0], slope)), ys, xs)
	}
	if c.wants(1) {
		dx[1] = c.unbroadcast(c.where(pos, zero, c.mul(c.dY[0], x)), ys, ss)
	}
	return dx, nil
}

// clipRule: dy passes where min ≤ x ≤ max; the bounds (when trainable)
// collect the gradient of the clipped elements.
func clipRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	if !c.wants(1) && !c.wants(2) && (c.in(1) != "" || c.in(2) != "") {
		// Constant bounds: dy passes strictly between them, which the
		// output tells as well as the input: min < y < max ⇔ min < x < max.
		y := c.out(0)
		var pass string
		if lo := c.in(1); lo != "" {
			pass = c.op1("Greater", []string{y, lo})
		}
		if hi := c.in(2); hi != "" {
			m := c.op1("Less", []string{y, hi})
			if pass == "" {
				pass = m
			} else {
				pass = c.op1("And", []string{pass, m})
			}
		}
		dx := c.grads()
		dx[0] = maskGrad(c, pass, c.dY[0])
		return dx, nil
	}
	zero := c.zeroLike(c.out(0))
	pass := ""
	and := func(m string) {
		if pass == "" {
			pass = m
		} else {
			pass = c.op1("And", []string{pass, m})
		}
	}
	if lo := c.in(1); lo != "" {
		and(c.op1("GreaterOrEqual", []string{x, lo}))
	}
	if hi := c.in(2); hi != "" {
		and(c.op1("LessOrEqual", []string{x, hi}))
	}
	dx := c.grads()
	if pass == "" {
		dx[0] = c.dY[0]
		return dx, nil
	}
	if c.wants(0) {
		dx[0] = c.where(pass, c.dY[0], zero)
	}
	if c.wants(1) {
		dx[1] = c.op1("ReduceSum", []string{c.where(c.op1("Less", []string{x, c.in(1)}), c.dY[0], zero)}, onnx.IntAttr("keepdims", 0))
	}
	if c.wants(2) {
		dx[2] = c.op1("ReduceSum", []string{c.where(c.op1("Greater", []string{x, c.in(2)}), c.dY[0], zero)}, onnx.IntAttr("keepdims", 0))
	}
	return dx, nil
}

func sigmoidRule(c *gradCtx) ([]string, error) {
	y := c.out(0)
	return []string{c.mul(c.dY[0], c.mul(y, c.sub(c.scalar(1), y)))}, nil
}

func tanhRule(c *gradCtx) ([]string, error) {
	y := c.out(0)
	return []string{c.mul(c.dY[0], c.sub(c.scalar(1), c.mul(y, y)))}, nil
}

func expRule(c *gradCtx) ([]string, error) {
	return []string{c.mul(c.dY[0], c.out(0))}, nil
}

// hardSigmoidRule: y = max(0, min(1, αx+β)); dy·α strictly inside (0, 1).
func hardSigmoidRule(c *gradCtx) ([]string, error) {
	alpha := float64(attrFloat(c.n, "alpha", 0.2))
	beta := float64(attrFloat(c.n, "beta", 0.5))
	t := c.add(c.mul(c.in(0), c.scalar(alpha)), c.scalar(beta))
	inside := c.op1("And", []string{c.op1("Greater", []string{t, c.scalar(0)}), c.op1("Less", []string{t, c.scalar(1)})})
	return []string{c.where(inside, c.mul(c.dY[0], c.scalar(alpha)), c.scalar(0))}, nil
}

// hardSwishRule: y = x·clip(x/6 + 1/2, 0, 1); dy/dx = 0 below −3, 1 above 3
// and x/3 + 1/2 between (PyTorch's convention at the kinks).
func hardSwishRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	mid := c.add(c.mul(x, c.scalar(1.0/3)), c.scalar(0.5))
	slope := c.where(c.op1("Less", []string{x, c.scalar(-3)}), c.scalar(0),
		c.where(c.op1("LessOrEqual", []string{x, c.scalar(3)}), mid, c.scalar(1)))
	return []string{c.mul(c.dY[0], slope)}, nil
}

// softmaxRule: dx = y ⊙ (dy − Σ_axis dy ⊙ y).
func softmaxRule(c *gradCtx) ([]string, error) {
	y := c.out(0)
	axis, err := normAxis(attrInt(c.n, "axis", -1), len(c.shape(y)))
	if err != nil {
		return nil, err
	}
	s := c.reduceSum(c.mul(c.dY[0], y), []int64{axis}, true)
	return []string{c.mul(y, c.sub(c.dY[0], s))}, nil
}

// logSoftmaxRule: dx = dy − exp(y) ⊙ Σ_axis dy.
func logSoftmaxRule(c *gradCtx) ([]string, error) {
	y := c.out(0)
	axis, err := normAxis(attrInt(c.n, "axis", -1), len(c.shape(y)))
	if err != nil {
		return nil, err
	}
	s := c.reduceSum(c.dY[0], []int64{axis}, true)
	return []string{c.sub(c.dY[0], c.mul(c.op1("Exp", []string{y}), s))}, nil
}

// erfRule: d erf(x)/dx = 2/√π·exp(−x²).
func erfRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	e := c.op1("Exp", []string{c.mul(c.mul(x, x), c.scalar(-1))})
	return []string{c.mul(c.dY[0], c.mul(e, c.scalar(2/math.Sqrt(math.Pi))))}, nil
}

// geluRule differentiates Gelu (opset 20) in both approximations:
// "none", y = x·Φ(x): dy/dx = Φ(x) + x·φ(x);
// "tanh", y = ½x(1 + t), t = tanh(u), u = √(2/π)(x + 0.044715x³):
// dy/dx = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²).
func geluRule(c *gradCtx) ([]string, error) {
	x := c.in(0)
	x2 := c.mul(x, x)
	var slope string
	switch a := attrString(c.n, "approximate", "none"); a {
	case "none":
		cdf := c.mul(c.add(c.op1("Erf", []string{c.mul(x, c.scalar(1/math.Sqrt2))}), c.scalar(1)), c.scalar(0.5))
		pdf := c.mul(c.op1("Exp", []string{c.mul(x2, c.scalar(-0.5))}), c.scalar(1/math.Sqrt(2*math.Pi)))
		slope = c.add(cdf, c.mul(x, pdf))
	case "tanh":
		const k, a3 = 0.7978845608028654, 0.044715 // √(2/π)
		t := c.op1("Tanh", []string{c.mul(c.mul(x, c.add(c.mul(x2, c.scalar(a3)), c.scalar(1))), c.scalar(k))})
		du := c.add(c.mul(x2, c.scalar(3*a3*k)), c.scalar(k))
		half := c.mul(c.add(t, c.scalar(1)), c.scalar(0.5))
		slope = c.add(half, c.mul(c.mul(c.mul(x, c.scalar(0.5)), c.sub(c.scalar(1), c.mul(t, t))), du))
	default:
		return nil, unsupportedf("Gelu approximate=%q is not supported (\"none\" or \"tanh\")", a)
	}
	return []string{c.mul(c.dY[0], slope)}, nil
}
