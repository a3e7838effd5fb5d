package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
)

// Batch folding of Conv weight gradients.
//
// The batched form computes one product per image, dW_n [Co, Ci·T] =
// dy_n [Co, P] · cols_nᵀ, and then sums the N products (ReduceSum over the
// batch): it writes and reads N weight-sized tensors, and each product's
// inner dimension is only P, the output pixels of one image. On small
// feature maps (DeepLabV3+'s 8×8 stride-16 stage: P = 64, Co·Ci·T up to
// 256·2880) that is many times the data of the activations themselves.
// The folded form contracts over the batch inside one product instead:
// dy and the patches are laid out [C, N·P] (dy and x transposed to channels
// first; the patches made by a Conv one dimension higher, the batch as an
// extra spatial axis with a kernel of extent 1 along it), so
// dW [Co, Ci·T] = dyᵀ [Co, N·P] · colsᵀ, one GEMM with inner dimension N·P
// and no ReduceSum. It costs two transposes of activations, so it is
// chosen only where they are smaller than the batched products.

type foldMode int

const (
	foldAuto   foldMode = iota // by the size estimate in foldBatch
	foldAlways                 // whenever possible (tests)
	foldNever                  // never (tests)
)

var foldWeightGrad = foldAuto

// foldBatch reports whether a weight gradient with per-group kernel
// co × ci·taps over pin input and p output pixels per image, batch n and
// nsp spatial axes, should be folded. r compares the batched products
// (n·co·ci·taps per group, written then reduced) with the transposed copies
// of x and dy that folding adds (n·(ci·pin + co·p) per group). Measured in
// ONNX Runtime (MobileNetV2 DeepLabV3+ shapes, batch 8): the 32×32 decoder
// convs (r = 1.2) ran no faster folded at one thread and slower at two,
// where ONNX Runtime's single-threaded Transpose weighs more, hence r > 2;
// but products with an inner dimension of 64 or less (8×8 maps) run well
// below MLAS's GEMM rate, and folding won already at r = 0.86 (1×1
// convs: 1.3–1.6× at one thread; the 3×3 ASPP conv, r = 20: 1.5× at one
// thread, 2.7× at two), hence r > 0.5 there. ONNX Runtime's CPU Conv takes
// up to three spatial axes, so nsp ≤ 2.
func foldBatch(n int64, nsp int, co, ci, taps, pin, p int64) bool {
	if n == 1 || nsp > 2 {
		return false
	}
	switch foldWeightGrad {
	case foldAlways:
		return true
	case foldNever:
		return false
	}
	prod, copies := co*ci*taps, ci*pin+co*p
	return prod > 2*copies || p <= 64 && 2*prod > copies
}

// foldedConvWeightGrad is the folded form of a Conv weight gradient (any
// group count); the geometry is the forward convolution's.
func foldedConvWeightGrad(b *builder, x, dy string, xs, ys, ws []int64, g convGeom) string {
	nsp := len(xs) - 2
	n, cin := xs[0], xs[1]
	ci, co := ws[1], ws[0]/g.group
	taps := numel(g.k)
	p := numel(ys[2:])
	perm := []int64{1, 0}
	for i := 0; i < nsp; i++ {
		perm = append(perm, int64(i+2))
	}
	xt := b.transpose(x, perm) // [Cin, N, in...]
	plain := taps == 1 && slices.Equal(ys[2:], xs[2:])
	for i := 0; i < nsp; i++ {
		plain = plain && g.s[i] == 1 && g.pb[i] == 0
	}
	var cols string
	if plain {
		cols = b.reshape(xt, []int64{cin, n * p})
	} else {
		// The one-hot patch Conv of im2colConvWeightGrad over
		// [1, Cin, N, in...], with a kernel of extent 1 along the batch.
		pe := patchEndPads(xs, ys, g)
		e := oneHotPatchKernel(cin, taps)
		x1 := b.reshape(xt, slices.Concat([]int64{1, cin, n}, xs[2:]))
		kernel := b.constOf(g.dtype, e, slices.Concat([]int64{cin * taps, 1, 1}, g.k))
		c := b.op1("Conv", []string{x1, kernel},
			onnx.IntsAttr("strides", slices.Concat([]int64{1}, g.s)...), onnx.IntsAttr("dilations", slices.Concat([]int64{1}, g.d)...),
			onnx.IntsAttr("pads", slices.Concat([]int64{0}, g.pb, []int64{0}, pe)...),
			onnx.IntAttr("group", cin), onnx.IntsAttr("kernel_shape", slices.Concat([]int64{1}, g.k)...)) // [1, Cin·T, N, out...]
		cols = b.reshape(c, []int64{cin * taps, n * p})
	}
	dyt := b.transpose(dy, perm) // [G·Co, N, out...]
	var dw string
	if g.group == 1 {
		dw = b.op1("MatMul", []string{b.reshape(dyt, []int64{co, n * p}), b.transpose(cols, []int64{1, 0})}) // [Co, Ci·T]
	} else {
		colsT := b.transpose(b.reshape(cols, []int64{g.group, ci * taps, n * p}), []int64{0, 2, 1})
		dw = b.op1("MatMul", []string{b.reshape(dyt, []int64{g.group, co, n * p}), colsT}) // [G, Co, Ci·T]
	}
	return b.reshape(dw, ws)
}
