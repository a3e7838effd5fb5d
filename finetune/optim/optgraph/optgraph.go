// Package optgraph expresses one step of package optim's optimisers as a
// standard ONNX graph (opset 18), so that ONNX Runtime can update the
// weights where they live, on the GPU, without copying them to Go and back.
//
// All parameters of a model lie in one flat float32 buffer, laid out by
// NewLayout; so do their gradients and each of the optimiser's moment
// slots. The graph takes those buffers and the per-step scalars of
// Coefficients, and returns the updated buffers and the gradients' global
// L2 norm:
//
//	inputs:  params [Total], grads [Total], <slot> [Total]..., coeffs [K]
//	outputs: params_out [Total], <slot>_out [Total]..., grad_norm [1]
//
// The update is optim's (see optim.Optimizer.Step), in float32 arithmetic:
// it agrees with the Go optimiser, which rounds once per element from
// float64, to within float32 rounding. Where the graph reorders the
// algebra to spend fewer passes over memory, the comments of Build say so.
//
// When the gradient norm is not finite the graph changes nothing: every
// output equals its input bit for bit. The caller reads grad_norm after the
// run and counts the step only when it is finite, as optim.Step refuses
// such a step with optim.ErrNonFiniteGrad. The norm is a float32 sum of
// squares, so gradients whose squares overflow float32 (a norm above about
// 1.8e19), which optim would still clip, are refused here.
package optgraph

import (
	"fmt"
	"math"
	"slices"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/onnx"
)

// Spec names one parameter tensor.
type Spec struct {
	Name  string
	Shape []int64
}

// Slot is where one parameter lies in the flat buffers: elements
// [Offset, Offset+Len) of each, in row-major order of Shape.
type Slot struct {
	Name   string
	Shape  []int64
	Offset int64
	Len    int64
	Decay  bool // weight decay applies to it
}

// Layout places parameters in flat buffers. The decayed parameters come
// first, so that weight decay applies to one prefix [0, Decayed) and the
// graph needs no per-element mask. Every parameter starts at a multiple of
// Align, and Decayed and Total are multiples of Align too.
//
// The elements between parameters (padding) must hold zeros in every buffer
// passed to the graph; the graph keeps them zero.
type Layout struct {
	Slots   []Slot
	Decayed int64 // elements in the decayed prefix
	Total   int64 // length of every flat buffer
}

// Align is the element alignment of every parameter in the flat buffers:
// 64 float32 values, so each parameter's view is 256-byte aligned, as
// GPU libraries prefer.
const Align = 64

// maxTotal bounds a layout's length, so that no sum of offsets and lengths
// can overflow int64.
const maxTotal = 1 << 50

// NewLayout places params in flat buffers for an optimiser configured by
// cfg: the parameters that cfg decays (WeightDecay non-zero and NoDecay not
// exempting them) first, then the others, each group in the order given.
// cfg.NoDecay receives an optim.Param with Name and Shape set and no data.
//
// It returns an error for an invalid cfg, an empty list, an empty or
// repeated name, or a shape with a negative or overflowing dimension.
func NewLayout(params []Spec, cfg optim.Config) (Layout, error) {
	if err := validate(cfg); err != nil {
		return Layout{}, err
	}
	if len(params) == 0 {
		return Layout{}, fmt.Errorf("optgraph: no parameters")
	}
	seen := make(map[string]bool, len(params))
	var decayed, rest []Slot
	for i, p := range params {
		if p.Name == "" {
			return Layout{}, fmt.Errorf("optgraph: parameter %d has no name", i)
		}
		if seen[p.Name] {
			return Layout{}, fmt.Errorf("optgraph: duplicate parameter %q", p.Name)
		}
		seen[p.Name] = true
		n, ok := elems(p.Shape)
		if !ok {
			return Layout{}, fmt.Errorf("optgraph: parameter %q has bad shape %v", p.Name, p.Shape)
		}
		s := Slot{Name: p.Name, Shape: append([]int64(nil), p.Shape...), Len: n}
		s.Decay = cfg.WeightDecay != 0 &&
			(cfg.NoDecay == nil || !cfg.NoDecay(&optim.Param{Name: p.Name, Shape: s.Shape}))
		if s.Decay {
			decayed = append(decayed, s)
		} else {
			rest = append(rest, s)
		}
	}
	var l Layout
	off := int64(0)
	place := func(ss []Slot) error {
		for _, s := range ss {
			s.Offset = off
			off = alignUp(off + s.Len)
			if off > maxTotal {
				return fmt.Errorf("optgraph: parameters exceed %d elements", int64(maxTotal))
			}
			l.Slots = append(l.Slots, s)
		}
		return nil
	}
	if err := place(decayed); err != nil {
		return Layout{}, err
	}
	l.Decayed = off
	if err := place(rest); err != nil {
		return Layout{}, err
	}
	l.Total = off
	if l.Total == 0 {
		// Only empty tensors: keep one aligned block so that the
		// buffers, and the graph's shapes, are not empty.
		l.Total = Align
	}
	return l, nil
}

// validate checks cfg with optim's own rules: optim.New validates the
// configuration before it looks at the (here empty) parameter list.
func validate(cfg optim.Config) error {
	if _, err := optim.New(nil, cfg); err != nil {
		return fmt.Errorf("optgraph: %w", err)
	}
	return nil
}

func elems(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > maxTotal/d) {
			return 0, false
		}
		n *= d
	}
	return n, true
}

func alignUp(n int64) int64 { return (n + Align - 1) / Align * Align }

// Names of the graph's inputs and outputs. Slot inputs are named by the
// slot names of package optim (optim.SlotNames); every updated buffer's
// output is its input's name followed by OutSuffix.
const (
	Params     = "params"
	Grads      = "grads"
	CoeffsName = "coeffs"
	GradNorm   = "grad_norm"
	OutSuffix  = "_out"
)

// Coefficients returns the per-step scalars that the graph's coeffs input
// takes for the step numbered step (1-based: the value optim.Optimizer's
// step counter has after incrementing, that is Steps()+1 before the step)
// at learning rate lr. They are computed in float64, as optim computes its
// own, and rounded to float32 once:
//
//	SGD without momentum:  lr, 1 - lr*wd
//	SGD with momentum:     lr
//	Adam:                  lr/bc1*sqrt(bc2), eps*sqrt(bc2)
//	AdamW:                 lr/bc1*sqrt(bc2), eps*sqrt(bc2), 1 - lr*wd
//
// where bc1 = 1 - beta1^step and bc2 = 1 - beta2^step are Adam's bias
// corrections. optim divides by sqrt(v)/sqrt(bc2) + eps; the graph divides
// by sqrt(v) + eps*sqrt(bc2) and multiplies the step size by sqrt(bc2)
// instead, which is the same quotient with one full-size pass fewer.
func Coefficients(cfg optim.Config, step int64, lr float64) []float32 {
	var k []float64
	switch cfg.Algorithm {
	case optim.SGD:
		k = []float64{lr}
		if cfg.Momentum == 0 {
			k = append(k, 1-lr*cfg.WeightDecay)
		}
	default:
		t := float64(step)
		bc1 := 1 - math.Pow(cfg.Beta1, t)
		sqrtBC2 := math.Sqrt(1 - math.Pow(cfg.Beta2, t))
		k = []float64{lr / bc1 * sqrtBC2, cfg.Eps * sqrtBC2}
		if cfg.Algorithm == optim.AdamW {
			k = append(k, 1-lr*cfg.WeightDecay)
		}
	}
	out := make([]float32, len(k))
	for i, v := range k {
		out[i] = float32(v)
	}
	return out
}

// numCoeffs is the length of Coefficients' result for cfg.
func numCoeffs(cfg optim.Config) int {
	return len(Coefficients(cfg, 1, 0))
}

// Options are Build's choices beyond the optimiser.
type Options struct {
	// GradScale adds the input GradScaleName [1]: the gradients arrive
	// multiplied by a loss scale (mixed precision: float16 gradients
	// underflow otherwise) and the graph multiplies them by this input,
	// 1/scale, before anything reads them. grad_norm is then the unscaled
	// norm, and a scale so large that the scaled gradients overflowed
	// makes it non-finite, which skips the step as any non-finite
	// gradient does: the caller lowers the scale.
	GradScale bool
}

// GradScaleName is the input of Options.GradScale.
const GradScaleName = "grad_scale"

// Build returns the ONNX model (opset 18) of one optimiser step over the
// flat buffers of l.
//
// The graph computes the gradient norm, then runs the update inside an If
// on "norm is finite", whose other branch passes the inputs through. A
// Where per output would do the same at the cost of one more pass over
// every buffer on every step; the If costs one read of a flag on the host.
//
// Weight decay applies to the prefix [0, Decayed) only. The graph views a
// buffer as [Total/Align, Align] rows and multiplies it by a column holding
// one factor per row, built from two Expands: a decayed step costs one
// broadcasting Mul and a column Total/Align long, and the model holds no
// constant that grows with the parameter count.
func Build(l Layout, cfg optim.Config, o Options) (*onnx.Model, error) {
	if err := validate(cfg); err != nil {
		return nil, err
	}
	if l.Total <= 0 || l.Total%Align != 0 || l.Total > maxTotal ||
		l.Decayed < 0 || l.Decayed > l.Total || l.Decayed%Align != 0 {
		return nil, fmt.Errorf("optgraph: layout of %d elements with decayed prefix %d is not aligned to %d", l.Total, l.Decayed, Align)
	}
	const f32 = onnx.Float32
	slots := optim.SlotNames(cfg)
	k := numCoeffs(cfg)

	var ins, outs []*onnx.ValueInfoProto
	for _, name := range append([]string{Params, Grads}, slots...) {
		ins = append(ins, onnx.TensorValueInfo(name, f32, l.Total))
	}
	ins = append(ins, onnx.TensorValueInfo(CoeffsName, f32, int64(k)))
	if o.GradScale {
		ins = append(ins, onnx.TensorValueInfo(GradScaleName, f32, 1))
	}
	state := append([]string{Params}, slots...)
	var stepOuts, skipOuts []*onnx.ValueInfoProto
	for _, name := range state {
		outs = append(outs, onnx.TensorValueInfo(name+OutSuffix, f32, l.Total))
		stepOuts = append(stepOuts, onnx.TensorValueInfo("step/"+name+OutSuffix, f32, l.Total))
		skipOuts = append(skipOuts, onnx.TensorValueInfo("skip/"+name+OutSuffix, f32, l.Total))
	}
	outs = append(outs, onnx.TensorValueInfo(GradNorm, f32, 1))

	// The norm is a square root of a sum of squares: finite exactly when
	// it is below +Inf, a comparison that NaN fails too.
	top := &onnx.Builder{}
	sumSq := top.Op1("ReduceSumSquare", []string{Grads}, onnx.IntAttr("keepdims", 1))
	var norm string
	if o.GradScale {
		norm = top.Node("Mul", GradNorm, []string{top.Op1("Sqrt", []string{sumSq}), GradScaleName})
	} else {
		norm = top.Node("Sqrt", GradNorm, []string{sumSq})
	}
	inf := top.ConstFloat("inf", f32, nil, math.Inf(1))
	finite := top.Node("Less", "finite", []string{norm, inf})

	step := &stepGraph{Builder: &onnx.Builder{Prefix: "step/"}, l: l, cfg: cfg, gradScale: o.GradScale}
	results := step.update(norm, k)
	for i, name := range state {
		step.output(results[i], step.Name(name+OutSuffix))
	}
	skip := &onnx.Builder{Prefix: "skip/"}
	for _, name := range state {
		skip.Node("Identity", name+OutSuffix, []string{name})
	}
	var ifOuts []string
	for _, name := range state {
		ifOuts = append(ifOuts, name+OutSuffix)
	}
	top.Emit("If", "apply_if_finite", []string{finite}, ifOuts,
		graphAttr("then_branch", step.Graph("step", nil, stepOuts)),
		graphAttr("else_branch", skip.Graph("skip", nil, skipOuts)))

	return onnx.NewModel(top.Graph("optimizer_step", ins, outs), 18), nil
}

func graphAttr(name string, g *onnx.GraphProto) *onnx.AttributeProto {
	ty := onnx.AttributeGraph
	return &onnx.AttributeProto{Name: &name, Type: &ty, G: g}
}

// stepGraph builds the update branch.
type stepGraph struct {
	*onnx.Builder
	l         Layout
	cfg       optim.Config
	gradScale bool // multiply the gradients by GradScaleName
}

func (g *stepGraph) op(opType string, in ...string) string { return g.Op1(opType, in) }
func (g *stepGraph) mul(a, b string) string                { return g.op("Mul", a, b) }
func (g *stepGraph) add(a, b string) string                { return g.op("Add", a, b) }
func (g *stepGraph) num(v float64) string {
	return g.ConstFloat("", onnx.Float32, nil, v)
}

// update emits the step and returns the new parameters and slots, in
// optim.SlotNames order. Each comment gives optim's formula; every full-size node
// is one pass over memory.
func (g *stepGraph) update(norm string, k int) []string {
	cfg := g.cfg
	x, gr := Params, Grads
	coeff := []string{CoeffsName}
	if k > 1 {
		coeff = g.Op("Split", []string{CoeffsName}, k, onnx.IntAttr("axis", 0), onnx.IntAttr("num_outputs", int64(k)))
	}
	// Clipping, like clip_grad_norm_: scale = min(1, max/(norm+1e-6)).
	// Empty when there is no clipping, saving the multiplication.
	scale := ""
	if cfg.MaxGradNorm > 0 {
		scale = g.op("Min", g.num(1), g.op("Div", g.num(cfg.MaxGradNorm), g.add(norm, g.num(1e-6))))
	}
	// The loss scale's inverse joins the clipping factor: one scalar
	// product, no pass of its own.
	if g.gradScale {
		if scale == "" {
			scale = GradScaleName
		} else {
			scale = g.mul(scale, GradScaleName)
		}
	}
	scaled := func(by float64) string { // by*scale, a scalar
		if scale == "" {
			return g.num(by)
		}
		if by == 1 {
			return scale
		}
		return g.mul(scale, g.num(by))
	}

	switch {
	case cfg.Algorithm == optim.SGD && cfg.Momentum == 0:
		// x -= lr*(g*scale + wd*x), as x*(1-lr*wd) - (lr*scale)*g.
		lr := coeff[0]
		if scale != "" {
			lr = g.mul(lr, scale)
		}
		if g.l.Decayed > 0 {
			x = g.decay(x, coeff[1], 1)
		}
		return []string{g.op("Sub", x, g.mul(gr, lr))}

	case cfg.Algorithm == optim.SGD:
		// d = g*scale + wd*x; buf = mu*buf + d;
		// d = Nesterov ? d + mu*buf : buf; x -= lr*d.
		d := gr
		if scale != "" {
			d = g.mul(gr, scale)
		}
		if g.l.Decayed > 0 {
			d = g.add(d, g.decay(x, g.num(cfg.WeightDecay), 0))
		}
		mu := g.num(cfg.Momentum)
		buf := g.add(g.mul(optim.SlotMomentum, mu), d)
		if cfg.Nesterov {
			d = g.add(d, g.mul(buf, mu))
		} else {
			d = buf
		}
		return []string{g.op("Sub", x, g.mul(d, coeff[0])), buf}

	default:
		// d = g*scale (+ wd*x for Adam); m = b1*m + (1-b1)*d;
		// v = b2*v + (1-b2)*d*d; x = x*(1-lr*wd) for AdamW;
		// x -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
		// The graph forms e = (1-b1)*d directly, which m adds as it
		// is and v squares after scaling by sqrt(1-b2)/(1-b1), so that
		// d itself needs no pass of its own.
		b1, b2 := cfg.Beta1, cfg.Beta2
		e := g.mul(gr, scaled(1-b1))
		if cfg.Algorithm == optim.Adam && g.l.Decayed > 0 {
			e = g.add(e, g.decay(x, g.num((1-b1)*cfg.WeightDecay), 0))
		}
		m := g.add(g.mul(optim.SlotExpAvg, g.num(b1)), e)
		r := g.mul(e, g.num(math.Sqrt(1-b2)/(1-b1)))
		v := g.add(g.mul(optim.SlotExpAvgSq, g.num(b2)), g.mul(r, r))
		if cfg.Algorithm == optim.AdamW && g.l.Decayed > 0 {
			x = g.decay(x, coeff[2], 1)
		}
		den := g.add(g.op("Sqrt", v), coeff[1])
		return []string{g.op("Sub", x, g.mul(g.op("Div", m, den), coeff[0])), m, v}
	}
}

// decay returns x times a factor per element: decayed (a scalar tensor) on
// the prefix [0, Decayed), other on the rest. Callers call it only when
// the prefix is not empty.
func (g *stepGraph) decay(x, decayed string, other float64) string {
	l := g.l
	if l.Decayed == l.Total {
		return g.mul(x, decayed)
	}
	col := func(v string, rows int64) string {
		return g.op("Expand", v, g.ConstInt64("", []int64{2}, rows, 1))
	}
	factor := g.Op1("Concat", []string{col(decayed, l.Decayed/Align), col(g.num(other), (l.Total-l.Decayed)/Align)}, onnx.IntAttr("axis", 0))
	rows := g.op("Reshape", x, g.ConstInt64("", []int64{2}, -1, Align))
	return g.op("Reshape", g.mul(rows, factor), g.ConstInt64("", []int64{1}, l.Total))
}

// output makes the branch output name hold result: the node computing
// result writes name instead, so that no copying Identity is needed.
func (g *stepGraph) output(result, name string) {
	produced := slices.ContainsFunc(*g.Nodes, func(n *onnx.NodeProto) bool {
		return slices.Contains(n.Output, result)
	})
	if !produced { // an outer value passed through
		g.Emit("Identity", name, []string{result}, []string{name})
		return
	}
	for _, n := range *g.Nodes {
		for _, names := range [][]string{n.Input, n.Output} {
			for i, s := range names {
				if s == result {
					names[i] = name
				}
			}
		}
	}
}
