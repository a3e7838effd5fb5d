package grad

import (
	"fmt"
	"slices"
	"strings"

	"github.com/segtune/segtune/onnx"
)

func init() {
	register("Gemm", opSpec{rule: gemmRule, nature: multilinear})
	register("MatMul", opSpec{rule: matMulRule, nature: multilinear})
	register("Einsum", opSpec{rule: einsumRule, nature: multilinear})
}

// gemmRule: Y = α·A'·B' + β·C with A' = transA ? Aᵀ : A, B' likewise. Each
// gradient is one Gemm with the transposes folded into its flags, so no
// Transpose node is emitted.
func gemmRule(c *gradCtx) ([]string, error) {
	a, b := c.in(0), c.in(1)
	ta, tb := attrInt(c.n, "transA", 0) != 0, attrInt(c.n, "transB", 0) != 0
	alpha := float64(attrFloat(c.n, "alpha", 1))
	beta := float64(attrFloat(c.n, "beta", 1))
	dy := c.dY[0]
	gemm := func(x, y string, tx, ty bool) string {
		return c.op1("Gemm", []string{x, y}, onnx.IntAttr("transA", b2i(tx)), onnx.IntAttr("transB", b2i(ty)), onnx.FloatAttr("alpha", float32(alpha)))
	}
	dx := c.grads()
	if c.wants(0) {
		switch {
		case !ta && !tb:
			dx[0] = gemm(dy, b, false, true) // dY·Bᵀ
		case !ta && tb:
			dx[0] = gemm(dy, b, false, false) // dY·B
		case ta && !tb:
			dx[0] = gemm(b, dy, false, true) // B·dYᵀ
		default:
			dx[0] = gemm(b, dy, true, true) // Bᵀ·dYᵀ
		}
	}
	if c.wants(1) {
		switch {
		case !ta && !tb:
			dx[1] = gemm(a, dy, true, false) // Aᵀ·dY
		case !ta && tb:
			dx[1] = gemm(dy, a, true, false) // dYᵀ·A
		case ta && !tb:
			dx[1] = gemm(a, dy, false, false) // A·dY
		default:
			dx[1] = gemm(dy, a, true, true) // dYᵀ·Aᵀ
		}
	}
	if c.wants(2) {
		g := dy
		if beta != 1 {
			g = c.mul(g, c.scalar(beta))
		}
		dx[2] = c.unbroadcast(g, c.shape(c.out(0)), c.shape(c.in(2)))
	}
	return dx, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// matMulRule handles numpy matmul semantics: 1-D operands are promoted,
// batch axes broadcast (and their gradients are summed back).
func matMulRule(c *gradCtx) ([]string, error) {
	a, b := c.in(0), c.in(1)
	as, bs := c.shape(a), c.shape(b)
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("MatMul of scalars")
	}
	a2s, b2s := slices.Clone(as), slices.Clone(bs)
	if len(as) == 1 {
		a2s = []int64{1, as[0]}
	}
	if len(bs) == 1 {
		b2s = []int64{bs[0], 1}
	}
	batch, err := broadcastShape(a2s[:len(a2s)-2], b2s[:len(b2s)-2])
	if err != nil {
		return nil, err
	}
	m, n := a2s[len(a2s)-2], b2s[len(b2s)-1]
	ys2 := slices.Concat(batch, []int64{m, n})
	dy := c.dY[0]
	if !equalShape(ys2, c.shape(c.out(0))) {
		dy = c.reshape(dy, ys2)
	}
	a2, b2 := a, b
	if len(as) == 1 {
		a2 = c.reshape(a, a2s)
	}
	if len(bs) == 1 {
		b2 = c.reshape(b, b2s)
	}
	dx := c.grads()
	if c.wants(0) {
		g := c.op1("MatMul", []string{dy, c.transpose(b2, lastSwap(len(b2s)))})
		g = c.unbroadcast(g, slices.Concat(batch, []int64{m, a2s[len(a2s)-1]}), a2s)
		if len(as) == 1 {
			g = c.reshape(g, as)
		}
		dx[0] = g
	}
	if c.wants(1) {
		var g string
		k := a2s[len(a2s)-1]
		if len(b2s) == 2 && len(a2s) > 2 {
			// Shared 2-D weight: fold the batch into the rows, one Gemm.
			rows := numel(a2s[:len(a2s)-1])
			af := c.reshape(a2, []int64{rows, k})
			if !equalShape(batch, a2s[:len(a2s)-2]) {
				af = c.reshape(c.op1("Expand", []string{a2, c.ints(slices.Concat(batch, []int64{m, k})...)}), []int64{numel(batch) * m, k})
			}
			g = c.op1("Gemm", []string{af, c.reshape(dy, []int64{numel(batch) * m, n})}, onnx.IntAttr("transA", 1))
		} else {
			g = c.op1("MatMul", []string{c.transpose(a2, lastSwap(len(a2s))), dy})
			g = c.unbroadcast(g, slices.Concat(batch, []int64{k, n}), b2s)
		}
		if len(bs) == 1 {
			g = c.reshape(g, bs)
		}
		dx[1] = g
	}
	return dx, nil
}

// lastSwap is the permutation exchanging the last two axes.
func lastSwap(rank int) []int64 {
	p := make([]int64, rank)
	for i := range p {
		p[i] = int64(i)
	}
	p[rank-1], p[rank-2] = p[rank-2], p[rank-1]
	return p
}

// einsumRule: the gradient of operand i is the Einsum of dY with the other
// operands onto operand i's subscripts ("bhid,bhjd->bhij" gives dA =
// "bhij,bhjd->bhid"), followed by an Expand over the subscripts that only
// operand i has (summed away in the forward). Equations with an ellipsis
// or with a subscript repeated within one operand (traces, diagonals) are
// refused.
func einsumRule(c *gradCtx) ([]string, error) {
	eq := attrString(c.n, "equation", "")
	terms, out, err := parseEinsum(eq, len(c.n.Input))
	if err != nil {
		return nil, err
	}
	dx := c.grads()
	for i, term := range terms {
		if !c.wants(i) {
			continue
		}
		ins, subs := []string{c.dY[0]}, []string{out}
		elsewhere := out
		for j, other := range terms {
			if j != i {
				ins, subs = append(ins, c.in(j)), append(subs, other)
				elsewhere += other
			}
		}
		var kept []byte
		for k := 0; k < len(term); k++ {
			if strings.IndexByte(elsewhere, term[k]) >= 0 {
				kept = append(kept, term[k])
			}
		}
		g := c.op1("Einsum", ins, onnx.StringAttr("equation", strings.Join(subs, ",")+"->"+string(kept)))
		if len(kept) < len(term) {
			xs := c.shape(c.in(i))
			ks := slices.Clone(xs)
			for k := 0; k < len(term); k++ {
				if strings.IndexByte(elsewhere, term[k]) < 0 {
					ks[k] = 1
				}
			}
			g = c.op1("Expand", []string{c.reshape(g, ks), c.ints(xs...)})
		}
		dx[i] = g
	}
	return dx, nil
}

// parseEinsum splits an Einsum equation into its operands' subscripts and
// the output's, deriving the output of an implicit equation (the subscripts
// seen once, in alphabetical order). Only letters are accepted: an
// ellipsis, or a subscript repeated within one term, is unsupported.
func parseEinsum(eq string, nIn int) (terms []string, out string, err error) {
	s := strings.ReplaceAll(eq, " ", "")
	refuse := func(why string) ([]string, string, error) {
		return nil, "", unsupportedf("Einsum equation %q: %s", eq, why)
	}
	if strings.Contains(s, ".") {
		return refuse("an ellipsis is not supported")
	}
	lhs, rhs, explicit := strings.Cut(s, "->")
	terms = strings.Split(lhs, ",")
	if len(terms) != nIn {
		return nil, "", fmt.Errorf("Einsum equation %q has %d operands, the node %d inputs", eq, len(terms), nIn)
	}
	count := map[byte]int{}
	for _, t := range terms {
		seen := map[byte]bool{}
		for k := 0; k < len(t); k++ {
			ch := t[k]
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z') {
				return nil, "", fmt.Errorf("Einsum equation %q: invalid subscript %q", eq, ch)
			}
			if seen[ch] {
				return refuse(fmt.Sprintf("subscript %q repeated within operand %q is not supported", ch, t))
			}
			seen[ch] = true
			count[ch]++
		}
	}
	if !explicit {
		var once []byte
		for ch, n := range count {
			if n == 1 {
				once = append(once, ch)
			}
		}
		slices.Sort(once)
		return terms, string(once), nil
	}
	seen := map[byte]bool{}
	for k := 0; k < len(rhs); k++ {
		ch := rhs[k]
		if count[ch] == 0 || seen[ch] {
			return nil, "", fmt.Errorf("Einsum equation %q: output subscript %q is repeated or in no operand", eq, ch)
		}
		seen[ch] = true
	}
	return terms, rhs, nil
}
