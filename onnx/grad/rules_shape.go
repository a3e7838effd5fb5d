package grad

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Identity", opSpec{rule: identityRule, nature: linear})
	register("Dropout", opSpec{rule: identityRule, nature: linear, upgrade: opsetUpgrade{13, upgradeDropout}})
	register("Reshape", opSpec{rule: reshapeBackRule, nature: linear})
	register("Flatten", opSpec{rule: reshapeBackRule, nature: linear})
	register("Squeeze", opSpec{rule: reshapeBackRule, nature: linear, upgrade: opsetUpgrade{13, moveAttrToInput("axes", 1)}})
	register("Unsqueeze", opSpec{rule: reshapeBackRule, nature: linear, upgrade: opsetUpgrade{13, moveAttrToInput("axes", 1)}})
	register("Transpose", opSpec{rule: transposeRule, nature: linear})
	register("Concat", opSpec{rule: concatRule, nature: linear})
	register("Split", opSpec{rule: splitRule, nature: linear, upgrade: opsetUpgrade{18, upgradeSplit}})
	register("Slice", opSpec{rule: sliceRule, nature: linear, upgrade: opsetUpgrade{10, upgradeSlice}})
	register("Pad", opSpec{rule: padRule, nature: linear, upgrade: opsetUpgrade{11, upgradePad}})
	register("Cast", opSpec{rule: castRule, nature: linear})
	for _, op := range []string{"Shape", "Size", "ConstantOfShape", "EyeLike"} {
		register(op, opSpec{nature: shapeOnly})
	}
}

// identityRule also serves Dropout, which the training graph treats as its
// inference form (identity); a Dropout asked to train is refused.
func identityRule(c *gradCtx) ([]string, error) {
	if c.n.GetOpType() == "Dropout" {
		if tm := c.in(2); tm != "" {
			v, ok, err := c.constInts(2)
			if err != nil || !ok || len(v) != 1 || v[0] != 0 {
				return nil, unsupportedf("Dropout in training mode is not supported (its mask is random)")
			}
		}
	}
	dx := c.grads()
	dx[0] = c.dY[0]
	return dx, nil
}

// reshapeBackRule undoes any pure reshape: dx = Reshape(dy, shape(x)).
func reshapeBackRule(c *gradCtx) ([]string, error) {
	dx := c.grads()
	dx[0] = c.reshape(c.dY[0], c.shape(c.in(0)))
	return dx, nil
}

func transposeRule(c *gradCtx) ([]string, error) {
	rank := len(c.shape(c.in(0)))
	perm := attrInts(c.n, "perm")
	if perm == nil {
		for i := rank - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != rank {
		return nil, fmt.Errorf("perm %v does not match rank %d", perm, rank)
	}
	inv := make([]int64, rank)
	for i, p := range perm {
		if p < 0 || p >= int64(rank) {
			return nil, fmt.Errorf("perm %v is not a permutation", perm)
		}
		inv[p] = int64(i)
	}
	return []string{c.transpose(c.dY[0], inv)}, nil
}

// concatRule splits dy back into the pieces.
func concatRule(c *gradCtx) ([]string, error) {
	ys := c.shape(c.out(0))
	axis, err := normAxis(attrInt(c.n, "axis", 0), len(ys))
	if err != nil {
		return nil, err
	}
	sizes := make([]int64, len(c.n.Input))
	for i, x := range c.n.Input {
		s := c.shape(x)
		if len(s) != len(ys) {
			return nil, fmt.Errorf("input %q has rank %d, output rank %d", x, len(s), len(ys))
		}
		sizes[i] = s[axis]
	}
	dx := c.grads()
	if len(sizes) == 1 {
		dx[0] = c.dY[0]
		return dx, nil
	}
	outs := c.op("Split", []string{c.dY[0], c.ints(sizes...)}, len(sizes), onnx.IntAttr("axis", axis))
	for i := range sizes {
		if c.wants(i) {
			dx[i] = outs[i]
		}
	}
	return dx, nil
}

// splitRule concatenates the pieces' gradients (zeros for pieces without one).
func splitRule(c *gradCtx) ([]string, error) {
	xs := c.shape(c.in(0))
	axis, err := normAxis(attrInt(c.n, "axis", 0), len(xs))
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(c.n.Output))
	for i := range c.n.Output {
		parts[i] = c.dy(i)
	}
	dx := c.grads()
	if len(parts) == 1 {
		dx[0] = parts[0]
	} else {
		dx[0] = c.op1("Concat", parts, onnx.IntAttr("axis", axis))
	}
	return dx, nil
}

func castRule(c *gradCtx) ([]string, error) {
	if !c.c.isFloat(c.out(0)) {
		return c.grads(), nil
	}
	dx := c.grads()
	dx[0] = c.op1("Cast", []string{c.dY[0]}, onnx.IntAttr("to", int64(c.c.info[c.in(0)].dtype)))
	return dx, nil
}

// sliceRule pads dy with zeros back to x's shape for unit steps, and
// scatters it through a static index map otherwise.
func sliceRule(c *gradCtx) ([]string, error) {
	xs, ys := c.shape(c.in(0)), c.shape(c.out(0))
	starts, _, err := c.constInts(1)
	if err != nil {
		return nil, err
	}
	ends, _, err := c.constInts(2)
	if err != nil {
		return nil, err
	}
	axes, hasAxes, err := c.constInts(3)
	if err != nil {
		return nil, err
	}
	steps, hasSteps, err := c.constInts(4)
	if err != nil {
		return nil, err
	}
	if !hasAxes {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if !hasSteps {
		steps = ones(len(starts))
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("starts, ends, axes and steps differ in length")
	}
	rank := len(xs)
	begin := make([]int64, rank)
	step := ones(rank)
	for i, a := range axes {
		a, err := normAxis(a, rank)
		if err != nil {
			return nil, err
		}
		if steps[i] == 0 {
			return nil, fmt.Errorf("step 0")
		}
		begin[a] = clampStart(starts[i], xs[a], steps[i])
		step[a] = steps[i]
	}
	dx := c.grads()
	if slices.Equal(step, ones(rank)) {
		pads := make([]int64, 2*rank)
		for a := 0; a < rank; a++ {
			pads[a] = begin[a]
			pads[rank+a] = xs[a] - begin[a] - ys[a]
		}
		dx[0] = c.viaFloat32(c.dtype(c.in(0)), "Pad", []string{c.dY[0]}, []string{c.ints(pads...)})
		return dx, nil
	}
	// Strided or reversed slice: out[i] = x[begin + i·step] per axis.
	src := make([][]int64, rank)
	for a := 0; a < rank; a++ {
		src[a] = make([]int64, ys[a])
		for i := range src[a] {
			src[a][i] = begin[a] + int64(i)*step[a]
		}
	}
	dx[0] = scatterBack(c.builder, c.dY[0], xs, ys, src, false)
	return dx, nil
}

// clampStart resolves a Slice start as ONNX does.
func clampStart(s, dim, step int64) int64 {
	if s < 0 {
		s += dim
	}
	if step > 0 {
		return min(max(s, 0), dim)
	}
	return min(max(s, 0), dim-1)
}

// scatterBack is the adjoint of a separable static gather y[i...] =
// x[src0[i0], src1[i1], ...] (src entries of −1 read zero): it scatters dy
// into zeros of x's shape with reduction "add" through a constant index map.
func scatterBack(b *builder, dy string, xs, ys []int64, src [][]int64, accumulate bool) string {
	rank := len(xs)
	strides := make([]int64, rank)
	s := int64(1)
	for a := rank - 1; a >= 0; a-- {
		strides[a] = s
		s *= xs[a]
	}
	n := numel(ys)
	idx := make([]int64, 0, n)
	keep := make([]int64, 0, n)
	pos := make([]int64, rank)
	for flat := int64(0); flat < n; flat++ {
		off, ok := int64(0), true
		for a := 0; a < rank; a++ {
			v := src[a][pos[a]]
			if v < 0 {
				ok = false
				break
			}
			off += v * strides[a]
		}
		if ok {
			idx = append(idx, off)
			keep = append(keep, flat)
		}
		for a := rank - 1; a >= 0; a-- {
			pos[a]++
			if pos[a] < ys[a] {
				break
			}
			pos[a] = 0
		}
	}
	flatDy := b.reshape(dy, []int64{n})
	if int64(len(keep)) != n {
		flatDy = b.op1("Gather", []string{flatDy, b.constInt64(keep, []int64{int64(len(keep))})}, onnx.IntAttr("axis", 0))
	}
	zeros := b.zeros([]int64{numel(xs)})
	var r string
	if accumulate {
		r = b.op1("ScatterElements", []string{zeros, b.constInt64(idx, []int64{int64(len(idx))}), flatDy},
			onnx.IntAttr("axis", 0), onnx.StringAttr("reduction", "add"))
	} else {
		r = b.op1("ScatterElements", []string{zeros, b.constInt64(idx, []int64{int64(len(idx))}), flatDy}, onnx.IntAttr("axis", 0))
	}
	return b.reshape(r, xs)
}

// padRule: constant padding is undone by slicing; reflect/edge padding and
// negative pads (crops) go through the index-map adjoint.
func padRule(c *gradCtx) ([]string, error) {
	xs, ys := c.shape(c.in(0)), c.shape(c.out(0))
	rank := len(xs)
	pads, _, err := c.constInts(1)
	if err != nil {
		return nil, err
	}
	full := make([]int64, 2*rank)
	if axesIn := c.in(3); axesIn != "" {
		axes, _, err := c.constInts(3)
		if err != nil {
			return nil, err
		}
		if len(pads) != 2*len(axes) {
			return nil, fmt.Errorf("pads %v do not match axes %v", pads, axes)
		}
		for i, a := range axes {
			a, err := normAxis(a, rank)
			if err != nil {
				return nil, err
			}
			full[a], full[rank+int(a)] = pads[i], pads[len(axes)+i]
		}
	} else {
		if len(pads) != 2*rank {
			return nil, fmt.Errorf("pads %v do not match rank %d", pads, rank)
		}
		copy(full, pads)
	}
	mode := attrString(c.n, "mode", "constant")
	dx := c.grads()
	if mode == "constant" && !slices.ContainsFunc(full, func(p int64) bool { return p < 0 }) {
		ends := make([]int64, rank)
		axes := make([]int64, rank)
		for a := 0; a < rank; a++ {
			ends[a] = full[a] + xs[a]
			axes[a] = int64(a)
		}
		dx[0] = c.slice(c.dY[0], full[:rank], ends, axes)
		return dx, nil
	}
	src := make([][]int64, rank)
	for a := 0; a < rank; a++ {
		src[a] = make([]int64, ys[a])
		for i := range src[a] {
			j := int64(i) - full[a]
			switch {
			case j >= 0 && j < xs[a]:
			case mode == "constant":
				j = -1
			case mode == "edge":
				j = min(max(j, 0), xs[a]-1)
			case mode == "reflect":
				if xs[a] == 1 {
					j = 0
					break
				}
				period := 2 * (xs[a] - 1)
				j = ((j % period) + period) % period
				if j >= xs[a] {
					j = period - j
				}
			case mode == "wrap":
				j = ((j % xs[a]) + xs[a]) % xs[a]
			default:
				return nil, unsupportedf("pad mode %q is not supported", mode)
			}
			src[a][i] = j
		}
	}
	dx[0] = scatterBack(c.builder, c.dY[0], xs, ys, src, true)
	return dx, nil
}
