package grad

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
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
func (c *compiler) target(lb *builder, z *lossLogits) (t, valid string, ins []*onnxpb.ValueInfoProto) {
	tshape := append([]int64{z.shape[0]}, z.shape[2:]...)
	ins = []*onnxpb.ValueInfoProto{valueInfo(TargetName, int32(onnxpb.TensorProto_INT64), tshape)}
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

// loss appends the configured loss (forward nodes to lb, backward nodes to
// c.b). It returns the tensor the loss reads, the gradient of the loss with
// respect to it ("" when it needs none), and the extra graph inputs.
func (c *compiler) loss(lb *builder, req map[string]bool) (string, string, []*onnxpb.ValueInfoProto, error) {
	z, err := c.logits(lb)
	if err != nil {
		return "", "", nil, err
	}
	l := c.cfg.Loss
	if C := z.shape[1]; l.ClassWeights != nil && int64(len(l.ClassWeights)) != C {
		return "", "", nil, fmt.Errorf("loss: %d class weights for %d classes", len(l.ClassWeights), C)
	}
	var d string
	var ins []*onnxpb.ValueInfoProto
	if l.Kind == LossSigmoidBCE {
		d, ins = c.sigmoidBCE(lb, z, req[z.name])
	} else {
		d, ins = c.crossEntropy(lb, z, req[z.name])
	}
	if d == "" {
		return z.name, "", ins, nil
	}
	return z.name, z.back(c.b, d), ins, nil
}

// lossCoef returns the backward coefficient 1/den, times the loss scale
// (adding its input) when requested.
func (c *compiler) lossCoef(den string, ins []*onnxpb.ValueInfoProto) (string, []*onnxpb.ValueInfoProto) {
	coef := c.b.op1("Reciprocal", []string{den})
	if c.cfg.Loss.Scale {
		ins = append(ins, valueInfo(LossScaleName, c.floatType, []int64{1}))
		coef = c.b.mul(coef, LossScaleName)
	}
	return coef, ins
}

// crossEntropy appends the softmax cross-entropy loss on logits z [N, C, d...]
// and returns its gradient with respect to z when grad is set.
//
// Forward:  loss = −Σ w·log_softmax(z)[t] / max(Σ w, tiny), w = weight[t]·valid.
// Backward: dz   = (softmax(z) − onehot(t)) · w / max(Σ w, tiny) · scale —
// written directly instead of differentiating the forward ops, which saves
// a scatter and keeps the loss numerically tight.
func (c *compiler) crossEntropy(lb *builder, z *lossLogits, grad bool) (string, []*onnxpb.ValueInfoProto) {
	l := c.cfg.Loss
	C := z.shape[1]
	// Shapes below are [N, 1, d...] ("per element") unless noted.
	tu, w, ins := c.target(lb, z)
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
	var num, den string
	if w == "" {
		num = lb.op1("ReduceSum", []string{picked}, onnx.IntAttr("keepdims", 0))
		den = lb.scalar(float64(numel(z.shape) / C))
	} else {
		num = lb.op1("ReduceSum", []string{lb.mul(picked, w)}, onnx.IntAttr("keepdims", 0))
		den = lb.op1("Max", []string{lb.op1("ReduceSum", []string{w}, onnx.IntAttr("keepdims", 0)), lb.scalar(1e-12)})
	}
	// Shape [1], not a scalar: some ONNX Runtime bindings cannot hold rank-0 tensors.
	lb.opTo("Reshape", []string{lb.neg(lb.div(num, den)), lb.ints(1)}, []string{LossName})
	if !grad {
		return "", ins
	}
	b := c.b
	coef, ins := c.lossCoef(den, ins)
	if w != "" {
		coef = b.mul(w, coef)
	}
	onehot := b.op1("Cast", []string{b.op1("Equal", []string{tu, classRange(b, z.shape, 0)})}, onnx.IntAttr("to", int64(c.floatType)))
	p := b.op1("Exp", []string{logp})
	return b.mul(b.sub(p, onehot), coef), ins
}

// sigmoidBCE appends the multi-label sigmoid binary cross-entropy on logits
// z [N, C, d...] (one channel per foreground class, no background channel)
// and returns its gradient with respect to z when grad is set. Target t = 0
// makes every channel negative, t = k+1 makes channel k positive.
//
// Forward:  loss = Σ w·(max(z,0) − z·y + log(1+exp(−|z|))) / max(C·Σ valid, tiny),
// y = [t == k+1], w = valid·weight[k] — softplus(z) − z·y in its stable form.
// Backward: dz   = (sigmoid(z) − y) · w / max(C·Σ valid, tiny) · scale.
func (c *compiler) sigmoidBCE(lb *builder, z *lossLogits, grad bool) (string, []*onnxpb.ValueInfoProto) {
	l := c.cfg.Loss
	C := z.shape[1]
	tu, valid, ins := c.target(lb, z)
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
	el := lb.add(lb.sub(lb.op1("Relu", []string{x}), lb.mul(x, y)),
		lb.op1("Log", []string{lb.add(lb.scalar(1), lb.op1("Exp", []string{lb.neg(lb.op1("Abs", []string{x}))}))}))
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
	lb.opTo("Reshape", []string{lb.div(num, den), lb.ints(1)}, []string{LossName})
	if !grad {
		return "", ins
	}
	b := c.b
	coef, ins := c.lossCoef(den, ins)
	if w != "" {
		coef = b.mul(w, coef)
	}
	return b.mul(b.sub(b.op1("Sigmoid", []string{x}), y), coef), ins
}
