package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// Winograd F(2,3) for the large 3×3 convolutions.
//
// A 3×3, stride-1, pad-1 convolution computes each 2×2 block of outputs
// from a 4×4 input tile d as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A (Lavin & Gray 2016):
// 16 products per channel pair instead of 36. winogradConvs rewrites such
// Convs of the forward graph into standard operators, in the form
// bench/convprobe times:
//
//	V = Bᵀ d B of every stride-2 tile      a 4×4 stride-2 Conv of each channel   [16, C, N·T]
//	U = G g Gᵀ of every kernel             a Gemm with the 9×16 matrix G⊗G       [16, K, C]
//	M = U · V                              one batched MatMul, 16 GEMMs          [16, K, N·T]
//	Y = Aᵀ M A                             a grouped stride-2 ConvTranspose with the
//	                                       2×2 kernels of A⊗A, which also places the
//	                                       2×2 output blocks (and adds the bias)
//
// with V, M and Y computed one example at a time (a Split over the batch,
// a Concat of the outputs; N = 1 in the shapes above) and U once. The backward pass is derived from these operators by the
// ordinary rules: both gradient GEMMs (dU = dM·Vᵀ, dV = Uᵀ·dM) have the
// forward's 16/36 of the direct convolution's multiplications, the
// transforms are linear (their gradients are the transposed transforms: a
// stride-2 ConvTranspose for x, a stride-2 grouped Conv for M). The result
// is the same convolution up to float rounding (max |diff| ~1e-6 of max
// |y| on DeepLabV3+'s decoder).
//
// Measured in ORT, forward + both gradients of the decoder conv
// [8,304,32,32]→256, best of 5–7: one thread 377 → 229 ms, two threads
// (wall) 211 → 168 ms. With the output transform as a MatMul and a
// Transpose instead of the ConvTranspose, smaller convs lost or gained
// little at two threads (ORT's Transposes run on one thread): 128→128 at
// 16×16 20% faster at one thread but 27% slower at two; 512→512 at 8×8 and
// 64→64 at 32×32 slower at one. Hence the size rule in winogradPays.

type winoMode int

const (
	winoAuto   winoMode = iota // by winogradPays
	winoAlways                 // every eligible Conv (tests)
	winoNever                  // none
)

var winogradMode = winoAuto

// winogradPays: DeepLabV3+'s decoder convs (256+ channels in and out, 32×32
// maps and larger) gain at one and two threads; see above.
func winogradPays(c, k, h, w int64) bool {
	return c >= 256 && k >= 256 && h*w >= 32*32
}

// winogradConvs rewrites the eligible Convs of the forward graph (3×3,
// stride 1, dilation 1, pads 1, one group, even output height and width,
// float input) into the Winograd form, keeping their output names.
func (c *compiler) winogradConvs() {
	if winogradMode == winoNever || c.cfg.DirectConvs && winogradMode != winoAlways {
		return
	}
	b := newBuilder("wino/", c.floatType, func(s string) bool { return c.names[s] })
	var out []*onnxpb.NodeProto
	rewrote := false
	for _, n := range c.g.Node {
		if c.winogradEligible(n) {
			c.winogradConv(b, n)
			out = append(out, b.nodes...)
			b.nodes = nil
			rewrote = true
			continue
		}
		out = append(out, n)
	}
	if !rewrote {
		return
	}
	c.g.Node = out
	for _, t := range b.inits {
		c.g.Initializer = append(c.g.Initializer, t)
		c.inits[t.GetName()] = t
		c.madeConst[t.GetName()] = true
		c.names[t.GetName()] = true
		c.info[t.GetName()] = &tensorInfo{shape: slices.Clone(t.GetDims()), dtype: t.GetDataType()}
	}
}

func (c *compiler) winogradEligible(n *onnxpb.NodeProto) bool {
	if n.GetOpType() != "Conv" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") || len(n.Input) < 2 || len(n.Output) != 1 {
		return false
	}
	xi, wi, yi := c.info[n.Input[0]], c.info[n.Input[1]], c.info[n.Output[0]]
	if xi == nil || wi == nil || yi == nil || xi.dtype != c.floatType || len(xi.shape) != 4 || len(wi.shape) != 4 || len(yi.shape) != 4 {
		return false
	}
	if attrInt(n, "group", 1) != 1 || attrString(n, "auto_pad", "NOTSET") != "NOTSET" {
		return false
	}
	is := func(v []int64, want ...int64) bool { return v == nil && want[0] == 1 || slices.Equal(v, want) }
	if !is(attrInts(n, "strides"), 1, 1) || !is(attrInts(n, "dilations"), 1, 1) ||
		!slices.Equal(attrInts(n, "pads"), []int64{1, 1, 1, 1}) || !slices.Equal(wi.shape[2:], []int64{3, 3}) {
		return false
	}
	if ks := attrInts(n, "kernel_shape"); ks != nil && !slices.Equal(ks, []int64{3, 3}) {
		return false
	}
	h, w := yi.shape[2], yi.shape[3]
	if h%2 != 0 || w%2 != 0 || h < 2 || w < 2 || !slices.Equal(xi.shape[2:], yi.shape[2:]) {
		return false
	}
	if len(n.Input) > 2 && n.Input[2] != "" {
		if bi := c.info[n.Input[2]]; bi == nil || !slices.Equal(bi.shape, wi.shape[:1]) {
			return false
		}
	}
	return winogradMode == winoAlways || winogradPays(xi.shape[1], wi.shape[0], h, w)
}

// winogradConv emits n's Winograd form into b (see above).
func (c *compiler) winogradConv(b *builder, n *onnxpb.NodeProto) {
	xs, ws := c.info[n.Input[0]].shape, c.info[n.Input[1]].shape
	nb, ch, k := xs[0], xs[1], ws[0]
	h, w := xs[2], xs[3]
	th, tw := h/2, w/2
	t := th * tw
	op := func(opType string, inputs []string, shape []int64, attrs ...*onnxpb.AttributeProto) string {
		o := b.op1(opType, inputs, attrs...)
		c.names[o] = true
		c.info[o] = &tensorInfo{shape: shape, dtype: c.floatType}
		return o
	}
	reshape := func(x string, shape ...int64) string { return op("Reshape", []string{x, b.ints(shape...)}, shape) }
	bt := [4][4]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	gm := [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
	at := [2][4]float64{{1, 1, 1, 0}, {0, 1, -1, -1}}
	var bk, ak []float64
	for a := range 4 { // Bk[4a+b, 0, r, s] = Bᵀ[a,r]·Bᵀ[b,s]
		for bb := range 4 {
			for r := range 4 {
				for s := range 4 {
					bk = append(bk, bt[a][r]*bt[bb][s])
				}
			}
		}
	}
	gk := make([]float64, 9*16) // Gk[3i+j, 4a+b] = G[a,i]·G[b,j]
	for i := range 3 {
		for j := range 3 {
			for a := range 4 {
				for bb := range 4 {
					gk[(3*i+j)*16+4*a+bb] = gm[a][i] * gm[bb][j]
				}
			}
		}
	}
	for p := range 2 { // Ak[2p+q, 4a+b] = Aᵀ[p,a]·Aᵀ[q,b]
		for q := range 2 {
			for a := range 4 {
				for bb := range 4 {
					ak = append(ak, at[p][a]*at[q][bb])
				}
			}
		}
	}
	// U = Gkᵀ·Wᵀ, [16, K·C], in one Gemm whose flags do both transposes:
	// no Transpose node here, and none in the backward pass, whose Uᵀ per
	// slice ONNX Runtime then folds into its MatMuls (a Transpose of U took
	// 5–8 ms a step at two threads on the decoder convs).
	u0 := op("Gemm", []string{b.constFloat(gk, []int64{9, 16}), reshape(n.Input[1], k*ch, 9)}, []int64{16, k * ch},
		onnx.IntAttr("transA", 1), onnx.IntAttr("transB", 1))
	u := reshape(u0, 16, k, ch)
	// Y = Aᵀ M A as a grouped stride-2 ConvTranspose with 2×2 kernels
	// Awk[(k,ξ), 0, p, q] = Ak[2p+q, ξ] over M laid out [N, K·16, Th, Tw]:
	// it also puts each tile's 2×2 outputs in place. (A MatMul with Ak and a
	// Transpose interleaving the outputs took 21 ms more per conv, forward
	// and backward, at one thread: ORT's Transpose copies element by element
	// when the innermost axis moves, and runs on one thread.)
	awk := make([]float64, k*16*4)
	for kk := int64(0); kk < k; kk++ {
		for xi := int64(0); xi < 16; xi++ {
			for pq := int64(0); pq < 4; pq++ {
				awk[(kk*16+xi)*4+pq] = ak[pq*16+xi]
			}
		}
	}
	// The transforms' kernels, one initializer each for all the chunks.
	bkName, awkName := b.constFloat(bk, []int64{16, 1, 4, 4}), b.constFloat(awk, []int64{k * 16, 1, 2, 2})
	// One chunk an example: every chunk's transforms (V, 4× its input,
	// kept for the weight gradient; M and its layout change, 4× its output)
	// are 1/N of the whole batch's. ResNet-18 DeepLabV3+, batch 8, 128×128,
	// peak RSS: 652 MiB in one piece, 588 in 2 chunks, 560 in 4, 551–570 in
	// 8 (direct convs 488–525, PyTorch 534–587), with no time difference
	// measurable under the load of the machine it was measured on.
	xc, yc := []string{n.Input[0]}, []string{n.Output[0]}
	if nb > 1 {
		xc, yc = nil, nil
		for range nb {
			x, y := b.fresh("wino_x"), b.fresh("wino_y")
			c.names[x], c.names[y] = true, true
			c.info[x] = &tensorInfo{shape: []int64{1, ch, h, w}, dtype: c.floatType}
			c.info[y] = &tensorInfo{shape: []int64{1, k, h, w}, dtype: c.floatType}
			xc, yc = append(xc, x), append(yc, y)
		}
		b.opTo("Split", []string{n.Input[0], b.ints(ones(int(nb))...)}, xc, onnx.IntAttr("axis", 0))
	}
	for i := range xc {
		xr := reshape(xc[i], ch, 1, h, w)
		v0 := op("Conv", []string{xr, bkName}, []int64{ch, 16, th, tw},
			onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", 4, 4))
		// The layout changes are 3-D Transposes that swap the first two
		// axes, the form ONNX Runtime folds into its MatMuls (FusedMatMul's
		// transBatch flags): V's here, and dM's and Vᵀ's in the backward
		// pass.
		v := op("Transpose", []string{reshape(v0, ch, 16, t)}, []int64{16, ch, t}, onnx.IntsAttr("perm", 1, 0, 2))
		m := op("MatMul", []string{u, v}, []int64{16, k, t})
		m5 := op("Transpose", []string{m}, []int64{k, 16, t}, onnx.IntsAttr("perm", 1, 0, 2))
		ins := []string{reshape(m5, 1, k*16, th, tw), awkName}
		if len(n.Input) > 2 && n.Input[2] != "" {
			ins = append(ins, n.Input[2])
		}
		b.opTo("ConvTranspose", ins, []string{yc[i]},
			onnx.IntsAttr("strides", 2, 2), onnx.IntAttr("group", k), onnx.IntsAttr("kernel_shape", 2, 2))
	}
	if nb > 1 {
		b.opTo("Concat", yc, []string{n.Output[0]}, onnx.IntAttr("axis", 0))
	}
}
