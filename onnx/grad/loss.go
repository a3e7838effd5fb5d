package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
)

func (c *compiler) ignoreIndex() int64 {
	if c.cfg.Loss.IgnoreIndex != nil {
		return *c.cfg.Loss.IgnoreIndex
	}
	return DefaultIgnoreIndex
}

// lossLogits is the tensor a loss reads, viewed with its class axis at 1.
type lossLogits struct {
	name  string  // the model's tensor
	z     string  // name, or its transpose with the class axis at 1
	shape []int64 // z's shape [N, C, d...]
	perm  []int64 // the transpose from name to z; nil when z == name
}

// logits resolves Loss.Output and Loss.ClassAxis. An NHWC head (class axis
// last) is transposed to [N, C, H, W] inside the loss subgraph, so the
// losses below only ever see axis 1, and its gradient is transposed back.
func (c *compiler) logits(lb *builder) (*lossLogits, error) {
	l := c.cfg.Loss
	name := l.Output
	if name == "" {
		if len(c.g.Output) == 0 {
			return nil, fmt.Errorf("the model has no outputs")
		}
		name = c.g.Output[0].GetName()
	}
	li, ok := c.info[name]
	if !ok {
		return nil, fmt.Errorf("loss: logits tensor %q is not in the model", name)
	}
	rank := len(li.shape)
	if !c.isFloat(name) || rank < 2 {
		return nil, fmt.Errorf("loss: logits %q must be a float tensor [N, C, ...] or [N, ..., C], got shape %v", name, li.shape)
	}
	for _, n := range []string{LossName, TargetName, LossScaleName} {
		if c.names[n] {
			return nil, fmt.Errorf("the model already has a tensor named %q", n)
		}
	}
	axis := int64(l.ClassAxis)
	if axis == 0 {
		axis = 1
	}
	if axis < 0 {
		axis += int64(rank)
	}
	if axis < 1 || axis >= int64(rank) {
		return nil, fmt.Errorf("loss: class axis %d is out of range for logits %q of shape %v (want 1..%d, or negative from the end)", l.ClassAxis, name, li.shape, rank-1)
	}
	c.lossOn, c.classAxis = name, int(axis)
	out := &lossLogits{name: name, z: name, shape: li.shape}
	if axis != 1 {
		out.perm = []int64{0, axis}
		out.shape = []int64{li.shape[0], li.shape[axis]}
		for i := int64(1); i < int64(rank); i++ {
			if i != axis {
				out.perm = append(out.perm, i)
				out.shape = append(out.shape, li.shape[i])
			}
		}
		out.z = lb.transpose(name, out.perm)
	}
	return out, nil
}

// back maps a gradient of z back to the model's tensor.
func (z *lossLogits) back(b *builder, d string) string {
	if z.perm == nil {
		return d
	}
	inv := make([]int64, len(z.perm))
	for i, p := range z.perm {
		inv[p] = int64(i)
	}
	return b.transpose(d, inv)
}

// target adds the target input and returns, for shapes [N, 1, d...]: the
// class indices with ignored elements replaced by 0, and the validity mask
// as floats ("" with NoIgnore).
func (c *compiler) target(lb *builder, z *lossLogits) (t, valid string, ins []*onnx.ValueInfoProto) {
	tshape := append([]int64{z.shape[0]}, z.shape[2:]...)
	ins = []*onnx.ValueInfoProto{valueInfo(TargetName, int32(onnx.Int64), tshape)}
	t = TargetName
	if !c.cfg.Loss.NoIgnore {
		v := lb.op1("Not", []string{lb.op1("Equal", []string{t, lb.constInt64([]int64{c.ignoreIndex()}, nil)})})
		t = lb.where(v, t, lb.constInt64([]int64{0}, nil))
		valid = lb.op1("Cast", []string{lb.op1("Unsqueeze", []string{v, lb.ints(1)})}, onnx.IntAttr("to", int64(c.floatType)))
	}
	return lb.op1("Unsqueeze", []string{t, lb.ints(1)}), valid, ins
}

// classShape is [1, C, 1, ...] for logits of shape s.
func classShape(s []int64) []int64 {
	r := make([]int64, len(s))
	for i := range r {
		r[i] = 1
	}
	r[1] = s[1]
	return r
}

// classRange returns the constant [first, first+1, ..., first+C−1] shaped
// [1, C, 1, ...].
func classRange(b *builder, s []int64, first int64) string {
	v := make([]int64, s[1])
	for i := range v {
		v[i] = first + int64(i)
	}
	return b.constInt64(v, classShape(s))
}

// lossTerm is one term of the loss: its value (a scalar) and its gradient
// with respect to the logits z ("" when none is wanted), before the loss
// scale.
type lossTerm struct{ value, grad string }

// loss appends the configured loss (forward nodes to lb, backward nodes to
// c.b). It returns the tensor the loss reads, the gradient of the loss with
// respect to it ("" when it needs none), and the extra graph inputs.
func (c *compiler) loss(lb *builder, req map[string]bool) (string, string, []*onnx.ValueInfoProto, error) {
	z, err := c.logits(lb)
	if err != nil {
		return "", "", nil, err
	}
	l := c.cfg.Loss
	if C := z.shape[1]; l.ClassWeights != nil && int64(len(l.ClassWeights)) != C {
		return "", "", nil, fmt.Errorf("loss: %d class weights for %d classes", len(l.ClassWeights), C)
	}
	switch {
	case !(l.Focal >= 0 && l.Focal <= 10) || !(l.Dice >= 0 && l.Dice <= 1e3) || !(l.Lovasz >= 0 && l.Lovasz <= 1e3):
		return "", "", nil, fmt.Errorf("loss: focal γ %v (want 0..10), Dice weight %v or Lovász weight %v (want 0..1000) out of range", l.Focal, l.Dice, l.Lovasz)
	case l.NoPixel && l.Dice == 0 && l.Lovasz == 0:
		return "", "", nil, fmt.Errorf("loss: no pixel loss and no Dice or Lovász term: nothing to train on")
	case l.Lovasz > 0 && l.Kind == LossSigmoidBCE:
		return "", "", nil, fmt.Errorf("loss: the Lovász-softmax term needs a softmax head, not sigmoid channels")
	}
	wantGrad := req[z.name]
	tu, valid, ins := c.target(lb, z)
	sigmoid := l.Kind == LossSigmoidBCE
	type weighted struct {
		lossTerm
		weight float64
	}
	var terms []weighted
	if !l.NoPixel {
		var t lossTerm
		if sigmoid {
			t = c.sigmoidBCE(lb, z, tu, valid, wantGrad)
		} else {
			t = c.crossEntropy(lb, z, tu, valid, wantGrad)
		}
		terms = append(terms, weighted{t, 1})
	}
	if l.Dice > 0 {
		terms = append(terms, weighted{c.dice(lb, z, tu, valid, sigmoid, wantGrad), l.Dice})
	}
	if l.Lovasz > 0 {
		terms = append(terms, weighted{c.lovasz(lb, z, tu, valid, wantGrad), l.Lovasz})
	}
	var value, d string
	for _, t := range terms {
		v, g := t.value, t.grad
		if t.weight != 1 {
			v = lb.mul(v, lb.scalar(t.weight))
			if g != "" {
				g = c.b.mul(g, c.b.scalar(t.weight))
			}
		}
		if value == "" {
			value, d = v, g
			continue
		}
		value = lb.add(value, v)
		if g != "" {
			d = c.b.add(d, g)
		}
	}
	// Shape [1], not a scalar: some ONNX Runtime bindings cannot hold rank-0 tensors.
	lb.opTo("Reshape", []string{value, lb.ints(1)}, []string{LossName})
	if !wantGrad {
		return z.name, "", ins, nil
	}
	if l.Scale {
		ins = append(ins, valueInfo(LossScaleName, c.floatType, []int64{1}))
		d = c.b.mul(d, LossScaleName)
	}
	return z.name, z.back(c.b, d), ins, nil
}

// crossEntropy appends the softmax cross-entropy loss on logits z [N, C, d...]
// and returns its gradient with respect to z when grad is set. tu holds the
// class indices [N, 1, d...], valid the validity mask ("" with NoIgnore).
//
// Forward:  loss = −Σ w·m·log p_t / max(Σ w, tiny), w = weight[t]·valid,
// p = softmax(z), m = (1 − p_t)^γ (focal loss, Lin et al. 2017; m = 1 for
// γ = 0, plain cross entropy).
// Backward: dz   = (onehot(t) − p) · A · w / max(Σ w, tiny), with
// A = γ(1 − p_t)^(γ−1)·p_t·log p_t − m (A = −1 for γ = 0: softmax minus
// onehot) — written directly instead of differentiating the forward ops,
// which saves a scatter and keeps the loss numerically tight.
func (c *compiler) crossEntropy(lb *builder, z *lossLogits, tu, w string, grad bool) lossTerm {
	l := c.cfg.Loss
	C := z.shape[1]
	// Shapes below are [N, 1, d...] ("per element") unless noted.
	if l.ClassWeights != nil {
		cw := lb.op1("Gather", []string{lb.constFloat(l.ClassWeights, []int64{C}), tu}, onnx.IntAttr("axis", 0))
		if w == "" {
			w = cw
		} else {
			w = lb.mul(w, cw)
		}
	}
	logp := lb.op1("LogSoftmax", []string{z.z}, onnx.IntAttr("axis", 1))
	picked := lb.op1("GatherElements", []string{logp, tu}, onnx.IntAttr("axis", 1))
	el, pt, mod := picked, "", ""
	if l.Focal > 0 {
		pt = lb.op1("Exp", []string{picked})
		mod = lb.op1("Pow", []string{lb.sub(lb.scalar(1), pt), lb.scalar(l.Focal)})
		el = lb.mul(picked, mod)
	}
	var num, den string
	if w == "" {
		num = lb.op1("ReduceSum", []string{el}, onnx.IntAttr("keepdims", 0))
		den = lb.scalar(float64(numel(z.shape) / C))
	} else {
		num = lb.op1("ReduceSum", []string{lb.mul(el, w)}, onnx.IntAttr("keepdims", 0))
		den = lb.op1("Max", []string{lb.op1("ReduceSum", []string{w}, onnx.IntAttr("keepdims", 0)), lb.scalar(1e-12)})
	}
	t := lossTerm{value: lb.neg(lb.div(num, den))}
	if !grad {
		return t
	}
	b := c.b
	coef := b.op1("Reciprocal", []string{den})
	if w != "" {
		coef = b.mul(w, coef)
	}
	onehot := b.op1("Cast", []string{b.op1("Equal", []string{tu, classRange(b, z.shape, 0)})}, onnx.IntAttr("to", int64(c.floatType)))
	p := b.op1("Exp", []string{logp})
	if l.Focal == 0 {
		t.grad = b.mul(b.sub(p, onehot), coef)
		return t
	}
	// (1 − p_t)^(γ−1) with 1 − p_t kept off 0, where p_t·log p_t → 0 wins.
	q := b.op1("Max", []string{b.sub(b.scalar(1), pt), b.scalar(1e-12)})
	focus := b.mul(b.mul(b.scalar(l.Focal), b.op1("Pow", []string{q, b.scalar(l.Focal - 1)})), b.mul(pt, picked))
	t.grad = b.mul(b.sub(onehot, p), b.mul(b.sub(focus, mod), coef))
	return t
}

// sigmoidBCE appends the multi-label sigmoid binary cross-entropy on logits
// z [N, C, d...] (one channel per foreground class, no background channel)
// and returns its gradient with respect to z when grad is set. Target t = 0
// makes every channel negative, t = k+1 makes channel k positive.
//
// Forward:  loss = Σ w·m·ℓ / max(C·Σ valid, tiny), ℓ = −log p_t =
// max(z,0) − z·y + log(1+exp(−|z|)) (softplus(z) − z·y in its stable form),
// y = [t == k+1], w = valid·weight[k], p = sigmoid(z), p_t = p for y = 1 and
// 1 − p for y = 0, m = (1 − p_t)^γ (focal; 1 for γ = 0).
// Backward: dz   = (2y − 1)·m·(−γ·p_t·ℓ − (1 − p_t)) · w / max(C·Σ valid, tiny),
// which is (sigmoid(z) − y)·w/… for γ = 0.
func (c *compiler) sigmoidBCE(lb *builder, z *lossLogits, tu, valid string, grad bool) lossTerm {
	l := c.cfg.Loss
	C := z.shape[1]
	y := lb.op1("Cast", []string{lb.op1("Equal", []string{tu, classRange(lb, z.shape, 1)})}, onnx.IntAttr("to", int64(c.floatType)))
	w := valid // [N, 1, d...] or ""
	if l.ClassWeights != nil {
		cw := lb.constFloat(l.ClassWeights, classShape(z.shape)) // [1, C, 1...]
		if w == "" {
			w = cw
		} else {
			w = lb.mul(w, cw)
		}
	}
	x := z.z
	bce := lb.add(lb.sub(lb.op1("Relu", []string{x}), lb.mul(x, y)),
		lb.op1("Log", []string{lb.add(lb.scalar(1), lb.op1("Exp", []string{lb.neg(lb.op1("Abs", []string{x}))}))}))
	el, pt, mod := bce, "", ""
	if l.Focal > 0 {
		pt = lb.op1("Exp", []string{lb.neg(bce)})
		mod = lb.op1("Pow", []string{lb.sub(lb.scalar(1), pt), lb.scalar(l.Focal)})
		el = lb.mul(bce, mod)
	}
	if w != "" {
		el = lb.mul(el, w)
	}
	num := lb.op1("ReduceSum", []string{el}, onnx.IntAttr("keepdims", 0))
	var den string
	if valid == "" {
		den = lb.scalar(float64(numel(z.shape)))
	} else {
		cnt := lb.mul(lb.op1("ReduceSum", []string{valid}, onnx.IntAttr("keepdims", 0)), lb.scalar(float64(C)))
		den = lb.op1("Max", []string{cnt, lb.scalar(1e-12)})
	}
	t := lossTerm{value: lb.div(num, den)}
	if !grad {
		return t
	}
	b := c.b
	coef := b.op1("Reciprocal", []string{den})
	if w != "" {
		coef = b.mul(w, coef)
	}
	if l.Focal == 0 {
		t.grad = b.mul(b.sub(b.op1("Sigmoid", []string{x}), y), coef)
		return t
	}
	sign := b.sub(b.mul(b.scalar(2), y), b.scalar(1))
	inner := b.add(b.mul(b.scalar(l.Focal), b.mul(pt, bce)), b.sub(b.scalar(1), pt))
	t.grad = b.mul(b.neg(b.mul(sign, b.mul(mod, inner))), coef)
	return t
}

// dice appends the soft Dice loss on logits z [N, C, d...]: probabilities
// p = softmax(z) over the classes (sigmoid per channel for sigmoid heads),
// one-hot targets y (for sigmoid heads y_k = [t == k+1]), both masked by
// valid, and per class c over the batch and the image,
//
//	dice_c = (2·Σ p·y + 1) / (Σ p + Σ y + 1),
//	loss   = Σ_c w_c·(1 − dice_c) / Σ_c w_c    (w = ClassWeights, or 1),
//
// the smoothing 1 making a class absent from both target and prediction
// count as a perfect match. Backward: with S_c = Σ p + Σ y + 1,
// dL/dp = −w_c/Σw·(2y/S_c − (2·Σp·y + 1)/S_c²)·valid, then through the
// softmax (p⊙(g − Σ_k p_k g_k)) or the sigmoid (g⊙p⊙(1 − p)).
func (c *compiler) dice(lb *builder, z *lossLogits, tu, valid string, sigmoid, grad bool) lossTerm {
	l := c.cfg.Loss
	C := z.shape[1]
	var p, y string
	if sigmoid {
		p = lb.op1("Sigmoid", []string{z.z})
		y = lb.op1("Cast", []string{lb.op1("Equal", []string{tu, classRange(lb, z.shape, 1)})}, onnx.IntAttr("to", int64(c.floatType)))
	} else {
		p = lb.op1("Softmax", []string{z.z}, onnx.IntAttr("axis", 1))
		y = lb.op1("Cast", []string{lb.op1("Equal", []string{tu, classRange(lb, z.shape, 0)})}, onnx.IntAttr("to", int64(c.floatType)))
	}
	pv, yv := p, y
	if valid != "" {
		pv, yv = lb.mul(p, valid), lb.mul(y, valid)
	}
	axes := spatialAndBatch(len(z.shape)) // every axis but the class axis
	inter := lb.reduceSum(lb.mul(pv, yv), axes, true)
	sum := lb.add(lb.reduceSum(lb.add(pv, yv), axes, true), lb.scalar(1))
	num := lb.add(lb.mul(lb.scalar(2), inter), lb.scalar(1))
	lossC := lb.sub(lb.scalar(1), lb.div(num, sum)) // [1, C, 1...]
	cw, wsum := "", float64(C)
	if l.ClassWeights != nil {
		cw, wsum = lb.constFloat(l.ClassWeights, classShape(z.shape)), 0
		for _, v := range l.ClassWeights {
			wsum += v
		}
		lossC = lb.mul(lossC, cw)
	}
	wsum = max(wsum, 1e-12)
	t := lossTerm{value: lb.div(lb.op1("ReduceSum", []string{lossC}, onnx.IntAttr("keepdims", 0)), lb.scalar(wsum))}
	if !grad {
		return t
	}
	b := c.b
	// dL/dp, [N, C, d...]
	g := b.sub(b.div(b.mul(b.scalar(2), yv), sum), b.div(num, b.mul(sum, sum)))
	if cw != "" {
		g = b.mul(g, cw)
	}
	g = b.mul(g, b.scalar(-1/wsum))
	if valid != "" {
		g = b.mul(g, valid)
	}
	if sigmoid {
		t.grad = b.mul(g, b.mul(p, b.sub(b.scalar(1), p)))
		return t
	}
	t.grad = b.mul(p, b.sub(g, b.op1("ReduceSum", []string{b.mul(p, g), b.ints(1)}, onnx.IntAttr("keepdims", 1))))
	return t
}

// lovasz appends the Lovász-softmax loss (Berman, Rannen Triki and
// Blaschko 2018, their lovasz_softmax with classes="present") on logits z
// [N, C, d...]: per class c, the errors e = |[t == c] − p_c| of the batch's
// valid pixels sorted in decreasing order, dotted with the gradient of the
// Lovász extension of the Jaccard loss at the sorted ground truth,
//
//	J_i = 1 − (G − Σ_{j≤i} g_j) / (G + Σ_{j≤i} (1 − g_j)),  G = Σ g,
//	loss_c = Σ_i e_(i)·(J_i − J_{i−1}),
//
// averaged over the classes present in the targets. Ignored pixels get the
// error −1, which sorts them after every valid pixel, where J no longer
// changes, so they add nothing. Backward: d loss/d e_(i) = J_i − J_{i−1}
// (the sort order is constant almost everywhere), scattered back to the
// pixels, times ∂e/∂p = ±1, then through the softmax.
func (c *compiler) lovasz(lb *builder, z *lossLogits, tu, valid string, grad bool) lossTerm {
	C := z.shape[1]
	m := numel(z.shape) / C
	p := lb.op1("Softmax", []string{z.z}, onnx.IntAttr("axis", 1))
	fg := lb.op1("Cast", []string{lb.op1("Equal", []string{tu, classRange(lb, z.shape, 0)})}, onnx.IntAttr("to", int64(c.floatType)))
	e := lb.op1("Abs", []string{lb.sub(fg, p)})
	if valid != "" {
		fg = lb.mul(fg, valid)
		e = lb.add(lb.mul(e, valid), lb.sub(valid, lb.scalar(1))) // −1 where ignored
	}
	// [N, C, d...] → [C, N·d...]
	perm := []int64{1, 0}
	for i := 2; i < len(z.shape); i++ {
		perm = append(perm, int64(i))
	}
	flat := func(b *builder, x string) string { return b.reshape(b.transpose(x, perm), []int64{C, m}) }
	ef, fgf := flat(lb, e), flat(lb, fg)
	sorted := lb.op("TopK", []string{ef, lb.ints(m)}, 2, onnx.IntAttr("axis", 1), onnx.IntAttr("largest", 1), onnx.IntAttr("sorted", 1))
	es, order := sorted[0], sorted[1]
	gs := lb.op1("GatherElements", []string{fgf, order}, onnx.IntAttr("axis", 1))
	one := lb.ints(1)
	total := lb.reduceSum(fgf, []int64{1}, true) // [C, 1]
	inter := lb.sub(total, lb.op1("CumSum", []string{gs, one}))
	union := lb.add(total, lb.op1("CumSum", []string{lb.sub(lb.scalar(1), gs), one}))
	jac := lb.sub(lb.scalar(1), lb.div(inter, union))
	var step string // J_i − J_{i−1}, J_{−1} = 0
	if m == 1 {
		step = jac
	} else {
		prev := lb.op1("Concat", []string{lb.mul(lb.slice(jac, []int64{0}, []int64{1}, []int64{1}), lb.scalar(0)),
			lb.slice(jac, []int64{0}, []int64{m - 1}, []int64{1})}, onnx.IntAttr("axis", 1))
		step = lb.sub(jac, prev)
	}
	perClass := lb.reduceSum(lb.mul(es, step), []int64{1}, true) // [C, 1]
	present := lb.op1("Cast", []string{lb.op1("Greater", []string{total, lb.scalar(0)})}, onnx.IntAttr("to", int64(c.floatType)))
	count := lb.op1("Max", []string{lb.op1("ReduceSum", []string{present}, onnx.IntAttr("keepdims", 0)), lb.scalar(1)})
	t := lossTerm{value: lb.div(lb.op1("ReduceSum", []string{lb.mul(perClass, present)}, onnx.IntAttr("keepdims", 0)), count)}
	if !grad {
		return t
	}
	b := c.b
	des := b.div(b.mul(step, present), count) // d loss / d e_(i), [C, M]
	def := b.op1("ScatterElements", []string{b.mul(es, b.scalar(0)), order, des}, onnx.IntAttr("axis", 1))
	inv := make([]int64, len(perm))
	for i, v := range perm {
		inv[v] = int64(i)
	}
	tshape := append([]int64{C, z.shape[0]}, z.shape[2:]...)
	de := b.transpose(b.reshape(def, tshape), inv)              // [N, C, d...]
	dp := b.mul(de, b.sub(b.scalar(1), b.mul(b.scalar(2), fg))) // ∂|fg − p|/∂p = 1 − 2·fg
	if valid != "" {
		dp = b.mul(dp, valid)
	}
	t.grad = b.mul(p, b.sub(dp, b.op1("ReduceSum", []string{b.mul(p, dp), b.ints(1)}, onnx.IntAttr("keepdims", 1))))
	return t
}
