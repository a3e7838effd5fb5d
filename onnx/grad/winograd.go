package grad

import (
	"slices"

	"github.com/segtune/segtune/onnx"
)

// Winograd F(4,3) and F(2,3) for the large 3×3 convolutions.
//
// A 3×3, stride-1, pad-1 convolution computes each m×m block of outputs
// from an α×α input tile d (α = m+2) as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A (Lavin &
// Gray 2016): α² products per channel pair and block instead of 9m², so
// 36/144 of the direct convolution's multiplications with F(4,3) and 16/36
// with F(2,3), which serves outputs that 4×4 blocks do not tile.
// winogradConvs rewrites such Convs of the forward graph into standard
// operators, a chunk of E examples at a time (T tiles an example; see
// winogradChunk for E):
//
//	V = Bᵀ d B of every stride-m tile      an α×α stride-m Conv of each channel  [α², C, E·T]
//	U = G g Gᵀ of every kernel             a Gemm with the 9×α² matrix G⊗G      [α², K, C]
//	M = U · V                              one batched MatMul, α² GEMMs          [α², K, E·T]
//	Y = Aᵀ M A                             a grouped stride-m ConvTranspose with the
//	                                       m×m kernels of A⊗A, which also places the
//	                                       m×m output blocks (and adds the bias)
//
// with U computed once for all the chunks.
// The backward pass is derived from these operators by the ordinary rules:
// both gradient GEMMs (dU = dM·Vᵀ, dV = Uᵀ·dM) have the forward's share of
// the multiplications, the transforms are linear (their gradients are the
// transposed transforms: Col2Im or a stride-m ConvTranspose for x, a
// stride-m grouped Conv for M). The result is the same convolution up to
// float rounding: F(4,3)'s larger transform coefficients round more, yet
// the decoder's weight gradients of whole DeepLabV3+ models stay within
// 5e-6 (relative) of PyTorch's float64 ones, against 1e-6 for the direct
// convolution (TestWholeModelsAgainstPyTorchWinograd).
//
// F(2,3) against the direct Conv, in ORT, forward + both gradients of the
// decoder conv [8,304,32,32]→256, best of 5–7: one thread 377 → 229 ms,
// two threads (wall) 211 → 168 ms. With the output transform as a MatMul
// and a Transpose instead of the ConvTranspose, smaller convs lost or
// gained little at two threads (ORT's Transposes run on one thread):
// 128→128 at 16×16 20% faster at one thread but 27% slower at two;
// 512→512 at 8×8 and 64→64 at 32×32 slower at one. Hence the size rule in
// winogradPays. F(4,3) in chunks of four examples against F(2,3) one
// example at a time, whole training step, DeepLabV3+ batch 8 at 128×128:
// see bench/trainstep/README.md (2026-11-25, night).

type winoMode int

const (
	winoAuto   winoMode = iota // by winogradPays
	winoAlways                 // every eligible Conv (tests)
	winoNever                  // none
)

var winogradMode = winoAuto

// winogradPays: DeepLabV3+'s decoder convs (256+ channels in and out, 32×32
// maps and larger) gain at one and two threads; see above. The rule was
// fitted with F(2,3); whether F(4,3) pays on smaller convs is not measured.
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
	var out []*onnx.NodeProto
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

func (c *compiler) winogradEligible(n *onnx.NodeProto) bool {
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

// winoTile is one Winograd algorithm F(m,3): each m×m block of outputs
// from an α×α input tile, α = m+2, through Bᵀ (α×α), G (α×3) and Aᵀ (m×α).
type winoTile struct {
	m     int64
	bt, g [][]float64
	at    [][]float64
}

func (t winoTile) alpha() int64 { return t.m + 2 }

// F(2,3): 16 products per 2×2 block (Lavin & Gray 2016).
var winoF2 = winoTile{
	m:  2,
	bt: [][]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
	g:  [][]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
	at: [][]float64{{1, 1, 1, 0}, {0, 1, -1, -1}},
}

// F(4,3): 36 products per 4×4 block, 0.5625× F(2,3)'s, with the
// interpolation points 0, ±1, ±2, ∞ (Lavin & Gray 2016).
var winoF4 = winoTile{
	m: 4,
	bt: [][]float64{
		{4, 0, -5, 0, 1, 0},
		{0, -4, -4, 1, 1, 0},
		{0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0},
		{0, 4, 0, -5, 0, 1},
	},
	g: [][]float64{
		{1.0 / 4, 0, 0},
		{-1.0 / 6, -1.0 / 6, -1.0 / 6},
		{-1.0 / 6, 1.0 / 6, -1.0 / 6},
		{1.0 / 24, 1.0 / 12, 1.0 / 6},
		{1.0 / 24, -1.0 / 12, 1.0 / 6},
		{0, 0, 1},
	},
	at: [][]float64{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 0},
		{0, 1, -1, 8, -8, 1},
	},
}

// winoTileFor picks F(4,3) where its blocks tile the output and F(2,3)
// otherwise (winogradEligible has checked that the output is even).
func winoTileFor(h, w int64) winoTile {
	if h%4 == 0 && w%4 == 0 {
		return winoF4
	}
	return winoF2
}

// kernels returns the transforms as convolution kernels, each the
// Kronecker product of a matrix with itself: Bk = Bᵀ⊗Bᵀ ([α², 1, α, α]:
// Bk[αa+b, 0, r, s] = Bᵀ[a,r]·Bᵀ[b,s]), Gk = Gᵀ⊗Gᵀ ([9, α²]: Gk[3i+j, αa+b]
// = G[a,i]·G[b,j]) and Ak = Aᵀ⊗Aᵀ ([m², α²]).
func (t winoTile) kernels() (bk, gk, ak []float64) {
	gt := make([][]float64, 3)
	for i := range gt {
		for _, row := range t.g {
			gt[i] = append(gt[i], row[i])
		}
	}
	return kronSelf(t.bt), kronSelf(gt), kronSelf(t.at)
}

// kronSelf returns x⊗x row-major: element (r·i+i′, c·j+j′) is x[i][j]·x[i′][j′]
// for x with r rows of c.
func kronSelf(x [][]float64) []float64 {
	var out []float64
	for _, a := range x {
		for _, b := range x {
			for _, v := range a {
				for _, w := range b {
					out = append(out, v*w)
				}
			}
		}
	}
	return out
}

// winogradConv emits n's Winograd form into b (see above).
func (c *compiler) winogradConv(b *builder, n *onnx.NodeProto) {
	xs, ws := c.info[n.Input[0]].shape, c.info[n.Input[1]].shape
	nb, ch, k := xs[0], xs[1], ws[0]
	h, w := xs[2], xs[3]
	tile := winoTileFor(h, w)
	m, al := tile.m, tile.alpha()
	a2 := al * al
	th, tw := h/m, w/m
	t := th * tw
	op := func(opType string, inputs []string, shape []int64, attrs ...*onnx.AttributeProto) string {
		o := b.op1(opType, inputs, attrs...)
		c.names[o] = true
		c.info[o] = &tensorInfo{shape: shape, dtype: c.floatType}
		return o
	}
	reshape := func(x string, shape ...int64) string { return op("Reshape", []string{x, b.ints(shape...)}, shape) }
	bk, gk, ak := tile.kernels()
	// U = Gkᵀ·Wᵀ, [α², K·C], in one Gemm whose flags do both transposes:
	// no Transpose node here, and none in the backward pass, whose Uᵀ per
	// slice ONNX Runtime then folds into its MatMuls (a Transpose of U took
	// 5–8 ms a step at two threads on the decoder convs).
	u0 := op("Gemm", []string{b.constFloat(gk, []int64{9, a2}), reshape(n.Input[1], k*ch, 9)}, []int64{a2, k * ch},
		onnx.IntAttr("transA", 1), onnx.IntAttr("transB", 1))
	u := reshape(u0, a2, k, ch)
	// Y = Aᵀ M A as a grouped stride-m ConvTranspose with m×m kernels
	// Awk[(k,ξ), 0, p, q] = Ak[mp+q, ξ] over M laid out [N, K·α², Th, Tw]:
	// it also puts each tile's m×m outputs in place. (A MatMul with Ak and a
	// Transpose interleaving the outputs took 21 ms more per conv, forward
	// and backward, at one thread: ORT's Transpose copies element by element
	// when the innermost axis moves, and runs on one thread.)
	m2 := m * m
	awk := make([]float64, k*a2*m2)
	for kk := int64(0); kk < k; kk++ {
		for xi := int64(0); xi < a2; xi++ {
			for pq := int64(0); pq < m2; pq++ {
				awk[(kk*a2+xi)*m2+pq] = ak[pq*a2+xi]
			}
		}
	}
	// The transforms' kernels, one initializer each for all the chunks.
	bkName, awkName := b.constFloat(bk, []int64{a2, 1, al, al}), b.constFloat(awk, []int64{k * a2, 1, m, m})
	// The batch in chunks of E examples (winogradChunk): in a chunk, the
	// input transform of every channel of every example, V's tiles of its
	// examples side by side ([α², C, E·T], so that one product takes them
	// all), and the output transform of the chunk.
	per := winogradChunk(nb, k, t)
	xc, yc := []string{n.Input[0]}, []string{n.Output[0]}
	if per < nb {
		var sizes []int64
		xc, yc = nil, nil
		for first := int64(0); first < nb; first += per {
			ne := min(per, nb-first)
			sizes = append(sizes, ne)
			x, y := b.fresh("wino_x"), b.fresh("wino_y")
			c.names[x], c.names[y] = true, true
			c.info[x] = &tensorInfo{shape: []int64{ne, ch, h, w}, dtype: c.floatType}
			c.info[y] = &tensorInfo{shape: []int64{ne, k, h, w}, dtype: c.floatType}
			xc, yc = append(xc, x), append(yc, y)
		}
		b.opTo("Split", []string{n.Input[0], b.ints(sizes...)}, xc, onnx.IntAttr("axis", 0))
	}
	for i, x := range xc {
		ne := c.info[x].shape[0]
		xr := reshape(x, ne*ch, 1, h, w)
		v0 := op("Conv", []string{xr, bkName}, []int64{ne * ch, a2, th, tw},
			onnx.IntsAttr("strides", m, m), onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", al, al))
		vn := op("Transpose", []string{reshape(v0, ne, ch, a2, t)}, []int64{ch, a2, ne, t}, onnx.IntsAttr("perm", 1, 2, 0, 3))
		// A 3-D Transpose swapping the first two axes is the form ONNX
		// Runtime folds into its MatMuls (FusedMatMul's transBatch flags):
		// V's here, and dV's and Vᵀ's in the backward pass.
		v := op("Transpose", []string{reshape(vn, ch, a2, ne*t)}, []int64{a2, ch, ne * t}, onnx.IntsAttr("perm", 1, 0, 2))
		mm := op("MatMul", []string{u, v}, []int64{a2, k, ne * t})
		mt := op("Transpose", []string{reshape(mm, a2, k, ne, t)}, []int64{ne, k, a2, t}, onnx.IntsAttr("perm", 2, 1, 0, 3))
		ins := []string{reshape(mt, ne, k*a2, th, tw), awkName}
		if len(n.Input) > 2 && n.Input[2] != "" {
			ins = append(ins, n.Input[2])
		}
		b.opTo("ConvTranspose", ins, []string{yc[i]},
			onnx.IntsAttr("strides", m, m), onnx.IntAttr("group", k), onnx.IntsAttr("kernel_shape", m, m))
	}
	if len(yc) > 1 {
		b.opTo("Concat", yc, []string{n.Output[0]}, onnx.IntAttr("axis", 0))
	}
}

// winogradChunk returns E, how many examples a chunk of the Winograd form
// takes: about K/T, so that a chunk's V ([α², C, E·T]) is about the size of
// U ([α², K, C]) and its product about square. Larger chunks keep larger
// transients (V, M and their gradients and layout changes, at the top of
// the backward pass where every saved activation is alive); smaller ones
// more kernel gradients, one a chunk, alive until they are summed (ORT
// computes them all first). ResNet-18 DeepLabV3+, batch 8, 128×128
// (K = 256, T = 64), F(4,3), peak RSS at one thread: chunks of 8 examples
// 514–519 MiB, of 4 486–500, of 2 502–512, of 1 541–545 (two threads).
func winogradChunk(nb, k, t int64) int64 {
	return max(1, min(nb, (k+t-1)/t))
}
