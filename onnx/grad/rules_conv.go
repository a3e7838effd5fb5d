package grad

import (
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Conv", opSpec{rule: convRule, nature: multilinear})
	register("ConvTranspose", opSpec{rule: convTransposeRule, nature: multilinear})
}

// convGeom is the resolved geometry of a convolution: kernel, strides,
// dilations and explicit begin pads per spatial axis, and the group count.
type convGeom struct {
	k, s, d, pb []int64
	group       int64
	// dtype is the operands' element type: float16 in a mixed-precision
	// graph (onnx/autocast), where the builder's constants, made in the
	// graph's float type, must not meet them.
	dtype int32
}

// readGeom resolves a (transposed) convolution's attributes. in and out are
// the spatial sizes on the convolution side (for Conv: X and Y; for
// ConvTranspose: Y and X, since its adjoint is a Conv), used to turn auto_pad
// into explicit begin pads.
func readGeom(c *gradCtx, wShape []int64, in, out []int64, transposed bool) (convGeom, error) {
	nsp := len(in)
	g := convGeom{group: attrInt(c.n, "group", 1), dtype: c.dtype(c.in(0))}
	g.k = attrInts(c.n, "kernel_shape")
	if g.k == nil {
		g.k = append([]int64{}, wShape[2:]...)
	}
	g.s, g.d = attrInts(c.n, "strides"), attrInts(c.n, "dilations")
	if g.s == nil {
		g.s = ones(nsp)
	}
	if g.d == nil {
		g.d = ones(nsp)
	}
	if len(g.k) != nsp || len(g.s) != nsp || len(g.d) != nsp || len(wShape) != nsp+2 {
		return g, fmt.Errorf("kernel, strides or dilations do not match %d spatial dimensions", nsp)
	}
	if g.group <= 0 {
		return g, fmt.Errorf("group %d must be positive", g.group)
	}
	pads := attrInts(c.n, "pads")
	autoPad := attrString(c.n, "auto_pad", "NOTSET")
	g.pb = make([]int64, nsp)
	outPad := attrInts(c.n, "output_padding")
	for i := 0; i < nsp; i++ {
		// Total padding the shapes imply; for ConvTranspose the output
		// padding is part of it.
		total := (out[i]-1)*g.s[i] + (g.k[i]-1)*g.d[i] + 1 - in[i]
		if transposed && len(outPad) == nsp {
			total += outPad[i]
		}
		switch {
		case autoPad == "VALID":
		case autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER" ||
			(transposed && pads == nil && attrInts(c.n, "output_shape") != nil):
			total = max(total, 0)
			if autoPad == "SAME_UPPER" {
				g.pb[i] = total / 2
			} else {
				g.pb[i] = total - total/2
			}
		case pads != nil:
			if len(pads) != 2*nsp {
				return g, fmt.Errorf("pads %v do not match %d spatial dimensions", pads, nsp)
			}
			g.pb[i] = pads[i]
		}
	}
	return g, nil
}

func ones(n int) []int64 {
	o := make([]int64, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

func convRule(c *gradCtx) ([]string, error) {
	x, w := c.in(0), c.in(1)
	xs, ws, ys := c.shape(x), c.shape(w), c.shape(c.out(0))
	if len(xs) < 3 || len(ws) != len(xs) || len(ys) != len(xs) {
		return nil, fmt.Errorf("shapes X %v, W %v, Y %v are not a convolution", xs, ws, ys)
	}
	geo, err := readGeom(c, ws, xs[2:], ys[2:], false)
	if err != nil {
		return nil, err
	}
	dy := c.dY[0]
	dx := c.grads()
	// The CPU's Col2Im input gradient runs in the graph's float type only
	// (ONNX Runtime's Col2Im is float32): not for half-precision convs. The
	// im2col weight gradient takes every type: on CUDA the grouped-Conv
	// alternative made a MobileNetV2 step at 512² 4.7× slower in float32,
	// and in float16 (where it was the only form) took 881 of its 936 ms
	// of kernel time (H200).
	same := geo.dtype == c.floatType
	if pads, ok := convGradPads(c, ws, xs, ys, geo); ok && (c.wants(0) || c.wants(1)) {
		return convGradNode(c, dy, x, w, geo, pads), nil
	}
	if c.wants(0) {
		dx[0] = convInputGrad(c.builder, dy, w, ys, ws, xs, geo, !c.c.cfg.DirectConvs && same)
	}
	if c.wants(1) {
		dx[1] = convWeightGrad(c.builder, x, dy, xs, ys, ws, geo, !c.c.cfg.WeightGradConv)
	}
	if c.wants(2) {
		dx[2] = c.reduceSum(dy, spatialAndBatch(len(ys)), false)
	}
	return dx, nil
}

// convGradPads reports whether Config.ConvGrad hands this convolution to
// the ConvGrad operator, and returns the pads it is given: the forward's
// begin pads and, as ends, what the shapes imply (at least 0). Only 2-D
// convolutions of the chosen classes qualify whose output cuDNN's
// symmetric padding reproduces (floor((in + 2·begin − extent)/stride) + 1
// is the output size on each axis); others, such as TensorFlow's SAME
// padding with stride 2 (pads 0 and 1), keep the standard forms.
func convGradPads(c *gradCtx, ws, xs, ys []int64, g convGeom) ([]int64, bool) {
	if len(xs) != 4 || c.c.cfg.ConvGrad&ClassOfConv(ws, g.group) == 0 {
		return nil, false
	}
	pads := make([]int64, 4)
	for i := 0; i < 2; i++ {
		ext := (g.k[i]-1)*g.d[i] + 1
		if g.pb[i] < 0 || (xs[i+2]+2*g.pb[i]-ext)/g.s[i]+1 != ys[i+2] {
			return nil, false
		}
		pads[i] = g.pb[i]
		pads[i+2] = max((ys[i+2]-1)*g.s[i]+ext-xs[i+2]-g.pb[i], 0)
	}
	return pads, true
}

// convGradNode writes a convolution's gradients as one ConvGrad node
// (ConvGradDomain) computing the wanted ones of dX, dW and dB; an output
// not wanted is named "", which the kernel skips.
func convGradNode(c *gradCtx, dy, x, w string, g convGeom, pads []int64) []string {
	dx := c.grads()
	outs := make([]string, 3)
	for i := range outs {
		if c.wants(i) {
			outs[i] = c.fresh("convgrad_d" + []string{"x", "w", "b"}[i])
			dx[i] = outs[i]
		}
	}
	for len(outs) > 0 && outs[len(outs)-1] == "" {
		outs = outs[:len(outs)-1]
	}
	n := c.OpTo(ConvGradOp, []string{dy, x, w}, outs,
		onnx.IntsAttr("kernel_shape", g.k...), onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...),
		onnx.IntsAttr("pads", pads...), onnx.IntAttr("group", g.group))
	n.Domain = proto.String(ConvGradDomain)
	return dx
}

func spatialAndBatch(rank int) []int64 {
	axes := []int64{0}
	for i := 2; i < rank; i++ {
		axes = append(axes, int64(i))
	}
	return axes
}

// convInputGrad returns the gradient of Conv's input: the adjoint
// (transposed) convolution of dy. Stride-1 convolutions use a Conv with the
// kernel flipped and its channel roles swapped, which ONNX Runtime runs
// faster than ConvTranspose (depthwise kernels especially); strided ones use
// ConvTranspose with the end pads chosen so the result has exactly X's shape,
// or, in the CPU form (cpu), Col2Im where that is faster (col2imInputGrad).
func convInputGrad(b *builder, dy, w string, ys, ws, xs []int64, g convGeom, cpu bool) string {
	nsp := len(xs) - 2
	stride1 := true
	pb2, pe2 := make([]int64, nsp), make([]int64, nsp)
	for i := 0; i < nsp; i++ {
		ext := (g.k[i] - 1) * g.d[i]
		// end pad making the output exactly xs: ys + pb2 + pe2 − ext = xs
		pb2[i] = ext - g.pb[i]
		pe2[i] = xs[i+2] + ext - ys[i+2] - pb2[i]
		if g.s[i] != 1 || pb2[i] < 0 || pe2[i] < 0 {
			stride1 = false
		}
	}
	if !stride1 && cpu && g.group == 1 && ws[1] == 1 && nsp == 2 {
		return col2imInputGrad(b, dy, w, ys, ws, xs, g)
	}
	if stride1 {
		wf := flipSwapKernel(b, w, ws, g.group, flipByMatMul && g.dtype == b.floatType)
		return b.op1("Conv", []string{dy, wf},
			onnx.IntsAttr("strides", ones(nsp)...), onnx.IntsAttr("dilations", g.d...), onnx.IntsAttr("pads", slices.Concat(pb2, pe2)...),
			onnx.IntAttr("group", g.group), onnx.IntsAttr("kernel_shape", g.k...))
	}
	// ONNX Runtime's CUDA provider runs ConvTranspose only with symmetric
	// pads (cuDNN's limit; asymmetric ones go to the CPU, with copies both
	// ways every step): use the begin pads on both sides and make up the
	// size with output_padding (< stride) where that reaches X's shape. The
	// output element i is the full transposed convolution's i + pb either
	// way, so the result is the same.
	sym, opadSym, symOK := make([]int64, nsp), make([]int64, nsp), true
	for i := 0; i < nsp; i++ {
		sym[i] = g.pb[i]
		opadSym[i] = g.pb[i] - endPad(g, i, xs[i+2], ys[i+2]) // the end pad pb, made up by output_padding
		if opadSym[i] < 0 || opadSym[i] >= max(g.s[i], g.d[i]) {
			symOK = false
		}
	}
	if symOK {
		attrs := []*onnx.AttributeProto{onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...),
			onnx.IntsAttr("pads", slices.Concat(sym, sym)...), onnx.IntAttr("group", g.group), onnx.IntsAttr("kernel_shape", g.k...)}
		if slices.ContainsFunc(opadSym, func(v int64) bool { return v != 0 }) {
			attrs = append(attrs, onnx.IntsAttr("output_padding", opadSym...))
		}
		return transposedConv(b, g, dy, w, attrs...)
	}
	pe, opad := make([]int64, nsp), make([]int64, nsp)
	needOpad := false
	for i := 0; i < nsp; i++ {
		// ConvTranspose size: s(ys−1) + ext + 1 − pb − pe = xs
		pe[i] = endPad(g, i, xs[i+2], ys[i+2])
		if pe[i] < 0 {
			opad[i], pe[i] = -pe[i], 0
			needOpad = true
		}
	}
	if needOpad {
		return transposedConv(b, g, dy, w,
			onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...), onnx.IntsAttr("pads", slices.Concat(g.pb, pe)...),
			onnx.IntAttr("group", g.group), onnx.IntsAttr("kernel_shape", g.k...), onnx.IntsAttr("output_padding", opad...))
	}
	return transposedConv(b, g, dy, w,
		onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...), onnx.IntsAttr("pads", slices.Concat(g.pb, pe)...),
		onnx.IntAttr("group", g.group), onnx.IntsAttr("kernel_shape", g.k...))
}

// transposedConv is ConvTranspose(dy, w), through float32 for bfloat16
// operands: ONNX Runtime has no bfloat16 ConvTranspose on any provider
// (its CUDA kernel takes float, double and float16).
func transposedConv(b *builder, g convGeom, dy, w string, attrs ...*onnx.AttributeProto) string {
	return b.viaFloat32(g.dtype, "ConvTranspose", []string{dy, w}, nil, attrs...)
}

// col2imInputGrad is the input gradient of a strided 2-D Conv whose input
// has one channel, such as Winograd's input transform (a 4×4 stride-2 Conv
// of every channel as an image of its own): one MatMul gives every image's
// columns, Wᵀ·dY, and one Col2Im sums them into place. ONNX Runtime's
// ConvTranspose does the same image by image, and at two threads splits
// each image's tiny GEMM between them: the 16 such nodes of a MobileNetV2
// DeepLabV3+ step took 42.8 ms at two threads against 15.0 at one. Col2Im
// has no CUDA kernel in ONNX Runtime, hence the CPU form only.
func col2imInputGrad(b *builder, dy, w string, ys, ws, xs []int64, g convGeom) string {
	n, cout := ys[0], ys[1]
	kk, l := numel(ws[2:]), numel(ys[2:])
	// Wᵀ as a batch of one, so that both operands have rank 3: ONNX Runtime
	// folds a Transpose of dy that swaps its first two axes (Winograd's
	// layout change) into the MatMul only then.
	wt := b.reshape(b.transpose(b.reshape(w, []int64{cout, kk}), []int64{1, 0}), []int64{1, kk, cout})
	cols := b.op1("MatMul", []string{wt, b.reshape(dy, []int64{n, cout, l})}) // [N, kh·kw, L]
	// The end pads that give exactly ys windows over X are those of the
	// weight gradient's patch Conv.
	return b.op1("Col2Im", []string{cols, b.ints(xs[2:]...), b.ints(g.k...)},
		onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...), onnx.IntsAttr("pads", slices.Concat(g.pb, patchEndPads(xs, ys, g))...))
}

// flipSwapKernel turns Conv weights [G·Co, Ci, k...] into the weights of the
// adjoint stride-1 convolution: [G·Ci, Co, k...] with the spatial axes flipped.
func flipSwapKernel(b *builder, w string, ws []int64, group int64, byMatMul bool) string {
	co, ci := ws[0]/group, ws[1]
	k := ws[2:]
	nsp := len(k)
	perm := []int64{1, 0}
	for i := 0; i < nsp; i++ {
		perm = append(perm, int64(i+2))
	}
	switch {
	case group == 1:
		w = b.transpose(w, perm)
	case co == 1 && ci == 1: // depthwise: nothing to swap
	default:
		w = b.reshape(w, slices.Concat([]int64{group, co, ci}, k))
		p := []int64{0, 2, 1}
		for i := 0; i < nsp; i++ {
			p = append(p, int64(i+3))
		}
		w = b.transpose(w, p)
		w = b.reshape(w, slices.Concat([]int64{group * ci, co}, k))
	}
	if byMatMul {
		// Flipping every spatial axis reverses the flattened kernel index:
		// a MatMul with the T×T exchange matrix (exact: one product by 1,
		// the rest by 0), which ONNX Runtime runs about 2× faster than a
		// Slice with negative steps.
		t := numel(k)
		if t == 1 {
			return w
		}
		rows := numel([]int64{group * ci, co})
		j := make([]float64, t*t)
		for i := int64(0); i < t; i++ {
			j[i*t+t-1-i] = 1
		}
		wr := b.reshape(w, []int64{rows, t})
		return b.reshape(b.op1("MatMul", []string{wr, b.constFloat(j, []int64{t, t})}), slices.Concat([]int64{group * ci, co}, k))
	}
	var axes, starts, ends, steps []int64
	for i, d := range k {
		if d > 1 {
			axes = append(axes, int64(i+2))
			starts = append(starts, -1)
			ends = append(ends, math.MinInt64)
			steps = append(steps, -1)
		}
	}
	if len(axes) == 0 {
		return w
	}
	return b.op1("Slice", []string{w, b.ints(starts...), b.ints(ends...), b.ints(axes...), b.ints(steps...)})
}

// flipByMatMul selects the MatMul form of the kernel flip in
// flipSwapKernel where the kernel has the graph's float type (the Slice
// form, which needs no constant, is kept for tests and half precision).
var flipByMatMul = true

// convWeightGrad returns the gradient of Conv's weights [G·Co, Ci, k...]
// given input x [N, G·Ci, in...] and output gradient dy [N, G·Co, out...]:
// a correlation of x with dy summed over the batch, written as a Conv whose
// kernel is dy (dilations = forward strides, strides = forward dilations),
// or, where patches is set (the CPU form), im2colConvWeightGrad.
func convWeightGrad(b *builder, x, dy string, xs, ys, ws []int64, g convGeom, patches bool) string {
	nsp := len(xs) - 2
	n := xs[0]
	// End pads that make the correlation exactly k wide; a negative one
	// means the forward never read those trailing rows, so crop them.
	pe := make([]int64, nsp)
	var cropAxes, cropEnds []int64
	pointwise := g.group == 1
	for i := 0; i < nsp; i++ {
		if g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || xs[i+2] != ys[i+2] {
			pointwise = false
		}
	}
	if !pointwise && patches && im2colWeightGrad {
		return im2colConvWeightGrad(b, x, dy, xs, ys, ws, g)
	}
	pointwise = g.group == 1
	for i := 0; i < nsp; i++ {
		pe[i] = endPad(g, i, xs[i+2], ys[i+2])
		if pe[i] < 0 {
			cropAxes = append(cropAxes, int64(i+2))
			cropEnds = append(cropEnds, xs[i+2]+pe[i])
			pe[i] = 0
		}
		if g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || pe[i] != 0 {
			pointwise = false
		}
	}
	if len(cropAxes) > 0 {
		x = b.slice(x, make([]int64, len(cropAxes)), cropEnds, cropAxes)
		xs = slices.Clone(xs)
		for j, a := range cropAxes {
			xs[a] = cropEnds[j]
		}
		pointwise = false
	}
	if pointwise && len(cropAxes) == 0 {
		// 1×1, stride 1, no padding: a batched matrix product.
		p := numel(xs[2:])
		if foldBatch(n, nsp, ys[1], xs[1], 1, p, p) {
			return foldedConvWeightGrad(b, x, dy, xs, ys, ws, g)
		}
		dy2 := b.reshape(dy, []int64{n, ys[1], p})
		x2 := b.transpose(b.reshape(x, []int64{n, xs[1], p}), []int64{0, 2, 1})
		dw := b.op1("MatMul", []string{dy2, x2})
		if n > 1 {
			return b.reshape(b.reduceSum(dw, []int64{0}, false), ws)
		}
		return b.reshape(dw, ws)
	}
	swap := []int64{1, 0}
	for i := 0; i < nsp; i++ {
		swap = append(swap, int64(i+2))
	}
	pads := slices.Concat(g.pb, pe)
	if g.group == 1 {
		xt := b.transpose(x, swap)  // [Ci, N, in...]
		kt := b.transpose(dy, swap) // [Co, N, out...]
		r := b.op1("Conv", []string{xt, kt}, onnx.IntsAttr("strides", g.d...), onnx.IntsAttr("dilations", g.s...),
			onnx.IntsAttr("pads", pads...), onnx.IntsAttr("kernel_shape", ys[2:]...)) // [Ci, Co, k...]
		return b.transpose(r, swap)
	}
	// Grouped: fold the batch into the groups, one Conv group per (n, g).
	ci, co := ws[1], ws[0]/g.group
	ng := n * g.group
	var xt string
	if ci == 1 {
		xt = b.reshape(x, slices.Concat([]int64{1, ng}, xs[2:]))
	} else {
		xt = b.transpose(b.reshape(x, slices.Concat([]int64{ng, ci}, xs[2:])), swap) // [Ci, N·G, in...]
	}
	kt := b.reshape(dy, slices.Concat([]int64{ng * co, 1}, ys[2:]))
	r := b.op1("Conv", []string{xt, kt}, onnx.IntsAttr("strides", g.d...), onnx.IntsAttr("dilations", g.s...),
		onnx.IntsAttr("pads", pads...), onnx.IntsAttr("kernel_shape", ys[2:]...), onnx.IntAttr("group", ng)) // [Ci, N·G·Co, k...]
	if n > 1 {
		r = b.reduceSum(b.reshape(r, slices.Concat([]int64{ci, n, g.group * co}, g.k)), []int64{1}, false)
	}
	if ci == 1 {
		return b.reshape(r, ws)
	}
	return b.transpose(b.reshape(r, slices.Concat([]int64{ci, g.group * co}, g.k)), swap)
}

func convTransposeRule(c *gradCtx) ([]string, error) {
	x, w := c.in(0), c.in(1)
	xs, ws, ys := c.shape(x), c.shape(w), c.shape(c.out(0))
	if len(xs) < 3 || len(ws) != len(xs) || len(ys) != len(xs) {
		return nil, fmt.Errorf("shapes X %v, W %v, Y %v are not a transposed convolution", xs, ws, ys)
	}
	// The adjoint of ConvTranspose is a Conv from Y's space to X's space.
	geo, err := readGeom(c, ws, ys[2:], xs[2:], true)
	if err != nil {
		return nil, err
	}
	nsp := len(xs) - 2
	dy := c.dY[0]
	dx := c.grads()
	if c.wants(0) {
		pe := make([]int64, nsp)
		var cropAxes, cropEnds []int64
		for i := 0; i < nsp; i++ {
			pe[i] = endPad(geo, i, ys[i+2], xs[i+2])
			if pe[i] < 0 {
				cropAxes = append(cropAxes, int64(i+2))
				cropEnds = append(cropEnds, ys[i+2]+pe[i])
				pe[i] = 0
			}
		}
		d := dy
		if len(cropAxes) > 0 {
			d = c.slice(dy, make([]int64, len(cropAxes)), cropEnds, cropAxes)
		}
		dx[0] = c.op1("Conv", []string{d, w}, onnx.IntsAttr("strides", geo.s...), onnx.IntsAttr("dilations", geo.d...),
			onnx.IntsAttr("pads", slices.Concat(geo.pb, pe)...), onnx.IntAttr("group", geo.group), onnx.IntsAttr("kernel_shape", geo.k...))
	}
	if c.wants(1) {
		// Conv weight gradient with the roles of input and output swapped.
		dx[1] = convWeightGrad(c.builder, dy, x, ys, xs, ws, geo, !c.c.cfg.WeightGradConv)
	}
	if c.wants(2) {
		dx[2] = c.reduceSum(dy, spatialAndBatch(len(ys)), false)
	}
	return dx, nil
}

// im2colWeightGrad selects im2colConvWeightGrad for every kernel but the
// stride-1 unpadded 1×1 ones (a plain batched MatMul); the alternative is
// the Transpose + Conv form (grouped: batch folded into the groups), whose
// Conv has a kernel as large as the output and runs as many small, badly
// shaped GEMMs in ONNX Runtime (about 1.7× slower on DeepLabV3+'s 3×3
// decoder convs, 2× on depthwise ones). Tests flip it to check both forms.
var im2colWeightGrad = true

// im2colConvWeightGrad writes a Conv's weight gradient as one batched MatMul
// over explicit patches. The patches come from a Conv of x with a constant
// one-hot kernel E [Ci_total·T, 1, k...] (group = Ci_total, T = taps, the
// forward's strides, dilations and pads): output channel c·T + t copies
// input channel c shifted by tap t, so the result is im2col's matrix,
// cols [N, G, ci·T, P] (P = output pixels), exact (products by 1 and 0)
// and about 2× faster in ONNX Runtime than T strided Slices + Concat. Then
//
//	dW[g] [co, ci·T] = Σ_n dy[n, g] [co, P] · cols[n, g]ᵀ [P, ci·T],
//
// a GEMM the size of the forward convolution's for dense kernels, and a
// batched matrix-vector product for depthwise ones.
// patchEndPads are the end pads of the patch Conv: enough for the last
// tap's reads, never more.
func patchEndPads(xs, ys []int64, g convGeom) []int64 {
	nsp := len(xs) - 2
	pe := make([]int64, nsp)
	for i := 0; i < nsp; i++ {
		pe[i] = max(0, endPad(g, i, xs[i+2], ys[i+2]))
	}
	return pe
}

// endPad is the end pad, along spatial axis i, of a convolution with
// geometry g from in to out elements: how far its last window reaches past
// in, s(out−1) + (k−1)d + 1 − in − pb. Negative when the last elements of
// in are never read; each caller turns that into what its operator takes
// (a crop, an output_padding, or none).
func endPad(g convGeom, i int, in, out int64) int64 {
	return g.s[i]*(out-1) + (g.k[i]-1)*g.d[i] + 1 - in - g.pb[i]
}

// oneHotPatchKernel is the patch Conv's kernel: output channel c·taps+t
// copies input channel c at tap t.
func oneHotPatchKernel(cin, taps int64) []float64 {
	e := make([]float64, cin*taps*taps)
	for c := int64(0); c < cin; c++ {
		for t := int64(0); t < taps; t++ {
			e[(c*taps+t)*taps+t] = 1
		}
	}
	return e
}

func im2colConvWeightGrad(b *builder, x, dy string, xs, ys, ws []int64, g convGeom) string {
	nsp := len(xs) - 2
	n, cin := xs[0], xs[1]
	ci, co := ws[1], ws[0]/g.group
	taps := numel(g.k)
	p := numel(ys[2:])
	if foldBatch(n, nsp, co, ci, taps, numel(xs[2:]), p) {
		return foldedConvWeightGrad(b, x, dy, xs, ys, ws, g)
	}
	if splitPatches(xs, ys, ws, g) {
		return splitConvWeightGrad(b, x, dy, xs, ys, ws, g)
	}
	// End pads: enough for the last tap's reads, never more than needed,
	// so the patch Conv's output is exactly ys (rows the forward never
	// read are left out by the Conv's own rounding).
	pe := patchEndPads(xs, ys, g)
	e := oneHotPatchKernel(cin, taps)
	cols := x
	if taps > 1 || !slices.Equal(ys[2:], xs[2:]) {
		cols = b.op1("Conv", []string{x, b.constOf(g.dtype, e, slices.Concat([]int64{cin * taps, 1}, g.k))},
			onnx.IntsAttr("strides", g.s...), onnx.IntsAttr("dilations", g.d...), onnx.IntsAttr("pads", slices.Concat(g.pb, pe)...),
			onnx.IntAttr("group", cin), onnx.IntsAttr("kernel_shape", g.k...)) // [N, Ci·T, out...]
	}
	var dw string
	switch {
	case g.group == 1:
		colsT := b.transpose(b.reshape(cols, []int64{n, ci * taps, p}), []int64{0, 2, 1})
		dw = b.op1("MatMul", []string{b.reshape(dy, []int64{n, co, p}), colsT}) // [N, Co, Ci·T]
	case co == 1:
		c4 := b.reshape(cols, []int64{n, g.group, ci * taps, p})
		dw = b.op1("MatMul", []string{c4, b.reshape(dy, []int64{n, g.group, p, 1})}) // [N, G, ci·T, 1]
	default:
		colsT := b.transpose(b.reshape(cols, []int64{n, g.group, ci * taps, p}), []int64{0, 1, 3, 2})
		dw = b.op1("MatMul", []string{b.reshape(dy, []int64{n, g.group, co, p}), colsT}) // [N, G, co, ci·T]
	}
	if n > 1 {
		dw = b.reduceSum(dw, []int64{0}, false)
	}
	return b.reshape(dw, ws)
}
