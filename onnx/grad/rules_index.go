package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Gather", opSpec{rule: gatherRule, nature: linear})
	register("GatherElements", opSpec{rule: gatherElementsRule, nature: linear})
	register("TopK", opSpec{rule: topKRule, nature: piecewiseLinear, indexOutputs: []int{1}, upgrade: opsetUpgrade{10, upgradeTopK}})
	register("CumSum", opSpec{rule: cumSumRule, nature: linear})
	register("NonZero", opSpec{nature: stepwise})
}

// int64Index casts an index tensor to int64 when needed.
func (c *gradCtx) int64Index(name string) string {
	if i, ok := c.c.info[name]; ok && i.dtype != int32(onnx.Int64) {
		return c.op1("Cast", []string{name}, onnx.IntAttr("to", int64(onnx.Int64)))
	}
	return name
}

// gatherRule scatter-adds dy back: data viewed as [pre, D, post], the
// indices flattened to M and broadcast to [pre, M, post].
func gatherRule(c *gradCtx) ([]string, error) {
	ds, is := c.shape(c.in(0)), c.shape(c.in(1))
	axis, err := normAxis(attrInt(c.n, "axis", 0), len(ds))
	if err != nil {
		return nil, err
	}
	pre, post := numel(ds[:axis]), numel(ds[axis+1:])
	m := numel(is)
	idx := c.reshape(c.int64Index(c.in(1)), []int64{1, m, 1})
	idx = c.op1("Expand", []string{idx, c.ints(pre, m, post)})
	upd := c.reshape(c.dY[0], []int64{pre, m, post})
	r := c.op1("ScatterElements", []string{c.zeros([]int64{pre, ds[axis], post}), idx, upd},
		onnx.IntAttr("axis", 1), onnx.StringAttr("reduction", "add"))
	dx := c.grads()
	dx[0] = c.reshape(r, ds)
	return dx, nil
}

func gatherElementsRule(c *gradCtx) ([]string, error) {
	ds := c.shape(c.in(0))
	axis, err := normAxis(attrInt(c.n, "axis", 0), len(ds))
	if err != nil {
		return nil, err
	}
	dx := c.grads()
	dx[0] = c.op1("ScatterElements", []string{c.zeros(ds), c.int64Index(c.in(1)), c.dY[0]},
		onnx.IntAttr("axis", axis), onnx.StringAttr("reduction", "add"))
	return dx, nil
}

// topKRule scatters the values' gradient to the selected positions (unique
// along the axis, so no accumulation is needed).
func topKRule(c *gradCtx) ([]string, error) {
	xs := c.shape(c.in(0))
	axis, err := normAxis(attrInt(c.n, "axis", -1), len(xs))
	if err != nil {
		return nil, err
	}
	if c.dY[0] == "" {
		return c.grads(), nil
	}
	if c.out(1) == "" {
		return nil, fmt.Errorf("TopK without an Indices output")
	}
	dx := c.grads()
	dx[0] = c.op1("ScatterElements", []string{c.zeros(xs), c.out(1), c.dY[0]}, onnx.IntAttr("axis", axis))
	return dx, nil
}

// cumSumRule: the adjoint of a cumulative sum is the cumulative sum in the
// other direction, with the same exclusivity.
func cumSumRule(c *gradCtx) ([]string, error) {
	if _, _, err := c.constInts(1); err != nil {
		return nil, err
	}
	rev := int64(1) - attrInt(c.n, "reverse", 0)
	attrs := []*onnx.AttributeProto{onnx.IntAttr("reverse", rev)}
	if e := attrInt(c.n, "exclusive", 0); e != 0 {
		attrs = append(attrs, onnx.IntAttr("exclusive", e))
	}
	dx := c.grads()
	dx[0] = c.op1("CumSum", []string{c.dY[0], c.in(1)}, attrs...)
	return dx, nil
}
