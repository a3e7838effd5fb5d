package grad

import "github.com/segtune/segtune/onnx"

// Split patches for the weight gradient of dense stride-1 2-D convolutions.
//
// im2colConvWeightGrad materialises kh·kw shifted copies of x (the
// patches, kh·kw times x's size: 85 MiB for DeepLabV3+'s first decoder conv
// at batch 8, 128×128) and multiplies them with dy. Splitting the shift
// between the operands needs only kw copies of x shifted along W and kh
// copies of dy shifted along H:
//
//	C[ci·kw+tw][r, w] = x[ci][r − pbh, w + tw·dw − pbw]   r ∈ [0, R), R = Ho + (kh−1)·dh
//	D[co·kh+th][r, w] = dy[co][r − th·dh, w]              (zero outside dy)
//	dW[co, ci, th, tw] = Σ_{r,w} D[co·kh+th][r, w] · C[ci·kw+tw][r, w]
//
// since D is dy moved down by th·dh rows, so D·C pairs dy[ph, w] with
// x[ph + th·dh − pbh, w + tw·dw − pbw], the forward's tap (th, tw). Both
// copies are one-hot Convs (1×kw and kh×1 kernels), and the product is one
// GEMM per image, D [Co·kh, R·Wo] · Cᵀ [R·Wo, Ci·kw], with the same
// multiplications as im2col's plus the (kh−1)·dh extra rows of zeros in D.
// On the decoder conv [8,304,32,32]→256 (3×3, pad 1) the whole weight
// gradient ran 140–143 → 130–132 ms (ORT, one thread), with 62 instead of
// 85 MiB of copies.

type splitMode int

const (
	splitAuto   splitMode = iota // by the estimate in splitPatches
	splitAlways                  // whenever the geometry allows (tests)
	splitNever                   // never (tests)
)

var splitWeightGrad = splitAuto

// splitPatches reports whether the split form applies and pays: a dense
// (group 1) 2-D stride-1 kernel, at least 2×2, and in auto mode output
// maps tall enough that D's zero rows cost at most 1/16 more
// multiplications (Ho ≥ 16·(kh−1)·dh) with fewer copied elements than the
// patches.
func splitPatches(xs, ys, ws []int64, g convGeom) bool {
	if len(xs) != 4 || g.group != 1 || g.s[0] != 1 || g.s[1] != 1 || g.k[0] < 2 || g.k[1] < 2 || splitWeightGrad == splitNever {
		return false
	}
	if pe, _ := splitEndPads(xs, ys, g); pe[0] < 0 || pe[1] < 0 {
		return false
	}
	if splitWeightGrad == splitAlways {
		return true
	}
	ci, co := ws[1], ws[0]
	kh, kw := g.k[0], g.k[1]
	ho, wo := ys[2], ys[3]
	r := ho + (kh-1)*g.d[0]
	return ho >= 16*(kh-1)*g.d[0] && (ci*kw+co*kh)*r*wo < ci*kh*kw*ho*wo
}

// splitConvWeightGrad is the split form (see above) of a Conv weight
// gradient; the caller checked splitPatches.
func splitConvWeightGrad(b *builder, x, dy string, xs, ys, ws []int64, g convGeom) string {
	n, ci, co := xs[0], ws[1], ws[0]
	kh, kw := g.k[0], g.k[1]
	dh, dw := g.d[0], g.d[1]
	ho, wo := ys[2], ys[3]
	r := ho + (kh-1)*dh
	// x's W-shifts: rows [−pbh, R − pbh) of x, columns as the forward reads them.
	pe, _ := splitEndPads(xs, ys, g)
	eW := make([]float64, ci*kw*kw)
	for c := int64(0); c < ci; c++ {
		for t := int64(0); t < kw; t++ {
			eW[(c*kw+t)*kw+t] = 1
		}
	}
	c := b.op1("Conv", []string{x, b.constOf(g.dtype, eW, []int64{ci * kw, 1, 1, kw})},
		onnx.IntsAttr("dilations", 1, dw), onnx.IntsAttr("pads", g.pb[0], g.pb[1], pe[0], pe[1]),
		onnx.IntAttr("group", ci), onnx.IntsAttr("kernel_shape", 1, kw)) // [N, Ci·kw, R, Wo]
	// dy's H-shifts: tap kh−1−th of a kh×1 kernel over dy padded by
	// (kh−1)·dh rows on both sides reads dy[r − th·dh].
	eH := make([]float64, co*kh*kh)
	for c := int64(0); c < co; c++ {
		for th := int64(0); th < kh; th++ {
			eH[(c*kh+th)*kh+(kh-1-th)] = 1
		}
	}
	d := b.op1("Conv", []string{dy, b.constOf(g.dtype, eH, []int64{co * kh, 1, kh, 1})},
		onnx.IntsAttr("dilations", dh, 1), onnx.IntsAttr("pads", (kh-1)*dh, 0, (kh-1)*dh, 0),
		onnx.IntAttr("group", co), onnx.IntsAttr("kernel_shape", kh, 1)) // [N, Co·kh, R, Wo]
	k := r * wo
	ct := b.transpose(b.reshape(c, []int64{n, ci * kw, k}), []int64{0, 2, 1})
	dwt := b.op1("MatMul", []string{b.reshape(d, []int64{n, co * kh, k}), ct}) // [N, Co·kh, Ci·kw]
	if n > 1 {
		dwt = b.reduceSum(dwt, []int64{0}, false)
	}
	dwt = b.reshape(dwt, []int64{co, kh, ci, kw})
	return b.transpose(dwt, []int64{0, 2, 1, 3})
}

// splitEndPads returns the forward's end pads of a stride-1 2-D Conv (what
// the shapes imply) and R = Ho + (kh−1)·dh, the rows of the split copies.
func splitEndPads(xs, ys []int64, g convGeom) ([2]int64, int64) {
	var pe [2]int64
	for i := 0; i < 2; i++ {
		pe[i] = ys[i+2] + (g.k[i]-1)*g.d[i] - xs[i+2] - g.pb[i]
	}
	return pe, ys[2] + (g.k[0]-1)*g.d[0]
}
