package quantize

import (
	"fmt"
	"sort"

	"github.com/segtune/segtune/onnx"
)

// Options configure the QDQ quantizer.
type Options struct {
	// Activations is the activations' type: Uint8 (the default, what
	// ONNX Runtime's x86 kernels run fastest with VNNI) or Int8.
	Activations QType
	// PerTensor gives each weight one scale instead of one per output
	// channel.
	PerTensor bool
	// ReduceRange quantizes weights to 7 bits, for CPUs without VNNI
	// where 8-bit u8×s8 products can saturate.
	ReduceRange bool
	// OpTypes are the operators quantized; nil means DefaultOpTypes.
	OpTypes []string
	// Keep names the nodes left in float: by op type, node name or the
	// name of a tensor they produce.
	Keep []string
	// QuantizeOutputs quantizes the graph's outputs too (onnxruntime
	// does). By default they stay float: the scores feed an arg-max,
	// where 8-bit scores would tie.
	QuantizeOutputs bool
	// FloatBias keeps Conv biases in float instead of int32.
	FloatBias bool
}

// DefaultOpTypes are the operators quantized by default: those with
// weights, the removable activations, and those ONNX Runtime's CPU
// provider runs on 8-bit tensors when they sit between QDQ pairs.
var DefaultOpTypes = []string{
	"Conv", "ConvTranspose", "Gemm", "MatMul",
	"Relu", "Clip",
	"Add", "Mul", "Concat", "GlobalAveragePool", "AveragePool", "Sigmoid", "LeakyRelu",
	"MaxPool", "Resize", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten",
}

// Operator families, by how they are quantized.
var (
	weightedOps  = map[string]bool{"Conv": true, "ConvTranspose": true, "Gemm": true, "MatMul": true}
	removableOps = map[string]bool{"Relu": true, "Clip": true}
	// sameScaleOps pass values through (or pick among them): their output
	// keeps the input's scale and zero point.
	sameScaleOps = map[string]bool{"MaxPool": true, "Resize": true, "Reshape": true, "Transpose": true,
		"Squeeze": true, "Unsqueeze": true, "Flatten": true}
)

// weightAxis is the output-channel axis of a weight input for per-channel
// quantization, or −1 where one scale must do.
func weightAxis(n *onnx.NodeProto, w *onnx.TensorProto) int {
	rank := len(w.GetDims())
	switch n.GetOpType() {
	case "Conv":
		return 0
	case "ConvTranspose":
		if onnx.AttrInt(n, "group", 1) > 1 {
			return -1 // [C_in, C_out/group, …]: channels do not map to the bias
		}
		return 1
	case "Gemm":
		if rank != 2 {
			return -1
		}
		if onnx.AttrInt(n, "transB", 0) != 0 {
			return 0
		}
		return 1
	case "MatMul":
		if rank == 2 {
			return 1
		}
	}
	return -1
}

// weightUse is one weight initializer to quantize.
type weightUse struct {
	name string
	axis int
}

// biasUse is one Conv bias to quantize to int32: its scale needs the
// node's input and weight scales.
type biasUse struct {
	node   *onnx.NodeProto
	bias   string
	input  string
	weight string
}

// Plan says which nodes of a model are quantized and which tensors need
// calibrated ranges. Build it with NewPlan, calibrate Calibrate's tensors
// on the float model, and apply it with Apply.
type Plan struct {
	// Calibrate lists the tensors (names in the float model) whose ranges
	// Apply needs, sorted.
	Calibrate []string
	// Quantized counts quantized nodes by op type; Kept lists the nodes of
	// quantizable op types left in float, with the reason.
	Quantized map[string]int
	Kept      []KeptNode
	// FusedActivations counts the Relu/Clip nodes folded into the range of
	// the tensor they read.
	FusedActivations int

	opts      Options
	src       *onnx.Model
	acts      []string          // activation tensors to quantize, in graph order
	actSet    map[string]bool   // the same, as a set
	sameAs    map[string]string // tensor → tensor whose params it shares
	constants []string          // float initializers quantized as activations (own range)
	weights   []weightUse
	biases    []biasUse
	fuse      map[*onnx.NodeProto]bool // removable activations folded away
	perTensor bool
	notes     []string
}

// KeptNode is a node of a quantizable op type left in float.
type KeptNode struct {
	Node   string `json:"node"`
	Op     string `json:"op"`
	Reason string `json:"reason"`
}

// KeptOnRequest is the Reason of a node the caller's keep list (Keep)
// names.
const KeptOnRequest = "on the keep list"

// Notes are remarks on the plan (e.g. per-channel weights unavailable at
// the model's opset).
func (p *Plan) Notes() []string { return p.notes }

// NewPlan decides how m is quantized. types must give the element type of
// every tensor nodes read (see ElemTypes).
func NewPlan(m *onnx.Model, types ElemTypes, o Options) (*Plan, error) {
	g := m.Graph()
	opset := m.Opset("")
	if opset < 10 {
		return nil, fmt.Errorf("the model imports ONNX opset %d; QuantizeLinear and DequantizeLinear need opset 10 or later", opset)
	}
	ops := map[string]bool{}
	list := o.OpTypes
	if list == nil {
		list = DefaultOpTypes
	}
	for _, op := range list {
		ops[op] = true
	}
	keep := newMatcher(o.Keep)
	if bad := keep.unmatched(g); len(bad) > 0 {
		sort.Strings(bad)
		return nil, &UnmatchedKeepError{Names: bad}
	}
	sorted, err := onnx.TopoSort(g)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Quantized: map[string]int{}, opts: o, src: m,
		actSet: map[string]bool{}, sameAs: map[string]string{}, fuse: map[*onnx.NodeProto]bool{},
		perTensor: o.PerTensor,
	}
	if !o.PerTensor && opset < 13 {
		p.perTensor = true
		p.notes = append(p.notes, fmt.Sprintf("the model imports opset %d; per-channel DequantizeLinear needs 13, so weights have one scale each", opset))
	}
	pl := &planner{p: p, g: g, types: types, inits: initializers(g), outs: graphOutputs(g),
		consumers: onnx.Consumers(g), producers: onnx.Producers(g), seenWeight: map[string]bool{}, seenConst: map[string]bool{}}
	for _, n := range sorted {
		op := n.GetOpType()
		if !isDefaultDomain(n) || !ops[op] {
			continue
		}
		if keep.match(n) {
			pl.kept(n, KeptOnRequest)
			continue
		}
		if ins := n.GetInput(); len(ins) == 0 || !types.isFloat32(ins[0]) {
			continue // shape arithmetic on integers: nothing to quantize
		}
		var quantized bool
		switch {
		case weightedOps[op]:
			quantized = pl.weighted(n)
		case removableOps[op]:
			quantized = pl.removable(n)
		case sameScaleOps[op]:
			quantized = pl.sameScale(n)
		default:
			quantized = pl.other(n)
		}
		if quantized {
			p.Quantized[op]++
		}
	}
	pl.finish()
	return p, nil
}

// planner is NewPlan's walk over the graph: the plan it fills and what it
// looks the graph's tensors up in.
type planner struct {
	p                     *Plan
	g                     *onnx.GraphProto
	types                 ElemTypes
	inits                 map[string]*onnx.TensorProto
	outs                  map[string]bool
	consumers             map[string][]*onnx.NodeProto
	producers             map[string]*onnx.NodeProto
	seenWeight, seenConst map[string]bool
}

// mark quantizes an activation tensor; graph outputs stay float unless
// asked.
func (pl *planner) mark(name string) bool {
	p := pl.p
	if name == "" || (pl.outs[name] && !p.opts.QuantizeOutputs) {
		return false
	}
	if !p.actSet[name] {
		p.actSet[name] = true
		p.acts = append(p.acts, name)
	}
	return true
}

// markInput quantizes an input: a float32 initializer as a constant, any
// other tensor as an activation.
func (pl *planner) markInput(name string) bool {
	if t, ok := pl.inits[name]; ok {
		if t.GetDataType() != int32(onnx.Float32) {
			return false
		}
		if !pl.seenConst[name] {
			pl.seenConst[name] = true
			pl.p.constants = append(pl.p.constants, name)
		}
		return true
	}
	return pl.mark(name)
}

func (pl *planner) kept(n *onnx.NodeProto, reason string) {
	pl.p.Kept = append(pl.p.Kept, KeptNode{Node: onnx.NodeLabel(pl.g, n), Op: n.GetOpType(), Reason: reason})
}

// weighted plans a Conv, ConvTranspose, Gemm or MatMul: its input and output as
// activations, its weight per channel (or per tensor) and a Conv's bias
// as int32, or a second activation.
func (pl *planner) weighted(n *onnx.NodeProto) bool {
	p, ins, op := pl.p, n.GetInput(), n.GetOpType()
	if len(ins) < 2 || !pl.types.isFloat32(ins[1]) {
		pl.kept(n, "its second operand is not float32")
		return false
	}
	if !pl.mark(ins[0]) {
		pl.kept(n, "its input is a graph output")
		return false
	}
	if w, ok := pl.inits[ins[1]]; ok {
		if !pl.seenWeight[ins[1]] {
			pl.seenWeight[ins[1]] = true
			axis := weightAxis(n, w)
			if p.perTensor {
				axis = -1
			}
			p.weights = append(p.weights, weightUse{name: ins[1], axis: axis})
		}
		if (op == "Conv" || op == "ConvTranspose") && len(ins) > 2 && ins[2] != "" && !p.opts.FloatBias {
			if b, ok := pl.inits[ins[2]]; ok && b.GetDataType() == int32(onnx.Float32) && len(b.GetDims()) == 1 {
				p.biases = append(p.biases, biasUse{node: n, bias: ins[2], input: ins[0], weight: ins[1]})
			}
		}
	} else {
		pl.mark(ins[1]) // a second activation (x·y)
	}
	if len(n.GetOutput()) > 0 {
		pl.mark(n.GetOutput()[0])
	}
	return true
}

// removable plans a Relu or Clip after a quantized tensor: folded into
// its producer's output range where it alone reads it, else quantized.
func (pl *planner) removable(n *onnx.NodeProto) bool {
	p := pl.p
	in, out := n.GetInput()[0], n.GetOutput()[0]
	if !p.actSet[in] {
		return false // only follows a quantized tensor
	}
	prod := pl.producers[in]
	_, shared := p.sameAs[in]
	if prod != nil && len(pl.consumers[in]) == 1 && !pl.outs[in] && !shared && (!pl.outs[out] || p.opts.QuantizeOutputs) && clipBoundsConstant(n, pl.inits) {
		// Fold: the producer writes the activation's output,
		// quantized to its (non-negative or clipped) range.
		p.fuse[n] = true
		p.actSet[in] = false
		pl.mark(out)
		p.FusedActivations++
	} else {
		pl.mark(out)
	}
	return true
}

// sameScale plans an op whose output keeps its input's scale (MaxPool,
// Resize, reshapes), on an input already quantized.
func (pl *planner) sameScale(n *onnx.NodeProto) bool {
	in := n.GetInput()[0]
	if !pl.p.actSet[in] {
		return false // ONNX Runtime only runs these on inputs already quantized
	}
	out := n.GetOutput()[0]
	if pl.mark(out) {
		pl.p.sameAs[out] = in
	}
	return true
}

// other plans any other listed op: every float32 input and output
// quantized.
func (pl *planner) other(n *onnx.NodeProto) bool {
	for _, in := range n.GetInput() {
		if in != "" && !pl.types.isFloat32(in) {
			pl.kept(n, "an input is not float32")
			return false
		}
	}
	for _, in := range n.GetInput() {
		if in != "" {
			pl.markInput(in)
		}
	}
	for _, out := range n.GetOutput() {
		pl.mark(out)
	}
	return true
}

// finish drops the tensors folding un-marked, and lists those whose range
// calibration measures: the activations that neither share another's
// scale nor are initializers.
func (pl *planner) finish() {
	p := pl.p
	var acts []string
	for _, a := range p.acts {
		if p.actSet[a] {
			acts = append(acts, a)
		}
	}
	p.acts = acts
	for _, a := range acts {
		if _, ok := p.sameAs[a]; !ok {
			if _, init := pl.inits[a]; !init {
				p.Calibrate = append(p.Calibrate, a)
			}
		}
	}
	sort.Strings(p.Calibrate)
}

// clipBoundsConstant reports whether a Clip's bounds are attributes or
// initializers (a Relu has none): only then is folding it into a range
// the same computation.
func clipBoundsConstant(n *onnx.NodeProto, inits map[string]*onnx.TensorProto) bool {
	for _, in := range n.GetInput()[1:] {
		if _, ok := inits[in]; in != "" && !ok {
			return false
		}
	}
	return true
}
