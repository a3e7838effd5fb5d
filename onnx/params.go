package onnx

import (
	"strconv"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// What "trainable" means, in one place. A float initializer is a learned
// parameter when a default-domain node takes it
//
//  1. at a parameter input of its operator (parameterInputs: a Conv's
//     weight and bias, a Gemm's B and C, MatMul's constant right operand,
//     the normalisations' scale and bias, PRelu's slope);
//  2. as the affine operand of an Add or Mul: a per-channel vector (more
//     than one element, exactly one dimension above 1) whose other operand
//     is computed by a parameterised layer, by a normalisation, or by
//     another affine Add/Mul. This is a Linear layer's bias (MatMul, Add),
//     the scale and bias of a normalisation exported decomposed
//     (…/Sqrt → Div → Mul → Add, or InstanceNormalization → Reshape → Mul
//     → Add for GroupNorm) and a layer scale (ConvNeXt's gamma);
//  3. as the data of a Gather: a float table of rank 2 or more (an
//     embedding, Swin's relative-position bias table).
//
// "Takes it" looks through the ops exporters put between a stored weight
// and its layer (weightPathOps: Transpose, Reshape, Cast, Identity,
// Unsqueeze, Squeeze, Flatten, and chains of them): torch.onnx without
// constant folding writes a Linear as MatMul(x, Transpose(W)), a bias as
// Unsqueeze(b), an fp16-stored model Cast(W) before each layer. The
// parameter is the stored initializer at the start of the path, which is
// where the gradient and the update go.
//
// Everything else is a constant of the architecture, even when it is a
// float initializer: scalars and size-1 constants (eps, a Pow exponent,
// GELU's 1/√2 and 0.5), Resize scales and ROI, shapes, axes, Pad values,
// Clip bounds, BatchNormalization's running statistics, integer tensors,
// and a Mul/Add constant on a tensor no layer computed (input
// normalisation's mean and std, attention masks).
var parameterInputs = map[string][]int{
	"Conv":                  {1, 2}, // weight, bias
	"ConvTranspose":         {1, 2}, // weight, bias
	"Gemm":                  {1, 2}, // B, C
	"MatMul":                {1},    // the constant right operand (x·W)
	"BatchNormalization":    {1, 2}, // scale, bias (not mean, var)
	"PRelu":                 {1},    // slope
	"LayerNormalization":    {1, 2}, // scale, bias
	"InstanceNormalization": {1, 2},
	"GroupNormalization":    {1, 2},
}

// weightPathOps are the operators whose input 0 may hold a stored weight
// on its way to a layer: rearrangements and copies, linear in it, so that
// the gradient flows back to the stored tensor.
var weightPathOps = map[string]bool{
	"Transpose": true, "Reshape": true, "Cast": true, "Identity": true,
	"Unsqueeze": true, "Squeeze": true, "Flatten": true,
}

// normalisations are the operators whose output an affine scale and bias
// may follow without a parameter of their own.
var normalisations = map[string]bool{
	"LayerNormalization": true, "InstanceNormalization": true, "GroupNormalization": true,
	"BatchNormalization": true, "MeanVarianceNormalization": true, "LpNormalization": true,
}

// ParameterInputs returns the input positions of a default-domain operator
// that always hold learned parameters when they are float initializers
// (rule 1; nil for operators without such inputs). The affine Add/Mul
// operands and Gather tables depend on the graph around the node: see
// NodeParameters.
func ParameterInputs(opType string) []int {
	return append([]int(nil), parameterInputs[opType]...)
}

// ParameterOps lists the operators that have parameter inputs, sorted.
func ParameterOps() []string { return sortedKeys(parameterInputs) }

// ParameterRule says in a line what a parameter is, for error messages.
const ParameterRule = "a float initializer at a parameter input (Conv, ConvTranspose, Gemm, MatMul, the normalisations' scale and bias, PRelu), " +
	"a per-channel bias or scale added or multiplied after a layer or normalisation, or a Gather's float table"

// IsParameterInput reports whether input i of opType holds a parameter by
// rule 1.
func IsParameterInput(opType string, i int) bool {
	for _, p := range parameterInputs[opType] {
		if p == i {
			return true
		}
	}
	return false
}

// ParameterNames returns the names of g's learned parameters (the rule
// above).
func ParameterNames(g *onnxpb.GraphProto) map[string]bool {
	out := map[string]bool{}
	for _, names := range NodeParameters(g) {
		for _, name := range names {
			out[name] = true
		}
	}
	return out
}

// NodeParameters maps each node that owns learned parameters to their
// names. An affine Add/Mul operand belongs to the layer it follows (a
// Linear's bias to its MatMul, a layer scale to the layer before it), so
// that a layer keeps counting as one; a decomposed normalisation's scale
// and bias belong to the scale's Mul, a Gather table to its Gather.
func NodeParameters(g *onnxpb.GraphProto) map[*onnxpb.NodeProto][]string {
	p := newParamFinder(g)
	out := map[*onnxpb.NodeProto][]string{}
	for _, n := range g.GetNode() {
		if !defaultDomain(n) {
			continue
		}
		for _, i := range parameterInputs[n.GetOpType()] {
			if w := p.param(inputAt(n, i)); w != "" {
				out[n] = appendNew(out[n], w)
			}
		}
		switch n.GetOpType() {
		case "Gather":
			if w := p.param(inputAt(n, 0)); w != "" && len(p.init[w].GetDims()) >= 2 && numel(p.init[w].GetDims()) > 1 {
				out[n] = appendNew(out[n], w)
			}
		case "Add", "Mul":
			if owner, i := p.affine(n); owner != nil {
				out[owner] = appendNew(out[owner], p.param(n.Input[i]))
			}
		}
	}
	return out
}

type paramFinder struct {
	nodes int
	init  map[string]*onnxpb.TensorProto
	prod  map[string]*onnxpb.NodeProto
	owner map[*onnxpb.NodeProto]*onnxpb.NodeProto // affine node → its layer; nil while being resolved
	done  map[*onnxpb.NodeProto]bool
}

func newParamFinder(g *onnxpb.GraphProto) *paramFinder {
	p := &paramFinder{
		init:  map[string]*onnxpb.TensorProto{},
		prod:  map[string]*onnxpb.NodeProto{},
		owner: map[*onnxpb.NodeProto]*onnxpb.NodeProto{},
		done:  map[*onnxpb.NodeProto]bool{},
		nodes: len(g.GetNode()),
	}
	for _, t := range g.GetInitializer() {
		p.init[t.GetName()] = t
	}
	for _, n := range g.GetNode() {
		for _, o := range n.Output {
			if o != "" {
				p.prod[o] = n
			}
		}
	}
	return p
}

func defaultDomain(n *onnxpb.NodeProto) bool {
	d := n.GetDomain()
	return d == "" || d == "ai.onnx"
}

// stored returns the initializer that tensor name is, or is computed from
// along a weight path (weightPathOps' input 0), or nil when name depends
// on anything else. Chains are bounded by the node count (a cycle in a
// hostile file ends the walk).
func (p *paramFinder) stored(name string) *onnxpb.TensorProto {
	for range p.nodes + 1 {
		if t := p.init[name]; t != nil {
			return t
		}
		n := p.prod[name]
		if n == nil || !defaultDomain(n) || !weightPathOps[n.GetOpType()] || len(n.Input) == 0 {
			return nil
		}
		name = n.Input[0]
	}
	return nil
}

// isFloat reports whether name is a float initializer or is computed from
// one along a weight path.
func (p *paramFinder) isFloat(name string) bool {
	t := p.stored(name)
	return t != nil && isFloatType(t.GetDataType())
}

// param returns the name of the stored float initializer behind name
// (isFloat), "" when there is none.
func (p *paramFinder) param(name string) string {
	if !p.isFloat(name) {
		return ""
	}
	return p.stored(name).GetName()
}

// perChannel reports whether dims hold more than one element along exactly
// one axis.
func perChannel(dims []int64) bool {
	wide := 0
	for _, d := range dims {
		if d > 1 {
			wide++
		} else if d < 1 {
			return false
		}
	}
	return wide == 1
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// affine returns the layer that Add/Mul node n's per-channel initializer
// operand belongs to and that operand's position, or nil when n is no
// affine parameter step.
func (p *paramFinder) affine(n *onnxpb.NodeProto) (*onnxpb.NodeProto, int) {
	if p.done[n] {
		if o := p.owner[n]; o != nil {
			return o, p.affineOperand(n)
		}
		return nil, 0
	}
	p.done[n] = true // a cycle (a hostile file) resolves to "not affine"
	i := p.affineOperand(n)
	if i < 0 {
		return nil, 0
	}
	src := p.prod[n.Input[1-i]]
	// A layer's output may reach its bias or scale through a Cast (mixed
	// precision, fp16 storage) or a rearrangement (a Linear's output
	// reshaped back to an image): the layer is the one before them.
	for range p.nodes {
		if src == nil || !defaultDomain(src) || !weightPathOps[src.GetOpType()] || p.normalised(src) {
			break
		}
		src = p.prod[inputAt(src, 0)]
	}
	if src == nil || !defaultDomain(src) {
		return nil, 0
	}
	var owner *onnxpb.NodeProto
	switch {
	case p.hasTableParams(src):
		owner = src
	case src.GetOpType() == "Add" || src.GetOpType() == "Mul":
		owner, _ = p.affine(src)
	case p.normalised(src):
		owner = n
	}
	p.owner[n] = owner
	if owner == nil {
		return nil, 0
	}
	return owner, i
}

// affineOperand returns the position of n's per-channel float initializer
// operand whose other operand is computed, or -1.
func (p *paramFinder) affineOperand(n *onnxpb.NodeProto) int {
	if len(n.Input) != 2 || (n.GetOpType() != "Add" && n.GetOpType() != "Mul") {
		return -1
	}
	for i := range 2 {
		if w := p.param(n.Input[i]); w != "" && perChannel(p.init[w].GetDims()) && p.stored(n.Input[1-i]) == nil {
			return i
		}
	}
	return -1
}

// appendNew appends name unless list holds it (one weight may reach a
// layer through two paths).
func appendNew(list []string, name string) []string {
	for _, x := range list {
		if x == name {
			return list
		}
	}
	return append(list, name)
}

func (p *paramFinder) hasTableParams(n *onnxpb.NodeProto) bool {
	for _, i := range parameterInputs[n.GetOpType()] {
		if i < len(n.Input) && p.isFloat(n.Input[i]) {
			return true
		}
	}
	return false
}

// normalised reports whether n's output is a normalisation's: the operator
// itself, the Div of a decomposed LayerNorm ((x−mean)/Sqrt(var+eps)), or a
// Reshape of InstanceNormalization's output (GroupNorm as exported).
func (p *paramFinder) normalised(n *onnxpb.NodeProto) bool {
	switch n.GetOpType() {
	case "Div":
		d := p.prod[inputAt(n, 1)]
		return d != nil && d.GetOpType() == "Sqrt"
	case "Reshape":
		s := p.prod[inputAt(n, 0)]
		return s != nil && s.GetOpType() == "InstanceNormalization"
	}
	return normalisations[n.GetOpType()]
}

func inputAt(n *onnxpb.NodeProto, i int) string {
	if i < len(n.Input) {
		return n.Input[i]
	}
	return ""
}

// Frozen is a float initializer that the parameter rule leaves out, and
// why, for `segtune info`: a weight a user expected to train and does not
// is named, not silently fixed.
type Frozen struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// FrozenFloats lists g's float initializers that are not parameters
// (ParameterNames), in initializer order, each with the reason read from
// its first consumer past any weight path.
func FrozenFloats(g *onnxpb.GraphProto) []Frozen {
	learned := ParameterNames(g)
	p := newParamFinder(g)
	uses := map[string][]use{} // stored initializer → its consumers past weight paths
	for _, n := range g.GetNode() {
		if defaultDomain(n) && weightPathOps[n.GetOpType()] {
			continue
		}
		for i, x := range n.Input {
			if t := p.stored(x); t != nil {
				uses[t.GetName()] = append(uses[t.GetName()], use{n, i})
			}
		}
	}
	var out []Frozen
	for _, t := range g.GetInitializer() {
		if !isFloatType(t.GetDataType()) || learned[t.GetName()] {
			continue
		}
		out = append(out, Frozen{Name: t.GetName(), Reason: frozenReason(t, uses[t.GetName()])})
	}
	return out
}

type use struct {
	n *onnxpb.NodeProto
	i int
}

func frozenReason(t *onnxpb.TensorProto, uses []use) string {
	if len(uses) == 0 {
		return "no node reads it"
	}
	if numel(t.GetDims()) <= 1 {
		return "a scalar constant of the architecture"
	}
	u := uses[0]
	op := u.n.GetOpType()
	switch {
	case !defaultDomain(u.n):
		return "read by an operator of domain " + u.n.GetDomain()
	case op == "BatchNormalization" && u.i >= 3:
		return "a BatchNormalization running statistic"
	case (op == "Add" || op == "Mul") && !perChannel(t.GetDims()):
		return op + " operand that is not a per-channel vector"
	case op == "Add" || op == "Mul":
		return op + " operand on a tensor that no layer or normalisation computed (input normalisation, a mask)"
	case op == "Sub" || op == "Div":
		return op + " operand: only Add and Mul take a learned bias or scale (input normalisation, an offset)"
	case op == "Gather":
		return "Gather table of rank 1 (a lookup constant)"
	}
	return op + " input " + strconv.Itoa(u.i) + ", which holds no parameter"
}
