package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
)

// trimDeadTaps rewrites Conv nodes whose outer kernel taps only ever read
// padding (a dilated 3×3 at rate 12 or 18 on an 8×8 feature map, as in
// DeepLabV3+'s ASPP at output stride 16, is effectively 1×1): the weights
// become Slice(W) over the live taps and the pads shrink to match, so the
// forward, the input gradient and the weight gradient all run the smaller
// convolution. The math is unchanged (the dropped taps multiply zeros), and
// the gradient of the dropped weights is exactly 0 (Slice's rule pads it).
// Only leading and trailing dead taps of explicitly padded convolutions are
// trimmed.
func (c *compiler) trimDeadTaps() {
	b := newBuilder("trim/", c.floatType, func(s string) bool { return c.names[s] })
	var out []*onnx.NodeProto
	for _, n := range c.g.Node {
		if n.GetOpType() == "Conv" && (n.GetDomain() == "" || n.GetDomain() == "ai.onnx") && len(n.Input) >= 2 {
			if w, ok := c.trimConv(b, n); ok {
				out = append(out, b.nodes...)
				b.nodes = nil
				n.Input[1] = w
			}
		}
		out = append(out, n)
	}
	c.g.Node = out
	for _, t := range b.inits {
		c.g.Initializer = append(c.g.Initializer, t)
		c.inits[t.GetName()] = t
		c.madeConst[t.GetName()] = true
		c.info[t.GetName()] = &tensorInfo{shape: slices.Clone(t.GetDims()), dtype: t.GetDataType()}
	}
}

// trimConv emits Slice(W) for n when it has dead outer taps, updates n's
// kernel_shape and pads, and returns the sliced weights' name.
func (c *compiler) trimConv(b *builder, n *onnx.NodeProto) (string, bool) {
	xi, wi, yi := c.info[n.Input[0]], c.info[n.Input[1]], c.info[n.Output[0]]
	if xi == nil || wi == nil || yi == nil || len(xi.shape) < 3 || len(wi.shape) != len(xi.shape) || len(yi.shape) != len(xi.shape) {
		return "", false
	}
	if attrString(n, "auto_pad", "NOTSET") != "NOTSET" {
		return "", false
	}
	nsp := len(xi.shape) - 2
	k := slices.Clone(wi.shape[2:])
	if ks := attrInts(n, "kernel_shape"); ks != nil && !slices.Equal(ks, k) {
		return "", false
	}
	s, d, pads := attrInts(n, "strides"), attrInts(n, "dilations"), attrInts(n, "pads")
	if s == nil {
		s = ones(nsp)
	}
	if d == nil {
		d = ones(nsp)
	}
	if pads == nil {
		return "", false // unpadded: every tap reads the input
	}
	if len(s) != nsp || len(d) != nsp || len(pads) != 2*nsp {
		return "", false
	}
	in, outSz := xi.shape[2:], yi.shape[2:]
	live := func(i int, t int64) bool {
		for o := int64(0); o < outSz[i]; o++ {
			if p := o*s[i] + t*d[i] - pads[i]; p >= 0 && p < in[i] {
				return true
			}
		}
		return false
	}
	newPads := slices.Clone(pads)
	newK := slices.Clone(k)
	var axes, starts, ends []int64
	for i := 0; i < nsp; i++ {
		t0, t1 := int64(0), k[i]-1
		for t0 <= t1 && !live(i, t0) {
			t0++
		}
		for t1 >= t0 && !live(i, t1) {
			t1--
		}
		if t0 > t1 || (t0 == 0 && t1 == k[i]-1) {
			continue // nothing live (output is bias only) or nothing dead
		}
		pb := pads[i] - t0*d[i]
		pe := pads[nsp+i] - (k[i]-1-t1)*d[i]
		if pb < 0 || pe < 0 {
			continue
		}
		newPads[i], newPads[nsp+i] = pb, pe
		newK[i] = t1 - t0 + 1
		axes = append(axes, int64(i+2))
		starts = append(starts, t0)
		ends = append(ends, t1+1)
	}
	if len(axes) == 0 {
		return "", false
	}
	w := b.slice(n.Input[1], starts, ends, axes)
	c.names[w] = true
	c.info[w] = &tensorInfo{shape: slices.Concat(wi.shape[:2], newK), dtype: wi.dtype}
	setAttr(n, onnx.IntsAttr("pads", newPads...))
	setAttr(n, onnx.IntsAttr("kernel_shape", newK...))
	return w, true
}
