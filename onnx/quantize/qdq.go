package quantize

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Summary describes a quantized model.
type Summary struct {
	Activations string `json:"activation_type"`
	Weights     string `json:"weight_type"`
	PerChannel  bool   `json:"per_channel"`
	ReduceRange bool   `json:"reduce_range"`
	// QuantizedNodes counts quantized nodes by op type.
	QuantizedNodes map[string]int `json:"quantized_nodes"`
	KeptNodes      []KeptNode     `json:"kept_float,omitempty"`
	// QDQPairs is the number of activation tensors given a
	// QuantizeLinear/DequantizeLinear pair; QuantizedWeights and
	// Int32Biases the initializers stored as integers.
	QDQPairs         int `json:"qdq_pairs"`
	QuantizedWeights int `json:"quantized_weights"`
	Int32Biases      int `json:"int32_biases"`
	// ClippedBiasValues counts bias values saturated to the int32 range.
	ClippedBiasValues int      `json:"clipped_bias_values,omitempty"`
	FusedActivations  int      `json:"fused_activations"`
	Notes             []string `json:"notes,omitempty"`
}

// Apply returns the quantized model: p's source with QuantizeLinear/
// DequantizeLinear pairs on the planned activations (scales and zero
// points from ranges, keyed by the names in p.Calibrate), its weights
// stored as int8 behind DequantizeLinear nodes, Conv biases as int32 and
// the folded activations removed. The source model is not modified.
func (p *Plan) Apply(ranges map[string]Range) (*onnx.Model, *Summary, error) {
	o := p.opts
	m := p.src.Clone()
	g := m.Graph()
	ap := &applier{p: p, g: g, nm: newNames(g), params: map[string]Params{},
		sum: &Summary{
			Activations: o.Activations.String(), Weights: Int8.String(), PerChannel: !p.perTensor, ReduceRange: o.ReduceRange,
			QuantizedNodes: p.Quantized, KeptNodes: p.Kept, FusedActivations: p.FusedActivations,
			Notes: append([]string(nil), p.notes...),
		}}
	ap.qmin, ap.qmax = o.Activations.Bounds(false, false)
	ap.foldActivations()
	ap.inits = initializers(g)
	if err := ap.activationParams(ranges); err != nil {
		return nil, nil, err
	}
	ap.activationQDQ()
	if err := ap.constants(); err != nil {
		return nil, nil, err
	}
	wscales, err := ap.weights()
	if err != nil {
		return nil, nil, err
	}
	if err := ap.biases(wscales); err != nil {
		return nil, nil, err
	}
	pruneInitializers(g)
	if err := sortNodes(g); err != nil {
		return nil, nil, fmt.Errorf("quantized graph: %w", err)
	}
	if m.Proto.GetProducerName() != "" {
		m.Proto.ProducerName = proto.String(m.Proto.GetProducerName() + "+segtune-int8")
	} else {
		m.Proto.ProducerName = proto.String("segtune-int8")
	}
	sort.Strings(ap.sum.Notes)
	return m, ap.sum, nil
}

// applier is one Apply: the plan, the copy of the model it rewrites and
// the quantization parameters of its tensors.
type applier struct {
	p     *Plan
	g     *onnx.GraphProto
	nm    *names
	sum   *Summary
	inits map[string]*onnx.TensorProto
	// params holds each quantized tensor's scale and zero point; qmin and
	// qmax bound the activations' integers.
	params     map[string]Params
	qmin, qmax int32
	// clone maps a node of the plan's model to its copy in g.
	clone map[*onnx.NodeProto]*onnx.NodeProto
}

// foldActivations removes the removable activations the plan folds: their
// producer writes their output.
func (ap *applier) foldActivations() {
	g := ap.g
	dropVI := map[string]bool{}
	var nodes []*onnx.NodeProto
	producers := onnx.Producers(g)
	ap.clone = map[*onnx.NodeProto]*onnx.NodeProto{}
	srcNodes := ap.p.src.Graph().GetNode()
	for i, n := range g.GetNode() {
		ap.clone[srcNodes[i]] = n
	}
	for i, n := range g.GetNode() {
		if ap.p.fuse[srcNodes[i]] {
			in, out := n.GetInput()[0], n.GetOutput()[0]
			prod := producers[in]
			for k, o := range prod.Output {
				if o == in {
					prod.Output[k] = out
				}
			}
			// A folded activation after this one (Relu then Clip) finds
			// the node that now writes its input.
			producers[out] = prod
			dropVI[in] = true
			continue
		}
		nodes = append(nodes, n)
	}
	g.Node = nodes
	dropValueInfo(g, dropVI)
}

// activationParams computes the scale and zero point of every activation:
// from its calibration range, from its values for a constant, or those of
// the tensor it shares them with.
func (ap *applier) activationParams(ranges map[string]Range) error {
	for _, name := range ap.p.Calibrate {
		r, ok := ranges[name]
		if !ok {
			return fmt.Errorf("no calibration range for tensor %q", name)
		}
		pr, err := ComputeParams(r.Min, r.Max, ap.qmin, ap.qmax, false)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		ap.params[name] = pr
	}
	for _, name := range ap.p.constants {
		vals, err := onnx.Float32s(ap.inits[name])
		if err != nil {
			return err
		}
		lo, hi := minMax(vals)
		pr, err := ComputeParams(lo, hi, ap.qmin, ap.qmax, false)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", name, err)
		}
		ap.params[name] = pr
	}
	for _, name := range ap.p.acts {
		if _, err := ap.resolve(name, 0); err != nil {
			return err
		}
	}
	return nil
}

// resolve returns name's parameters, following the tensors that share
// their input's scale.
func (ap *applier) resolve(name string, depth int) (Params, error) {
	if pr, ok := ap.params[name]; ok {
		return pr, nil
	}
	src, ok := ap.p.sameAs[name]
	if !ok || depth > len(ap.p.sameAs) {
		return Params{}, fmt.Errorf("no quantization parameters for tensor %q", name)
	}
	pr, err := ap.resolve(src, depth+1)
	if err == nil {
		ap.params[name] = pr
	}
	return pr, err
}

// activationQDQ puts a QuantizeLinear/DequantizeLinear pair after every
// quantized activation.
func (ap *applier) activationQDQ() {
	g, nm := ap.g, ap.nm
	adt := ap.p.opts.Activations.DataType()
	scalar := []int64{}
	outs := graphOutputs(g)
	for _, name := range ap.p.acts {
		pr := ap.params[name]
		scale := nm.fresh(name + "_scale")
		zp := nm.fresh(name + "_zero_point")
		g.Initializer = append(g.Initializer, onnx.NewFloat32Tensor(scale, scalar, []float32{pr.Scale}),
			intTensor(zp, adt, scalar, []int32{pr.ZeroPoint}))
		q := nm.fresh(name + "_quantized")
		dq := nm.fresh(name + "_DequantizeLinear_Output")
		src := name
		if outs[name] {
			// The graph output is the dequantized tensor; its producer
			// writes a new name.
			src = nm.fresh(name + "_QuantizeLinear_Input")
			renameOutput(g, name, src)
			dq = name
		}
		qn := node("QuantizeLinear", nm.fresh(name+"_QuantizeLinear"), []string{src, scale, zp}, []string{q})
		dqn := node("DequantizeLinear", nm.fresh(name+"_DequantizeLinear"), []string{q, scale, zp}, []string{dq})
		if !outs[name] {
			replaceInput(g, name, dq)
		}
		// Shape and Size read any type: on the 8-bit tensor they need no
		// DequantizeLinear to run (ONNX Runtime would keep one for them).
		for _, n := range g.GetNode() {
			if op := n.GetOpType(); isDefaultDomain(n) && (op == "Shape" || op == "Size") {
				for i, in := range n.Input {
					if in == dq {
						n.Input[i] = q
					}
				}
			}
		}
		g.Node = append(g.Node, qn, dqn)
		ap.sum.QDQPairs++
	}
}

// constants stores the constants quantized as activations as integers.
func (ap *applier) constants() error {
	adt := ap.p.opts.Activations.DataType()
	for _, name := range ap.p.constants {
		pr := ap.params[name]
		vals, _ := onnx.Float32s(ap.inits[name])
		qv := make([]int32, len(vals))
		for i, v := range vals {
			qv[i] = QuantizeValue(v, pr, ap.qmin, ap.qmax)
		}
		if err := ap.p.addDequantized(ap.g, ap.nm, name, ap.inits[name].GetDims(), adt, qv, []float32{pr.Scale}, []int32{pr.ZeroPoint}, -1, nil); err != nil {
			return err
		}
	}
	return nil
}

// weights stores the weights as symmetric int8, per channel where the
// axis allows, and returns each weight's scales.
func (ap *applier) weights() (map[string][]float32, error) {
	wscales := map[string][]float32{}
	for _, w := range ap.p.weights {
		t := ap.inits[w.name]
		vals, err := onnx.Float32s(t)
		if err != nil {
			return nil, err
		}
		qw, err := QuantizeWeights(vals, t.GetDims(), w.axis, Int8, true, ap.p.opts.ReduceRange)
		if err != nil {
			return nil, fmt.Errorf("weight %q: %w", w.name, err)
		}
		scales := make([]float32, len(qw.Params))
		zps := make([]int32, len(qw.Params))
		for i, pr := range qw.Params {
			scales[i], zps[i] = pr.Scale, pr.ZeroPoint
		}
		wscales[w.name] = scales
		if err := ap.p.addDequantized(ap.g, ap.nm, w.name, t.GetDims(), onnx.Int8, qw.Values, scales, zps, qw.Axis, nil); err != nil {
			return nil, err
		}
		ap.sum.QuantizedWeights++
	}
	return wscales, nil
}

// biases stores Conv biases as int32 at the accumulator's scale (the
// input's scale times each weight scale).
func (ap *applier) biases(wscales map[string][]float32) error {
	for _, b := range ap.p.biases {
		in, err := ap.resolve(b.input, 0)
		if err != nil {
			return err
		}
		ws, ok := wscales[b.weight]
		if !ok {
			continue
		}
		t := ap.inits[b.bias]
		vals, err := onnx.Float32s(t)
		if err != nil {
			return err
		}
		qb, err := QuantizeBias(vals, in.Scale, ws)
		if err != nil {
			return fmt.Errorf("bias %q: %w", b.bias, err)
		}
		ap.sum.ClippedBiasValues += qb.Clipped
		scales, zps, axis := qb.Scales, make([]int32, len(vals)), 0
		if len(ws) == 1 {
			// One weight scale: one bias scale, and no axis (which
			// opsets before 13 do not have).
			scales, zps, axis = scales[:1], zps[:1], -1
		}
		// Each Conv gets its own copy: the scale depends on its input.
		if err := ap.p.addDequantized(ap.g, ap.nm, b.bias, t.GetDims(), onnx.Int32, qb.Values, scales, zps, axis, ap.clone[b.node]); err != nil {
			return err
		}
		ap.sum.Int32Biases++
	}
	return nil
}

// addDequantized stores name's values as integers of type dt with a
// DequantizeLinear node in front, and points its readers (only reader,
// when set) at the dequantized tensor. axis −1 means one scale.
func (p *Plan) addDequantized(g *onnx.GraphProto, nm *names, name string, dims []int64, dt onnx.DataType,
	values []int32, scales []float32, zps []int32, axis int, reader *onnx.NodeProto) error {
	qname := nm.fresh(name + "_quantized")
	sname := nm.fresh(name + "_quantized_scale")
	zname := nm.fresh(name + "_quantized_zero_point")
	pdims := []int64{}
	if axis >= 0 {
		pdims = []int64{int64(len(scales))}
	} else if len(scales) != 1 {
		return fmt.Errorf("tensor %q: %d scales without an axis", name, len(scales))
	}
	g.Initializer = append(g.Initializer, intTensor(qname, dt, dims, values),
		onnx.NewFloat32Tensor(sname, pdims, scales), intTensor(zname, dt, pdims, zps))
	out := nm.fresh(name + "_DequantizeLinear_Output")
	var attrs []*onnx.AttributeProto
	if axis >= 0 {
		attrs = append(attrs, onnx.IntAttr("axis", int64(axis)))
	}
	g.Node = append(g.Node, node("DequantizeLinear", nm.fresh(name+"_DequantizeLinear"), []string{qname, sname, zname}, []string{out}, attrs...))
	if reader != nil {
		for i, in := range reader.Input {
			if in == name {
				reader.Input[i] = out
			}
		}
		return nil
	}
	replaceInput(g, name, out, g.Node[len(g.Node)-1])
	return nil
}

// renameOutput makes the node producing from write to instead.
func renameOutput(g *onnx.GraphProto, from, to string) {
	for _, n := range g.GetNode() {
		for i, o := range n.Output {
			if o == from {
				n.Output[i] = to
			}
		}
	}
}
