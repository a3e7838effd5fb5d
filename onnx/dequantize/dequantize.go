// Package dequantize turns a quantized ONNX model back into the float model
// it approximates, so that it can be fine-tuned: every integer weight
// becomes a float initializer scale × (q − zero point), and each quantized
// operator its float form (ConvInteger → Conv, MatMulInteger → MatMul,
// QLinearConv → Conv, QLinearMatMul → MatMul, a weight's DequantizeLinear →
// the float weight, an activation's QuantizeLinear → DequantizeLinear pair
// → nothing). The result computes what the quantized model computes up to
// the activations' rounding, and trains like any float model; export
// --precision int8 quantizes it again.
package dequantize

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Report counts the nodes rewritten, by their operator type.
type Report map[string]int

// String lists the rewrites: "ConvInteger ×3, DequantizeLinear ×2".
func (r Report) String() string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(r)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", op, r[op]))
	}
	return strings.Join(parts, ", ")
}

// Apply rewrites m in place into its float form. A quantized operator it
// cannot rewrite (QLinearAdd, an integer tensor it cannot trace to its
// float source, …) is an error naming the node, and m is left unchanged.
func Apply(m *onnx.Model) (Report, error) {
	work := m.Clone()
	d := &rewriter{g: work.Proto.Graph, rep: Report{}, floatOf: map[string]string{}}
	if err := d.run(); err != nil {
		return nil, err
	}
	if q := onnx.Quantized(work); len(q) > 0 {
		return nil, fmt.Errorf("dequantize: %s remain after the rewrite: only ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul layers, weights behind DequantizeLinear and QuantizeLinear → DequantizeLinear pairs on activations have a float form here", q)
	}
	m.Proto = work.Proto
	return d.rep, nil
}

type rewriter struct {
	g       *onnx.GraphProto
	init    map[string]*onnx.TensorProto
	prod    map[string]*onnx.NodeProto
	names   map[string]bool
	rep     Report
	out     []*onnx.NodeProto
	dropped map[*onnx.NodeProto]bool
	// floatOf maps a quantized activation to the float tensor it stands
	// for (a QuantizeLinear's input, a rewritten QLinear layer's output).
	floatOf map[string]string
}

func (d *rewriter) run() error {
	d.init = map[string]*onnx.TensorProto{}
	d.prod = map[string]*onnx.NodeProto{}
	d.names = map[string]bool{}
	d.dropped = map[*onnx.NodeProto]bool{}
	for _, t := range d.g.Initializer {
		d.init[t.GetName()] = t
		d.names[t.GetName()] = true
	}
	for _, v := range slices.Concat(d.g.Input, d.g.Output) {
		d.names[v.GetName()] = true
	}
	for _, n := range d.g.Node {
		for _, o := range n.Output {
			d.prod[o] = n
		}
		for _, x := range slices.Concat(n.Input, n.Output) {
			d.names[x] = true
		}
	}
	order, err := onnx.TopoSort(d.g)
	if err != nil {
		return err
	}
	for _, n := range order {
		if d.dropped[n] {
			continue
		}
		if err := d.node(n); err != nil {
			return fmt.Errorf("dequantize: node %q (%s): %w", n.GetName(), n.GetOpType(), err)
		}
	}
	d.g.Node = d.out
	d.prune()
	return nil
}

func (d *rewriter) keep(n *onnx.NodeProto) { d.out = append(d.out, n) }

func (d *rewriter) node(n *onnx.NodeProto) error {
	if dom := n.GetDomain(); dom != "" && dom != "ai.onnx" {
		d.keep(n)
		return nil
	}
	switch n.GetOpType() {
	case "QuantizeLinear":
		if len(n.Output) > 0 {
			d.floatOf[n.Output[0]] = n.Input[0]
		}
		d.keep(n) // pruned once nothing reads it
	case "DequantizeLinear":
		return d.dequantizeLinear(n)
	case "ConvInteger", "MatMulInteger":
		return d.integerLayer(n)
	case "QLinearConv", "QLinearMatMul":
		return d.qlinearLayer(n)
	default:
		for _, x := range n.Input {
			if _, ok := d.floatOf[x]; ok {
				return fmt.Errorf("it reads the quantized tensor %q and has no float form here (ConvInteger, MatMulInteger, QLinearConv, QLinearMatMul and QuantizeLinear/DequantizeLinear do)", x)
			}
		}
		d.keep(n)
	}
	return nil
}

// dequantizeLinear: a stored weight becomes a float initializer; a
// quantized activation is replaced by the float tensor it was made from.
func (d *rewriter) dequantizeLinear(n *onnx.NodeProto) error {
	x := at(n, 0)
	if q := d.init[x]; q != nil {
		if d.init[at(n, 1)] == nil {
			return fmt.Errorf("the scale %q of weight %q is computed, not stored", at(n, 1), x)
		}
		w, err := d.dequant(q, d.init[at(n, 1)], d.init[at(n, 2)], attrInt(n, "axis", 1))
		if err != nil {
			return err
		}
		w.Name = proto.String(n.Output[0])
		d.g.Initializer = append(d.g.Initializer, w)
		d.init[n.Output[0]] = w
		d.rep["DequantizeLinear"]++
		return nil
	}
	if f, ok := d.floatOf[x]; ok {
		d.out = append(d.out, &onnx.NodeProto{Name: proto.String(n.GetName()), OpType: proto.String("Identity"), Input: []string{f}, Output: []string{n.Output[0]}})
		d.rep["DequantizeLinear"]++
		return nil
	}
	return fmt.Errorf("its input %q is neither a stored weight nor the output of a QuantizeLinear or a dequantized layer", x)
}

// integerLayer rewrites ConvInteger/MatMulInteger → Cast(float) →
// Mul(scale), the dynamic quantizer's pattern, into one float layer whose
// output is the Mul's.
func (d *rewriter) integerLayer(n *onnx.NodeProto) error {
	cast := d.soleConsumer(n.Output[0])
	if cast == nil || cast.GetOpType() != "Cast" || attrInt(cast, "to", 0) != int64(onnx.Float32) {
		return fmt.Errorf("its output is not cast to float32 by a single Cast (the pattern a quantizer writes)")
	}
	mul := d.soleConsumer(cast.Output[0])
	if mul == nil || mul.GetOpType() != "Mul" || len(mul.Input) != 2 {
		return fmt.Errorf("its cast output is not scaled by a single Mul")
	}
	scale := mul.Input[0]
	if scale == cast.Output[0] {
		scale = mul.Input[1]
	}
	xq := at(n, 0)
	xf, xScale, err := d.floatInput(xq)
	if err != nil {
		return err
	}
	wq := d.init[at(n, 1)]
	if wq == nil {
		return fmt.Errorf("its weight %q is not stored", at(n, 1))
	}
	wScale, err := d.weightScale(scale, xScale)
	if err != nil {
		return err
	}
	axis := int64(0) // a Conv weight's output channels
	op := "Conv"
	if n.GetOpType() == "MatMulInteger" {
		axis, op = int64(len(wq.GetDims())-1), "MatMul" // B's columns
	}
	w, err := d.dequant(wq, wScale, d.init[at(n, 3)], axis)
	if err != nil {
		return err
	}
	w.Name = proto.String(d.unique(floatName(wq.GetName())))
	d.g.Initializer = append(d.g.Initializer, w)
	layer := &onnx.NodeProto{Name: proto.String(n.GetName()), OpType: proto.String(op),
		Input: []string{xf, w.GetName()}, Output: []string{mul.Output[0]}}
	if op == "Conv" {
		layer.Attribute = n.Attribute
	}
	d.out = append(d.out, layer)
	d.dropped[cast], d.dropped[mul] = true, true
	d.rep[n.GetOpType()]++
	return nil
}

// qlinearLayer rewrites QLinearConv/QLinearMatMul into the float layer
// between its input's float source and a float output that its consumers
// (DequantizeLinear, other QLinear layers) read instead.
func (d *rewriter) qlinearLayer(n *onnx.NodeProto) error {
	xf, _, err := d.floatInput(at(n, 0))
	if err != nil {
		return err
	}
	wAt, op := 3, "Conv"
	if n.GetOpType() == "QLinearMatMul" {
		op = "MatMul"
	}
	wq := d.init[at(n, wAt)]
	xScale, wScale := d.init[at(n, 1)], d.init[at(n, wAt+1)]
	if wq == nil || xScale == nil || wScale == nil {
		return fmt.Errorf("its weight %q or its scales are not stored", at(n, wAt))
	}
	axis := int64(0)
	if op == "MatMul" {
		axis = int64(len(wq.GetDims()) - 1)
	}
	w, err := d.dequant(wq, wScale, d.init[at(n, wAt+2)], axis)
	if err != nil {
		return err
	}
	w.Name = proto.String(d.unique(floatName(wq.GetName())))
	d.g.Initializer = append(d.g.Initializer, w)
	ins := []string{xf, w.GetName()}
	if b := at(n, 8); op == "Conv" && b != "" {
		// The int32 bias is stored at scale x_scale × w_scale, zero point 0.
		bq := d.init[b]
		xs, err := onnx.Float32s(xScale)
		if err != nil || len(xs) != 1 || bq == nil {
			return fmt.Errorf("its bias %q or input scale is not a stored per-tensor value", b)
		}
		bias, err := d.dequant(bq, scaled(wScale, xs[0]), nil, 0)
		if err != nil {
			return err
		}
		bias.Name = proto.String(d.unique(floatName(b)))
		d.g.Initializer = append(d.g.Initializer, bias)
		ins = append(ins, bias.GetName())
	}
	out := d.unique(n.Output[0] + "/float")
	layer := &onnx.NodeProto{Name: proto.String(n.GetName()), OpType: proto.String(op), Input: ins, Output: []string{out}}
	if op == "Conv" {
		layer.Attribute = n.Attribute
	}
	d.out = append(d.out, layer)
	d.floatOf[n.Output[0]] = out
	d.rep[n.GetOpType()]++
	return nil
}

// floatInput returns the float tensor a quantized activation stands for,
// and the name of its scale.
func (d *rewriter) floatInput(xq string) (string, string, error) {
	if f, ok := d.floatOf[xq]; ok {
		p := d.prod[xq]
		scale := ""
		if p != nil && p.GetOpType() == "QuantizeLinear" {
			scale = at(p, 1)
		}
		return f, scale, nil
	}
	if p := d.prod[xq]; p != nil && p.GetOpType() == "DynamicQuantizeLinear" && len(p.Output) > 1 {
		return at(p, 0), p.Output[1], nil
	}
	return "", "", fmt.Errorf("its input %q is not the output of a QuantizeLinear, a DynamicQuantizeLinear or a dequantized layer", xq)
}

// weightScale finds the weight's scale in the scale that multiplies an
// integer layer's output: Mul(x_scale, w_scale) with w_scale stored, or a
// stored product of a stored x_scale and w_scale.
func (d *rewriter) weightScale(scale, xScale string) (*onnx.TensorProto, error) {
	if p := d.prod[scale]; p != nil && p.GetOpType() == "Mul" && len(p.Input) == 2 {
		for i := range 2 {
			if p.Input[1-i] == xScale && d.init[p.Input[i]] != nil {
				return d.init[p.Input[i]], nil
			}
		}
	}
	if s, x := d.init[scale], d.init[xScale]; s != nil && x != nil {
		xs, err := onnx.Float32s(x)
		if err != nil || len(xs) != 1 || xs[0] == 0 {
			return nil, fmt.Errorf("the input scale %q is not a non-zero per-tensor value", xScale)
		}
		return scaled(s, 1/xs[0]), nil
	}
	return nil, fmt.Errorf("cannot tell the weight's scale in %q (want Mul(input scale, stored weight scale))", scale)
}

// dequant returns scale × (q − zero point) as a float32 tensor of q's
// shape; scale and zero point are per tensor (one value) or per slice
// along axis.
func (d *rewriter) dequant(q, scale, zp *onnx.TensorProto, axis int64) (*onnx.TensorProto, error) {
	if q == nil || scale == nil {
		return nil, fmt.Errorf("a weight or its scale is not stored")
	}
	qv, err := onnx.Int64s(q)
	if err != nil {
		return nil, err
	}
	sv, err := onnx.Float32s(scale)
	if err != nil {
		return nil, err
	}
	zv := []int64{0}
	if zp != nil {
		if zv, err = onnx.Int64s(zp); err != nil {
			return nil, err
		}
	}
	dims := q.GetDims()
	if axis < 0 {
		axis += int64(len(dims))
	}
	stride, size := int64(1), int64(1)
	if len(sv) > 1 || len(zv) > 1 {
		if axis < 0 || axis >= int64(len(dims)) {
			return nil, fmt.Errorf("weight %q: axis %d out of range for shape %v", q.GetName(), axis, dims)
		}
		size = dims[axis]
		for _, x := range dims[axis+1:] {
			stride *= x
		}
	}
	pick := func(v []float32, i int64) (float32, error) {
		if len(v) == 1 {
			return v[0], nil
		}
		if int64(len(v)) != size {
			return 0, fmt.Errorf("weight %q: %d scales for %d channels", q.GetName(), len(v), size)
		}
		return v[i], nil
	}
	zf := make([]float32, len(zv))
	for i, z := range zv {
		zf[i] = float32(z)
	}
	out := make([]float32, len(qv))
	for i, x := range qv {
		c := (int64(i) / stride) % size
		s, err := pick(sv, c)
		if err != nil {
			return nil, err
		}
		z, err := pick(zf, c)
		if err != nil {
			return nil, err
		}
		out[i] = s * (float32(x) - z)
	}
	return onnx.NewFloat32Tensor("", dims, out), nil
}

// scaled returns t's values times k, as a float32 tensor.
func scaled(t *onnx.TensorProto, k float32) *onnx.TensorProto {
	v, _ := onnx.Float32s(t)
	for i := range v {
		v[i] *= k
	}
	return onnx.NewFloat32Tensor(t.GetName(), t.GetDims(), v)
}

func (d *rewriter) soleConsumer(name string) *onnx.NodeProto {
	var found *onnx.NodeProto
	for _, n := range d.g.Node {
		for _, x := range n.Input {
			if x == name {
				if found != nil && found != n {
					return nil
				}
				found = n
			}
		}
	}
	for _, o := range d.g.Output {
		if o.GetName() == name {
			return nil
		}
	}
	return found
}

// prune drops nodes whose outputs nothing reads (the quantizers and scale
// products the rewrite left behind) and initializers no node reads.
func (d *rewriter) prune() {
	for {
		read := map[string]bool{}
		for _, o := range d.g.Output {
			read[o.GetName()] = true
		}
		for _, n := range d.g.Node {
			for _, x := range n.Input {
				read[x] = true
			}
		}
		keep := d.g.Node[:0]
		removed := false
		for _, n := range d.g.Node {
			used := false
			for _, o := range n.Output {
				used = used || (o != "" && read[o])
			}
			if used {
				keep = append(keep, n)
			} else {
				removed = true
			}
		}
		d.g.Node = keep
		if !removed {
			inits := d.g.Initializer[:0]
			for _, t := range d.g.Initializer {
				if read[t.GetName()] {
					inits = append(inits, t)
				}
			}
			d.g.Initializer = inits
			var ins []*onnx.ValueInfoProto
			for _, v := range d.g.Input {
				if d.init[v.GetName()] == nil || read[v.GetName()] {
					ins = append(ins, v) // IR < 4 lists initializers as inputs
				}
			}
			d.g.Input = ins
			return
		}
	}
}

func (d *rewriter) unique(base string) string {
	name := base
	for i := 1; d.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	d.names[name] = true
	return name
}

// floatName names a dequantized weight after its quantized one:
// "conv.weight_quantized" → "conv.weight".
func floatName(q string) string {
	for _, suf := range []string{"_quantized", "_quant", "_int8", "_uint8"} {
		if s, ok := strings.CutSuffix(q, suf); ok && s != "" {
			return s
		}
	}
	return q + "_float"
}

func at(n *onnx.NodeProto, i int) string {
	if i < len(n.Input) {
		return n.Input[i]
	}
	return ""
}

func attrInt(n *onnx.NodeProto, name string, def int64) int64 {
	for _, a := range n.Attribute {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}
