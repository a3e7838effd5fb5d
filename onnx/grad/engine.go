package grad

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// emit appends the loss and the backward pass and assembles the graphs.
func (c *compiler) emit() (*Graphs, error) {
	fwd := c.g.Node
	for _, name := range slices.Concat(c.cfg.ExtraOutputs, c.cfg.GradInputs) {
		if _, ok := c.info[name]; !ok {
			return nil, fmt.Errorf("tensor %q is not in the model", name)
		}
	}
	req := c.requiresGrad(fwd)
	c.producer = map[string]*onnx.NodeProto{}
	for _, n := range fwd {
		for _, o := range n.Output {
			c.producer[o] = n
		}
	}
	c.annotateForward(fwd)
	grads := map[string][]string{}
	lossB := newBuilder("loss/", c.floatType, c.b.taken)
	lossB.matrixReductions = c.cfg.MatrixReductions
	var extraIn []*onnx.ValueInfoProto
	var hasLoss bool
	switch c.cfg.Loss.Kind {
	case LossCrossEntropy, LossSigmoidBCE:
		start := len(c.b.nodes)
		logits, dLogits, ins, err := c.loss(lossB, req)
		if err != nil {
			return nil, err
		}
		annotateRest(c.b.nodes[start:], NodeRole{Role: RoleLoss}) // the loss's gradient
		extraIn, hasLoss = ins, true
		if dLogits != "" {
			grads[logits] = append(grads[logits], dLogits)
		}
	case LossNone:
	default:
		return nil, fmt.Errorf("unknown loss kind %d", c.cfg.Loss.Kind)
	}
	var gradIns []*onnx.ValueInfoProto
	for _, t := range c.cfg.GradInputs {
		if !req[t] {
			return nil, fmt.Errorf("GradInputs: tensor %q does not depend on any trainable parameter", t)
		}
		name := GradInPrefix + t
		if c.names[name] {
			return nil, fmt.Errorf("the model already has a tensor named %q", name)
		}
		gradIns = append(gradIns, valueInfo(name, c.info[t].dtype, c.info[t].shape))
		grads[t] = append(grads[t], name)
	}
	if !hasLoss && len(gradIns) == 0 {
		return nil, fmt.Errorf("nothing to differentiate: no loss and no GradInputs")
	}
	for i := len(fwd) - 1; i >= 0; i-- {
		if err := c.backNode(fwd[i], req, grads); err != nil {
			return nil, err
		}
	}
	annotateRest(c.b.nodes, NodeRole{Role: RoleDataGrad}) // sums of an activation's gradient contributions
	annotateRest(lossB.nodes, NodeRole{Role: RoleLoss})
	man := c.manifestBase()
	var gradOuts []*onnx.ValueInfoProto
	for _, p := range c.trainable {
		out := GradPrefix + p
		if c.names[out] {
			return nil, fmt.Errorf("the model already has a tensor named %q", out)
		}
		unused := len(grads[p]) == 0
		start := len(c.b.nodes)
		var g string
		if unused {
			g = c.b.zeros(c.info[p].shape)
		} else {
			g = c.accumulate(grads[p])
		}
		c.b.opTo("Identity", []string{g}, []string{out})
		annotateRest(c.b.nodes[start:], NodeRole{Role: RoleWeightGrad, Of: p})
		gradOuts = append(gradOuts, valueInfo(out, c.info[p].dtype, c.info[p].shape))
		man.Params = append(man.Params, ParamInfo{Name: p, Grad: out, Shape: c.info[p].shape, Unused: unused})
	}
	return c.assemble(fwd, lossB, hasLoss, extraIn, gradIns, gradOuts, man)
}

// requiresGrad marks the float tensors that depend on a trainable parameter.
func (c *compiler) requiresGrad(fwd []*onnx.NodeProto) map[string]bool {
	req := map[string]bool{}
	for _, p := range c.trainable {
		req[p] = true
	}
	for _, n := range fwd {
		spec := registry[n.GetOpType()]
		if spec.nature.noGrad() {
			continue
		}
		dep := false
		for _, x := range n.Input {
			dep = dep || (x != "" && req[x])
		}
		if !dep {
			continue
		}
		for j, o := range n.Output {
			if o != "" && c.isFloat(o) && !spec.isIndexOutput(j) {
				req[o] = true
			}
		}
	}
	return req
}

func (c *compiler) isFloat(name string) bool {
	i, ok := c.info[name]
	if !ok {
		return false
	}
	switch onnx.DataType(i.dtype) {
	case onnx.Float32, onnx.Float64, onnx.Float16, onnx.BFloat16:
		return true // half precision: mixed-precision graphs (onnx/autocast)
	}
	return false
}

// accumulate sums gradient contributions.
func (c *compiler) accumulate(gs []string) string {
	if len(gs) == 1 {
		return gs[0]
	}
	return c.b.op1("Sum", gs)
}

// backNode applies n's rule when gradient reaches one of its outputs and one
// of its inputs wants one.
func (c *compiler) backNode(n *onnx.NodeProto, req map[string]bool, grads map[string][]string) error {
	dY := make([]string, len(n.Output))
	has := false
	for j, o := range n.Output {
		if gs := grads[o]; o != "" && len(gs) > 0 {
			dY[j] = c.accumulate(gs)
			has = true
		}
	}
	need := make([]bool, len(n.Input))
	want := false
	for i, x := range n.Input {
		need[i] = x != "" && req[x]
		want = want || need[i]
	}
	if !has || !want {
		return nil
	}
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		return &UnsupportedError{Node: n.GetName(), Op: n.GetOpType(), What: fmt.Sprintf("operator of domain %q has no gradient rule", d)}
	}
	r := registry[n.GetOpType()].rule
	if r == nil {
		return &UnsupportedError{Node: n.GetName(), Op: n.GetOpType(), What: "the operator has no gradient rule"}
	}
	ctx := &gradCtx{builder: c.b, c: c, n: n, dY: dY, need: need}
	start := len(c.b.nodes)
	dX, err := r(ctx)
	if err != nil {
		return atNode(n, err)
	}
	c.annotateRule(n, c.b.nodes[start:], dX)
	for i, x := range n.Input {
		if need[i] && i < len(dX) && dX[i] != "" {
			grads[x] = append(grads[x], dX[i])
		}
	}
	return nil
}

// assemble builds the training and evaluation models and prunes them.
func (c *compiler) assemble(fwd []*onnx.NodeProto, lossB *builder, hasLoss bool,
	lossIns, gradIns, gradOuts []*onnx.ValueInfoProto, man Manifest,
) (*Graphs, error) {
	var frozen []*onnx.TensorProto
	var params []*onnx.TensorProto
	for _, t := range c.g.Initializer {
		if c.isTrain[t.GetName()] {
			params = append(params, t)
		} else {
			frozen = append(frozen, t)
		}
	}
	var paramIns []*onnx.ValueInfoProto
	for _, p := range c.trainable {
		paramIns = append(paramIns, valueInfo(p, c.info[p].dtype, c.info[p].shape))
	}
	// Params in trainable order.
	byName := map[string]*onnx.TensorProto{}
	for _, t := range params {
		byName[t.GetName()] = t
	}
	ordered := make([]*onnx.TensorProto, len(c.trainable))
	for i, p := range c.trainable {
		ordered[i] = proto.Clone(byName[p]).(*onnx.TensorProto)
	}

	var outs []*onnx.ValueInfoProto
	if hasLoss {
		outs = append(outs, valueInfo(LossName, c.floatType, []int64{1}))
	}
	trainOuts := slices.Clone(outs)
	seen := map[string]bool{}
	for _, o := range c.g.Output {
		name := o.GetName()
		if i, ok := c.info[name]; ok && !seen[name] {
			seen[name] = true
			outs = append(outs, valueInfo(name, i.dtype, i.shape))
			if !c.cfg.OmitModelOutputs || slices.Contains(c.cfg.ExtraOutputs, name) {
				trainOuts = append(trainOuts, valueInfo(name, i.dtype, i.shape))
			}
		}
	}
	for _, name := range c.cfg.ExtraOutputs {
		if !seen[name] {
			seen[name] = true
			outs = append(outs, valueInfo(name, c.info[name].dtype, c.info[name].shape))
			trainOuts = append(trainOuts, valueInfo(name, c.info[name].dtype, c.info[name].shape))
		}
	}
	inputs := slices.Clone(c.g.Input)
	inputs = append(inputs, lossIns...)
	inputs = append(inputs, paramIns...)

	mk := func(nodes []*onnx.NodeProto, inits []*onnx.TensorProto, ins, outs []*onnx.ValueInfoProto, name string) *onnx.Model {
		g := &onnx.GraphProto{
			Name:        proto.String(name),
			Node:        nodes,
			Initializer: inits,
			Input:       ins,
			Output:      outs,
		}
		prune(g)
		orderLeaves(g)
		mp := &onnx.ModelProto{
			IrVersion:       c.m.IrVersion,
			OpsetImport:     c.m.OpsetImport,
			ProducerName:    proto.String("segtune"),
			ProducerVersion: proto.String("grad"),
			Graph:           g,
		}
		return &onnx.Model{Proto: mp}
	}
	evalNodes := slices.Concat(fwd, lossB.nodes)
	evalInits := slices.Concat(frozen, lossB.inits)
	eval := mk(cloneNodes(evalNodes), cloneTensors(evalInits), cloneVI(inputs), cloneVI(outs), "segtune_eval")

	trainNodes := slices.Concat(fwd, lossB.nodes, c.b.nodes)
	trainInits := slices.Concat(frozen, lossB.inits, c.b.inits)
	trainIns := slices.Concat(inputs, gradIns)
	trainOuts = slices.Concat(trainOuts, gradOuts)
	train := mk(trainNodes, trainInits, trainIns, trainOuts, "segtune_training")
	importConvGrad(train.Proto)

	man.fill(train.Proto.Graph, eval.Proto.Graph)
	return &Graphs{Training: train, Eval: eval, Params: ordered, Manifest: man}, nil
}

// UsesConvGrad reports whether m's graph holds ConvGrad nodes, which a
// session runs only with the operator's kernels registered
// (runtime.Options.ConvGradCUDA or ConvGradCPU).
func UsesConvGrad(m *onnx.ModelProto) bool {
	return slices.ContainsFunc(m.GetGraph().GetNode(), func(n *onnx.NodeProto) bool { return n.GetDomain() == ConvGradDomain })
}

// importConvGrad declares ConvGradDomain in m's opset imports when a node
// of its graph uses it (the training graph only: the evaluation graph has
// no backward pass).
func importConvGrad(m *onnx.ModelProto) {
	if !UsesConvGrad(m) {
		return
	}
	m.OpsetImport = append(slices.Clone(m.OpsetImport),
		&onnx.OperatorSetIdProto{Domain: proto.String(ConvGradDomain), Version: proto.Int64(ConvGradVersion)})
}

func cloneNodes(ns []*onnx.NodeProto) []*onnx.NodeProto {
	out := make([]*onnx.NodeProto, len(ns))
	for i, n := range ns {
		out[i] = proto.Clone(n).(*onnx.NodeProto)
	}
	return out
}

func cloneTensors(ts []*onnx.TensorProto) []*onnx.TensorProto {
	out := make([]*onnx.TensorProto, len(ts))
	for i, t := range ts {
		out[i] = proto.Clone(t).(*onnx.TensorProto)
	}
	return out
}

func cloneVI(vs []*onnx.ValueInfoProto) []*onnx.ValueInfoProto {
	out := make([]*onnx.ValueInfoProto, len(vs))
	for i, v := range vs {
		out[i] = proto.Clone(v).(*onnx.ValueInfoProto)
	}
	return out
}

// prune drops nodes and initializers the graph outputs do not need. Graph
// inputs are kept even when unused, so the interface stays predictable.
func prune(g *onnx.GraphProto) {
	needed := map[string]bool{}
	for _, o := range g.Output {
		needed[o.GetName()] = true
	}
	keep := make([]bool, len(g.Node))
	for i := len(g.Node) - 1; i >= 0; i-- {
		n := g.Node[i]
		for _, o := range n.Output {
			if o != "" && needed[o] {
				keep[i] = true
			}
		}
		if keep[i] {
			for _, x := range n.Input {
				needed[x] = true
			}
		}
	}
	var nodes []*onnx.NodeProto
	for i, n := range g.Node {
		if keep[i] {
			nodes = append(nodes, n)
		}
	}
	g.Node = nodes
	var inits []*onnx.TensorProto
	for _, t := range g.Initializer {
		if needed[t.GetName()] {
			inits = append(inits, t)
		}
	}
	g.Initializer = inits
}
