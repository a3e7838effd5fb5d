// Package gradcheck verifies the gradients of segtune's training graphs by
// finite differences through ONNX Runtime.
//
// Check compiles a model with grad.Build, runs the training graph once for
// the analytic gradients, and compares their projection on random
// directions v with central differences (f(θ+hv) − f(θ−hv)) / 2h of the
// objective f = loss + Σ_t ⟨r_t, t⟩ (r_t: the values fed to the extra
// upstream-gradient inputs) evaluated with the evaluation graph. The graphs
// run in float64 when ONNX Runtime has double kernels for every operator,
// otherwise in float32 with a larger relative step. Whole networks, full of
// ReLU kinks, are checked with Options.FreezeKinks (see FreezeKinks), which
// keeps float32 differences exact. CheckGraphs checks graphs compiled
// beforehand, so tests can show that an altered gradient is rejected.
package gradcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Options tunes a check; zero values pick the defaults.
type Options struct {
	// Directions is the number of random directions (default 3).
	Directions int
	// Step is h relative to each parameter's RMS (default 1e-4 in float64,
	// 5e-2 in float32).
	Step float64
	// Seed seeds the directions and generated inputs.
	Seed uint64
	// Float32 forces float32 even where float64 would run.
	Float32 bool
	// Threads is ONNX Runtime's thread count (0: default).
	Threads int
	// FreezeKinks takes the differences on the evaluation graph with every
	// Relu, Clip, LeakyRelu, HardSigmoid and MaxPool frozen on the linear
	// piece it is on at θ (see FreezeKinks): same value and gradient at θ,
	// but smooth, so whole networks can be checked tightly in float32.
	// Where the objective is then affine in the parameters (one weight
	// tensor of a network without multiplicative gating), Step can be 1.
	FreezeKinks bool
}

// Direction is one comparison.
type Direction struct {
	Analytic, Numeric, RelErr float64
}

// Result reports a check.
type Result struct {
	Float64    bool
	Directions []Direction
	MaxRelErr  float64
	Graphs     *grad.Graphs
}

// Check compares analytic and numerical gradients of m compiled with cfg.
// feeds supplies model inputs and the target; missing float inputs get
// standard normal values, a missing target gets uniform class indices, and
// missing upstream-gradient inputs get standard normal values. A nil
// cfg.Prober probes shapes in ONNX Runtime (ortprobe.Prober).
func Check(m *onnx.Model, cfg grad.Config, feeds map[string]*runtime.Tensor, opt Options) (*Result, error) {
	for _, t := range cfg.GradInputs {
		if !slices.Contains(cfg.ExtraOutputs, t) {
			cfg.ExtraOutputs = append(cfg.ExtraOutputs, t)
		}
	}
	if cfg.Prober == nil {
		cfg.Prober = ortprobe.Prober{Threads: opt.Threads}
	}
	gs, err := grad.Build(m, cfg)
	if err != nil {
		return nil, err
	}
	return CheckGraphs(gs, feeds, opt)
}

// ScaleGradient multiplies the training graph's gradient output of param
// by k: a wrong gradient, for negative controls that CheckGraphs must
// reject. It changes gs in place.
func ScaleGradient(gs *grad.Graphs, param string, k float64) {
	g := gs.Training.Proto.Graph
	out := grad.GradPrefix + param
	for _, n := range g.Node {
		for j, o := range n.Output {
			if o == out {
				n.Output[j] = out + "/unscaled"
			}
		}
	}
	dt := onnx.Float32
	for _, p := range gs.Params {
		if p.GetName() == param {
			dt = onnx.DataType(p.GetDataType())
		}
	}
	b := &onnx.Builder{Nodes: &g.Node, Inits: &g.Initializer}
	b.Emit("Mul", out+"/scale", []string{out + "/unscaled", b.ConstFloat(out+"/k", dt, nil, k)}, []string{out})
}

// CheckGraphs is Check on graphs already compiled (the graphs of a
// grad.Build whose Config lists every GradInputs tensor in ExtraOutputs);
// tests use it to verify that altered gradients are rejected.
func CheckGraphs(gs *grad.Graphs, feeds map[string]*runtime.Tensor, opt Options) (*Result, error) {
	if opt.Directions <= 0 {
		opt.Directions = 3
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x5eed))
	res := &Result{Graphs: gs}
	train, eval, f64, err := openPair(gs, opt)
	if err != nil {
		return nil, err
	}
	defer train.Close()
	defer func() { eval.Close() }()
	res.Float64 = f64
	ck, err := newChecker(gs, feeds, f64, rng)
	if err != nil {
		return nil, err
	}
	if opt.FreezeKinks {
		fz, err := FreezeKinks(gs.Eval, f64, func(pm *onnx.Model) (map[string]*runtime.Tensor, error) {
			s, err := openModel(pm, f64, opt)
			if err != nil {
				return nil, err
			}
			defer s.Close()
			return ck.run(s, ck.vals)
		})
		if err != nil {
			return nil, err
		}
		s, err := openModel(fz, f64, opt)
		if err != nil {
			return nil, fmt.Errorf("frozen evaluation graph: %w", err)
		}
		eval.Close()
		eval = s
	}
	tOut, err := ck.run(train, ck.vals)
	if err != nil {
		return nil, fmt.Errorf("training graph: %w", err)
	}
	step := opt.Step
	if step == 0 {
		step = 1e-4
		if !f64 {
			// float32 rounding dominates: a larger step keeps it small against
			// the difference; most ops without double kernels (Conv, Resize,
			// pools) are linear in each input, so truncation error is nil there.
			step = 5e-2
		}
	}
	for d := 0; d < opt.Directions; d++ {
		dir, err := ck.direction(eval, tOut, step, rng)
		if err != nil {
			return nil, err
		}
		res.Directions = append(res.Directions, dir)
		res.MaxRelErr = math.Max(res.MaxRelErr, dir.RelErr)
	}
	return res, nil
}

// checker runs a pair of graphs at given parameter values, the other
// inputs fixed.
type checker struct {
	gs     *grad.Graphs
	f64    bool
	vals   map[string][]float64 // the parameters' values
	shapes map[string][]int64
	fixed  map[string]*runtime.Tensor // every other input
}

// newChecker reads the parameters' values and fixes the other inputs:
// feeds' where given, generated from rng otherwise.
func newChecker(gs *grad.Graphs, feeds map[string]*runtime.Tensor, f64 bool, rng *rand.Rand) (*checker, error) {
	ck := &checker{gs: gs, f64: f64, vals: map[string][]float64{}, shapes: map[string][]int64{}, fixed: map[string]*runtime.Tensor{}}
	for _, p := range gs.Params {
		v, err := onnx.Float64s(p)
		if err != nil {
			return nil, err
		}
		ck.vals[p.GetName()] = v
		ck.shapes[p.GetName()] = p.GetDims()
	}
	for _, spec := range gs.Manifest.Training.Inputs {
		if _, isParam := ck.vals[spec.Name]; isParam {
			continue
		}
		t, ok := feeds[spec.Name]
		if !ok {
			t = generate(spec, gs, rng)
		}
		ck.fixed[spec.Name] = convert(t, f64)
	}
	return ck, nil
}

// run runs s with the parameters at params and returns its outputs by name.
func (ck *checker) run(s *runtime.Session, params map[string][]float64) (map[string]*runtime.Tensor, error) {
	in := make([]*runtime.Tensor, len(s.Inputs))
	for i, x := range s.Inputs {
		if v, ok := params[x.Name]; ok {
			in[i] = convert(runtime.NewFloat64(ck.shapes[x.Name], v), ck.f64)
		} else if t, ok := ck.fixed[x.Name]; ok {
			in[i] = t
		} else {
			return nil, fmt.Errorf("no value for input %q", x.Name)
		}
	}
	outs, err := s.Run(in...)
	if err != nil {
		return nil, err
	}
	m := map[string]*runtime.Tensor{}
	for i, o := range s.Outputs {
		m[o.Name] = outs[i]
	}
	return m, nil
}

// objective is the scalar whose gradient the training graph computes: the
// loss plus each gradient input's product with its tensor.
func (ck *checker) objective(outs map[string]*runtime.Tensor) float64 {
	var f float64
	if ck.gs.Manifest.Loss != "" {
		f += floats(outs[ck.gs.Manifest.Loss])[0]
	}
	for _, gi := range ck.gs.Manifest.GradInputs {
		r, t := floats(ck.fixed[gi.Input]), floats(outs[gi.Tensor])
		for i := range r {
			f += r[i] * t[i]
		}
	}
	return f
}

// direction compares the gradient along one random direction (each
// parameter's step scaled by its RMS) with the central difference of the
// objective through eval.
func (ck *checker) direction(eval *runtime.Session, tOut map[string]*runtime.Tensor, step float64, rng *rand.Rand) (Direction, error) {
	plus, minus := map[string][]float64{}, map[string][]float64{}
	var analytic float64
	for _, pi := range ck.gs.Manifest.Params {
		v := ck.vals[pi.Name]
		g := floats(tOut[pi.Grad])
		h := step * math.Max(rms(v), 1e-2)
		pv, mv := make([]float64, len(v)), make([]float64, len(v))
		for i := range v {
			dir := rng.NormFloat64()
			analytic += g[i] * dir * h
			pv[i], mv[i] = v[i]+h*dir, v[i]-h*dir
		}
		plus[pi.Name], minus[pi.Name] = pv, mv
	}
	po, err := ck.run(eval, plus)
	if err != nil {
		return Direction{}, fmt.Errorf("evaluation graph: %w", err)
	}
	mo, err := ck.run(eval, minus)
	if err != nil {
		return Direction{}, fmt.Errorf("evaluation graph: %w", err)
	}
	numeric := (ck.objective(po) - ck.objective(mo)) / 2
	den := math.Max(math.Max(math.Abs(analytic), math.Abs(numeric)), 1e-300)
	rel := math.Abs(analytic-numeric) / den
	if analytic == 0 && numeric == 0 {
		rel = 0
	}
	return Direction{Analytic: analytic, Numeric: numeric, RelErr: rel}, nil
}

// openModel opens a session on m, converted to float64 when f64. Sessions
// of a check register ConvGrad's CPU kernel (float and double), so that
// graphs compiled with grad.Config.ConvGrad are checked like any other.
func openModel(m *onnx.Model, f64 bool, opt Options) (*runtime.Session, error) {
	if f64 {
		m = onnx.ToFloat64(m)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	return runtime.NewSession(data, runtime.Options{Threads: opt.Threads, NoOptimize: true, ConvGradCPU: true})
}

// openPair opens sessions on the training and evaluation graphs, in float64
// when possible.
func openPair(gs *grad.Graphs, opt Options) (train, eval *runtime.Session, f64 bool, err error) {
	open := func(m *onnx.Model) (*runtime.Session, error) {
		data, err := m.Marshal()
		if err != nil {
			return nil, err
		}
		return runtime.NewSession(data, runtime.Options{Threads: opt.Threads, NoOptimize: true, ConvGradCPU: true})
	}
	if !opt.Float32 {
		t, err1 := open(onnx.ToFloat64(gs.Training))
		if err1 == nil {
			e, err2 := open(onnx.ToFloat64(gs.Eval))
			if err2 == nil {
				return t, e, true, nil
			}
			t.Close()
		}
	}
	t, err := open(gs.Training)
	if err != nil {
		return nil, nil, false, fmt.Errorf("training graph: %w", err)
	}
	e, err := open(gs.Eval)
	if err != nil {
		t.Close()
		return nil, nil, false, fmt.Errorf("evaluation graph: %w", err)
	}
	return t, e, false, nil
}

func generate(spec grad.TensorSpec, gs *grad.Graphs, rng *rand.Rand) *runtime.Tensor {
	n := 1
	for _, d := range spec.Shape {
		n *= int(d)
	}
	if spec.Type == "int64" {
		classes := int64(2)
		for _, o := range gs.Manifest.Eval.Outputs { // the training graph may omit the model outputs
			if len(gs.Manifest.ModelOutputs) > 0 && o.Name == gs.Manifest.ModelOutputs[0] && len(o.Shape) > 1 {
				classes = o.Shape[1]
			}
		}
		if gs.Manifest.Classes > 0 {
			classes = gs.Manifest.Classes
			if gs.Manifest.LossKind == "sigmoid_bce" {
				classes++ // 0 is background
			}
		}
		v := make([]int64, n)
		for i := range v {
			v[i] = rng.Int64N(classes)
		}
		return runtime.NewInt64(spec.Shape, v)
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return runtime.NewFloat64(spec.Shape, v)
}

// convert returns t as float64 or float32 (integer tensors unchanged).
func convert(t *runtime.Tensor, f64 bool) *runtime.Tensor {
	if t.Int64 != nil {
		return t
	}
	v := floats(t)
	if f64 {
		return runtime.NewFloat64(t.Shape, v)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return runtime.NewFloat32(t.Shape, f)
}

func floats(t *runtime.Tensor) []float64 {
	if t == nil {
		return nil
	}
	if t.Float64 != nil {
		return t.Float64
	}
	out := make([]float64, len(t.Float32))
	for i, x := range t.Float32 {
		out[i] = float64(x)
	}
	return out
}

func rms(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	if len(v) == 0 {
		return 0
	}
	return math.Sqrt(s / float64(len(v)))
}
