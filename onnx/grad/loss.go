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

// crossEntropy appends the softmax cross-entropy loss on the logits output
// (forward nodes to lb, backward nodes to c.b). It returns the logits name,
// the gradient of the loss with respect to them ("" when they need none),
// and the extra graph inputs (target, loss scale).
//
// Forward:  loss = −Σ w·log_softmax(z)[t] / max(Σ w, tiny), w = weight[t]·valid.
// Backward: dz   = (softmax(z) − onehot(t)) · w / max(Σ w, tiny) · scale —
// written directly instead of differentiating the forward ops, which saves
// a scatter and keeps the loss numerically tight.
func (c *compiler) crossEntropy(lb *builder, req map[string]bool) (string, string, []*onnxpb.ValueInfoProto, error) {
	l := c.cfg.Loss
	logits := l.Output
	if logits == "" {
		if len(c.g.Output) == 0 {
			return "", "", nil, fmt.Errorf("the model has no outputs")
		}
		logits = c.g.Output[0].GetName()
	}
	li, ok := c.info[logits]
	if !ok {
		return "", "", nil, fmt.Errorf("loss: logits tensor %q is not in the model", logits)
	}
	if !c.isFloat(logits) || len(li.shape) < 2 {
		return "", "", nil, fmt.Errorf("loss: logits %q must be a float tensor [N, C, ...], got shape %v", logits, li.shape)
	}
	for _, n := range []string{LossName, TargetName, LossScaleName} {
		if c.names[n] {
			return "", "", nil, fmt.Errorf("the model already has a tensor named %q", n)
		}
	}
	C := li.shape[1]
	if l.ClassWeights != nil && int64(len(l.ClassWeights)) != C {
		return "", "", nil, fmt.Errorf("loss: %d class weights for %d classes", len(l.ClassWeights), C)
	}
	tshape := append([]int64{li.shape[0]}, li.shape[2:]...)
	ins := []*onnxpb.ValueInfoProto{valueInfo(TargetName, int32(onnxpb.TensorProto_INT64), tshape)}
	// Shapes below are [N, 1, d...] ("per element") unless noted.
	t := TargetName
	var w string // per-element weight; "" means 1
	if !l.NoIgnore {
		valid := lb.op1("Not", []string{lb.op1("Equal", []string{t, lb.constInt64([]int64{c.ignoreIndex()}, nil)})})
		t = lb.where(valid, t, lb.constInt64([]int64{0}, nil))
		w = lb.op1("Cast", []string{lb.op1("Unsqueeze", []string{valid, lb.ints(1)})}, onnx.IntAttr("to", int64(c.floatType)))
	}
	tu := lb.op1("Unsqueeze", []string{t, lb.ints(1)})
	if l.ClassWeights != nil {
		cw := lb.op1("Gather", []string{lb.constFloat(l.ClassWeights, []int64{C}), tu}, onnx.IntAttr("axis", 0))
		if w == "" {
			w = cw
		} else {
			w = lb.mul(w, cw)
		}
	}
	logp := lb.op1("LogSoftmax", []string{logits}, onnx.IntAttr("axis", 1))
	picked := lb.op1("GatherElements", []string{logp, tu}, onnx.IntAttr("axis", 1))
	var num, den string
	if w == "" {
		num = lb.op1("ReduceSum", []string{picked}, onnx.IntAttr("keepdims", 0))
		den = lb.scalar(float64(numel(tshape)))
	} else {
		num = lb.op1("ReduceSum", []string{lb.mul(picked, w)}, onnx.IntAttr("keepdims", 0))
		den = lb.op1("Max", []string{lb.op1("ReduceSum", []string{w}, onnx.IntAttr("keepdims", 0)), lb.scalar(1e-12)})
	}
	// Shape [1], not a scalar: some ONNX Runtime bindings cannot hold rank-0 tensors.
	lb.opTo("Reshape", []string{lb.neg(lb.div(num, den)), lb.ints(1)}, []string{LossName})

	if !req[logits] {
		return logits, "", ins, nil
	}
	b := c.b
	coef := b.op1("Reciprocal", []string{den})
	if l.Scale {
		ins = append(ins, valueInfo(LossScaleName, c.floatType, []int64{1}))
		coef = b.mul(coef, LossScaleName)
	}
	if w != "" {
		coef = b.mul(w, coef)
	}
	rshape := make([]int64, len(li.shape))
	for i := range rshape {
		rshape[i] = 1
	}
	rshape[1] = C
	rng := make([]int64, C)
	for i := range rng {
		rng[i] = int64(i)
	}
	onehot := b.op1("Cast", []string{b.op1("Equal", []string{tu, b.constInt64(rng, rshape)})}, onnx.IntAttr("to", int64(c.floatType)))
	p := b.op1("Exp", []string{logp})
	d := b.mul(b.sub(p, onehot), coef)
	return logits, d, ins, nil
}
