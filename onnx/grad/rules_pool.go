package grad

import (
	"fmt"
	"slices"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("GlobalAveragePool", opSpec{rule: globalAveragePoolRule, nature: linear})
	register("AveragePool", opSpec{rule: averagePoolRule, nature: linear})
	register("MaxPool", opSpec{rule: maxPoolRule, nature: piecewiseLinear, indexOutputs: []int{1}})
}

// globalAveragePoolRule spreads dy / (number of spatial positions).
func globalAveragePoolRule(c *gradCtx) ([]string, error) {
	xs := c.shape(c.in(0))
	if len(xs) < 3 {
		return nil, fmt.Errorf("input rank %d < 3", len(xs))
	}
	g := c.mul(c.dY[0], c.scalar(1/float64(numel(xs[2:]))))
	return []string{c.op1("Expand", []string{g, c.ints(xs...)})}, nil
}

// poolGeom resolves kernel, strides, dilations and pads of a pooling node.
func poolGeom(c *gradCtx, xs, ys []int64) (k, s, d, pb, pe []int64, err error) {
	nsp := len(xs) - 2
	k, s, d = attrInts(c.n, "kernel_shape"), attrInts(c.n, "strides"), attrInts(c.n, "dilations")
	if s == nil {
		s = ones(nsp)
	}
	if d == nil {
		d = ones(nsp)
	}
	if len(k) != nsp || len(s) != nsp || len(d) != nsp {
		return nil, nil, nil, nil, nil, fmt.Errorf("kernel_shape, strides or dilations do not match %d spatial dimensions", nsp)
	}
	pb, pe = make([]int64, nsp), make([]int64, nsp)
	pads := attrInts(c.n, "pads")
	auto := attrString(c.n, "auto_pad", "NOTSET")
	for i := 0; i < nsp; i++ {
		total := max((ys[i+2]-1)*s[i]+(k[i]-1)*d[i]+1-xs[i+2], 0)
		switch {
		case auto == "SAME_UPPER":
			pb[i], pe[i] = total/2, total-total/2
		case auto == "SAME_LOWER":
			pb[i], pe[i] = total-total/2, total/2
		case auto == "VALID":
		case pads != nil:
			if len(pads) != 2*nsp {
				return nil, nil, nil, nil, nil, fmt.Errorf("pads %v do not match %d spatial dimensions", pads, nsp)
			}
			pb[i], pe[i] = pads[i], pads[nsp+i]
		}
	}
	return k, s, d, pb, pe, nil
}

// averagePoolRule: each output spreads dy/count over its window. The
// counts (which depend on count_include_pad and the borders) are a constant
// separable map; the spreading is a ConvTranspose with a ones kernel per
// channel. A pool whose single window covers the whole input is an Expand.
func averagePoolRule(c *gradCtx) ([]string, error) {
	xs, ys := c.shape(c.in(0)), c.shape(c.out(0))
	if len(xs) < 3 || len(ys) != len(xs) {
		return nil, fmt.Errorf("shapes X %v, Y %v are not a pooling", xs, ys)
	}
	k, s, d, pb, pe, err := poolGeom(c, xs, ys)
	if err != nil {
		return nil, err
	}
	nsp := len(xs) - 2
	includePad := attrInt(c.n, "count_include_pad", 0) != 0
	global := true
	for i := 0; i < nsp; i++ {
		if ys[i+2] != 1 || pb[i] != 0 || pe[i] != 0 || k[i] != xs[i+2] || d[i] != 1 {
			global = false
		}
	}
	if global {
		g := c.mul(c.dY[0], c.scalar(1/float64(numel(k))))
		return []string{c.op1("Expand", []string{g, c.ints(xs...)})}, nil
	}
	// Per-axis reciprocal window sizes, multiplied into one map [out...].
	inv := []float64{1}
	for i := 0; i < nsp; i++ {
		lo, hi := int64(0), xs[i+2]
		if includePad {
			lo, hi = -pb[i], xs[i+2]+pe[i]
		}
		axis := make([]float64, ys[i+2])
		for o := range axis {
			start := int64(o)*s[i] - pb[i]
			n := 0
			for j := int64(0); j < k[i]; j++ {
				if p := start + j*d[i]; p >= lo && p < hi {
					n++
				}
			}
			if n == 0 {
				n = 1 // an empty window outputs 0 and passes no gradient
			}
			axis[o] = 1 / float64(n)
		}
		next := make([]float64, 0, len(inv)*len(axis))
		for _, a := range inv {
			for _, b := range axis {
				next = append(next, a*b)
			}
		}
		inv = next
	}
	scaled := c.mul(c.dY[0], c.constFloat(inv, ys[2:]))
	ch := xs[1]
	kern := make([]float64, ch*numel(k))
	for i := range kern {
		kern[i] = 1
	}
	w := c.constFloat(kern, slices.Concat([]int64{ch, 1}, k))
	pe2, opad := make([]int64, nsp), make([]int64, nsp)
	for i := 0; i < nsp; i++ {
		pe2[i] = s[i]*(ys[i+2]-1) + (k[i]-1)*d[i] + 1 - pb[i] - xs[i+2]
		if pe2[i] < 0 {
			opad[i], pe2[i] = -pe2[i], 0
		}
	}
	return []string{c.op1("ConvTranspose", []string{scaled, w},
		onnx.IntsAttr("strides", s...), onnx.IntsAttr("dilations", d...), onnx.IntsAttr("pads", slices.Concat(pb, pe2)...),
		onnx.IntsAttr("output_padding", opad...), onnx.IntAttr("group", ch), onnx.IntsAttr("kernel_shape", k...))}, nil
}

// maxPoolRule asks the forward node for its Indices output (flat positions
// in the whole input) and scatter-adds dy there; "add" makes overlapping
// windows that pick the same element accumulate.
func maxPoolRule(c *gradCtx) ([]string, error) {
	xs := c.shape(c.in(0))
	idx := c.out(1)
	if idx == "" {
		if attrInt(c.n, "storage_order", 0) != 0 {
			delAttr(c.n, "storage_order") // only changes Indices, which nothing else reads
		}
		idx = c.fresh("maxpool_indices")
		if len(c.n.Output) < 2 {
			c.n.Output = append(c.n.Output, idx)
		} else {
			c.n.Output[1] = idx
		}
	} else if attrInt(c.n, "storage_order", 0) != 0 {
		return nil, unsupportedf("MaxPool with storage_order=1 Indices consumed elsewhere is not supported")
	}
	flatI := c.reshape(idx, []int64{-1})
	flatD := c.reshape(c.dY[0], []int64{-1})
	r := c.op1("ScatterElements", []string{c.zeros([]int64{numel(xs)}), flatI, flatD},
		onnx.IntAttr("axis", 0), onnx.StringAttr("reduction", "add"))
	return []string{c.reshape(r, xs)}, nil
}
