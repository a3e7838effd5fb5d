package optgraph

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// specs are a small network's parameters with odd sizes, so that padding
// lies between them: a conv weight, its bias, a scalar, a one-element
// vector, a fully connected weight and a norm scale.
var specs = []Spec{
	{"conv.weight", []int64{5, 3, 3, 3}},
	{"conv.bias", []int64{5}},
	{"temperature", nil},
	{"gate", []int64{1}},
	{"fc.weight", []int64{7, 11}},
	{"norm.scale", []int64{13}},
}

// cases cover every branch of Build: each algorithm with and without
// decay, a decayed prefix that is part or all of the buffer, and clipping.
var cases = []struct {
	name string
	cfg  func() optim.Config
}{
	{"sgd", func() optim.Config { c := optim.DefaultConfig(optim.SGD); c.Momentum = 0; return c }},
	{"sgd-decay", func() optim.Config {
		c := optim.DefaultConfig(optim.SGD)
		c.Momentum, c.WeightDecay, c.NoDecay = 0, 1e-2, optim.NoDecayVectors
		return c
	}},
	{"sgd-clip", func() optim.Config {
		c := optim.DefaultConfig(optim.SGD)
		c.Momentum, c.MaxGradNorm = 0, 0.5
		return c
	}},
	{"momentum", func() optim.Config { return optim.DefaultConfig(optim.SGD) }},
	{"nesterov", func() optim.Config { c := optim.DefaultConfig(optim.SGD); c.Nesterov = true; return c }},
	{"momentum-decay", func() optim.Config {
		c := optim.DefaultConfig(optim.SGD)
		c.WeightDecay, c.NoDecay = 1e-2, optim.NoDecayVectors
		return c
	}},
	{"nesterov-decay-clip", func() optim.Config {
		c := optim.DefaultConfig(optim.SGD)
		c.Nesterov, c.WeightDecay, c.NoDecay, c.MaxGradNorm = true, 1e-2, optim.NoDecayVectors, 0.5
		return c
	}},
	{"adam-decay", func() optim.Config { c := optim.DefaultConfig(optim.Adam); c.WeightDecay = 1e-2; return c }},
	{"adam-decay-vectors-clip", func() optim.Config {
		c := optim.DefaultConfig(optim.Adam)
		c.WeightDecay, c.NoDecay, c.MaxGradNorm = 1e-2, optim.NoDecayVectors, 0.5
		return c
	}},
	{"adamw", func() optim.Config { c := optim.DefaultConfig(optim.AdamW); c.NoDecay = optim.NoDecayVectors; return c }},
	{"adamw-all-clip", func() optim.Config {
		c := optim.DefaultConfig(optim.AdamW)
		c.MaxGradNorm = 0.5
		return c
	}},
	{"adamw-vectors-clip", func() optim.Config {
		c := optim.DefaultConfig(optim.AdamW)
		c.NoDecay, c.MaxGradNorm = optim.NoDecayVectors, 0.5
		return c
	}},
}

// tol bounds the difference from package optim after 20 steps. The data
// are scaled (weights about 0.5, gradients about 0.1) so that it is a few
// float32 roundings of the values involved.
const tol = 1e-6

// harness runs the graph and package optim side by side on the same data.
type harness struct {
	t    *testing.T
	cfg  optim.Config
	l    Layout
	s    *runtime.Session
	o    *optim.Optimizer
	ps   []*optim.Param
	bufs map[string][]float32 // graph inputs by name: params, grads, slots
	rng  *rand.Rand
	// lossScale, when not 0, multiplies the graph's gradients (not
	// optim's), and the graph gets its inverse (Options.GradScale).
	lossScale float32
}

func newHarness(t *testing.T, cfg optim.Config, seed uint64) *harness {
	return newScaledHarness(t, cfg, seed, 0)
}

func newScaledHarness(t *testing.T, cfg optim.Config, seed uint64, lossScale float32) *harness {
	t.Helper()
	runtimetest.Require(t)
	l, err := NewLayout(specs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(l, cfg, Options{GradScale: lossScale != 0})
	if err != nil {
		t.Fatal(err)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := &harness{t: t, cfg: cfg, l: l, s: s, rng: rand.New(rand.NewPCG(seed, 7)), bufs: map[string][]float32{}, lossScale: lossScale}
	for _, name := range append([]string{Params, Grads}, optim.SlotNames(cfg)...) {
		h.bufs[name] = make([]float32, l.Total)
	}
	for _, sl := range l.Slots {
		p := &optim.Param{Name: sl.Name, Shape: sl.Shape, Data: make([]float32, sl.Len), Grad: make([]float32, sl.Len)}
		for i := range p.Data {
			p.Data[i] = float32(h.rng.NormFloat64() * 0.5)
		}
		copy(h.bufs[Params][sl.Offset:], p.Data)
		h.ps = append(h.ps, p)
	}
	if h.o, err = optim.New(h.ps, cfg); err != nil {
		t.Fatal(err)
	}
	return h
}

// gradients draws fresh gradients into the optimiser's parameters and the
// flat buffer.
func (h *harness) gradients() {
	for i, sl := range h.l.Slots {
		g := h.ps[i].Grad
		for j := range g {
			g[j] = float32(h.rng.NormFloat64() * 0.1)
		}
		copy(h.bufs[Grads][sl.Offset:], g)
		if h.lossScale != 0 {
			for j := range g {
				h.bufs[Grads][sl.Offset+int64(j)] *= h.lossScale
			}
		}
	}
}

// setGrad sets element i of the named parameter's gradient in both.
func (h *harness) setGrad(name string, i int, v float32) {
	p := slices.IndexFunc(h.ps, func(p *optim.Param) bool { return p.Name == name })
	h.ps[p].Grad[i] = v
	h.bufs[Grads][h.l.Slots[p].Offset+int64(i)] = v
}

// run runs the graph for the next step at learning rate lr and returns its
// outputs by name, without adopting them.
func (h *harness) run(lr float64) map[string][]float32 {
	h.t.Helper()
	k := Coefficients(h.cfg, h.o.Steps()+1, lr)
	var in []*runtime.Tensor
	for _, info := range h.s.Inputs {
		if info.Name == CoeffsName {
			in = append(in, runtime.NewFloat32([]int64{int64(len(k))}, k))
			continue
		}
		if info.Name == GradScaleName {
			in = append(in, runtime.NewFloat32([]int64{1}, []float32{1 / h.lossScale}))
			continue
		}
		b, ok := h.bufs[info.Name]
		if !ok {
			h.t.Fatalf("unexpected graph input %q", info.Name)
		}
		in = append(in, runtime.NewFloat32([]int64{h.l.Total}, b))
	}
	res, err := h.s.Run(in...)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]float32{}
	for i, info := range h.s.Outputs {
		out[info.Name] = res[i].Float32
	}
	return out
}

// adopt makes the graph's outputs the next step's inputs.
func (h *harness) adopt(out map[string][]float32) {
	for _, name := range append([]string{Params}, optim.SlotNames(h.cfg)...) {
		h.bufs[name] = out[name+OutSuffix]
	}
}

// step takes one finite step in both and checks the gradient norm.
func (h *harness) step(lr float64) {
	h.t.Helper()
	out := h.run(lr)
	if err := h.o.Step(lr); err != nil {
		h.t.Fatal(err)
	}
	h.adopt(out)
	got, want := float64(out[GradNorm][0]), h.o.GradNorm()
	if math.Abs(got-want) > 1e-5*want {
		h.t.Fatalf("step %d: grad_norm %v, optim's %v", h.o.Steps(), got, want)
	}
}

// compare checks every parameter and moment against optim's within tol and
// the padding for exact zeros, and returns the largest difference.
func (h *harness) compare() float64 {
	h.t.Helper()
	worst := 0.0
	check := func(what string, got, want []float32) {
		for i := range want {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if !(d <= tol) {
				h.t.Fatalf("%s[%d] = %v, optim has %v (off by %g)", what, i, got[i], want[i], d)
			}
			worst = max(worst, d)
		}
	}
	state := map[[2]string][]float32{}
	for _, b := range h.o.State().Buffers {
		state[[2]string{b.Param, b.Slot}] = b.Data
	}
	for i, sl := range h.l.Slots {
		check(sl.Name, h.bufs[Params][sl.Offset:sl.Offset+sl.Len], h.ps[i].Data)
		for _, slot := range optim.SlotNames(h.cfg) {
			check(sl.Name+"."+slot, h.bufs[slot][sl.Offset:sl.Offset+sl.Len], state[[2]string{sl.Name, slot}])
		}
	}
	for name, b := range h.bufs {
		if name == Grads {
			continue
		}
		for i, v := range b {
			if !h.l.inside(int64(i)) && math.Float32bits(v) != 0 {
				h.t.Fatalf("%s: padding element %d is %v", name, i, v)
			}
		}
	}
	return worst
}

func (l Layout) inside(i int64) bool {
	for _, s := range l.Slots {
		if i >= s.Offset && i < s.Offset+s.Len {
			return true
		}
	}
	return false
}

// schedule is a learning rate that changes every step: a cosine decay
// from base with a short warm-up.
func schedule(cfg optim.Config, step int) float64 {
	base := 0.1
	if cfg.Algorithm != optim.SGD {
		base = 0.01
	}
	if step < 3 {
		return base * float64(step+1) / 3
	}
	return base * (0.55 + 0.45*math.Cos(math.Pi*float64(step)/20))
}

func TestMatchesOptim(t *testing.T) {
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg()
			h := newHarness(t, cfg, uint64(ci))
			clipped := 0
			for step := range 20 {
				h.gradients()
				h.step(schedule(cfg, step))
				if cfg.MaxGradNorm > 0 && h.o.GradNorm() > cfg.MaxGradNorm {
					clipped++
				}
			}
			if cfg.MaxGradNorm > 0 && clipped == 0 {
				t.Fatal("clipping never applied: the test does not exercise it")
			}
			t.Logf("max difference from optim after 20 steps: %.3g (params and moments)", h.compare())
		})
	}
}

// TestGradScale: gradients that arrive multiplied by a loss scale (a power
// of two, as loss scaling uses) are unscaled by the graph: the steps and
// the reported norm are optim's on the unscaled gradients; and a scale
// that overflows float32 makes the norm infinite, which skips the step.
func TestGradScale(t *testing.T) {
	for ci, c := range cases {
		if !slices.Contains([]string{"momentum", "adamw-vectors-clip", "sgd-clip"}, c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg()
			h := newScaledHarness(t, cfg, uint64(200+ci), 1024)
			for step := range 20 {
				h.gradients()
				h.step(schedule(cfg, step))
			}
			t.Logf("max difference from optim after 20 scaled steps: %.3g", h.compare())
			h.lossScale = 1e38 // the scaled gradients overflow
			h.gradients()
			out := h.run(0.01)
			if n := float64(out[GradNorm][0]); !math.IsInf(n, 0) && !math.IsNaN(n) {
				t.Fatalf("overflowed gradients: grad_norm %v, want non-finite", n)
			}
			if !slices.Equal(out[Params+OutSuffix], h.bufs[Params]) {
				t.Fatal("an overflowed step changed the parameters")
			}
		})
	}
}

// TestNonFiniteGradient: a NaN or an infinity in the gradients leaves every
// output equal to its input bit for bit, as optim refuses the step; the
// next finite step then proceeds as optim's does, with the same step count.
func TestNonFiniteGradient(t *testing.T) {
	for ci, c := range cases {
		if !slices.Contains([]string{"nesterov-decay-clip", "adam-decay-vectors-clip", "adamw"}, c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg()
			h := newHarness(t, cfg, uint64(100+ci))
			lr := 0
			for range 3 {
				h.gradients()
				h.step(schedule(cfg, lr))
				lr++
			}
			// A negative zero tells a pass-through from x - 0.
			h.ps[0].Data[1] = float32(math.Copysign(0, -1))
			h.bufs[Params][h.l.Slots[0].Offset+1] = h.ps[0].Data[1]
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
				h.gradients()
				h.setGrad("fc.weight", 3, bad)
				out := h.run(schedule(cfg, lr))
				if n := float64(out[GradNorm][0]); !math.IsNaN(n) && !math.IsInf(n, 0) {
					t.Fatalf("grad_norm %v with a %v gradient", n, bad)
				}
				for _, name := range append([]string{Params}, optim.SlotNames(cfg)...) {
					got, in := out[name+OutSuffix], h.bufs[name]
					for i := range in {
						if math.Float32bits(got[i]) != math.Float32bits(in[i]) {
							t.Fatalf("%v gradient: %s[%d] = %v, input %v", bad, name+OutSuffix, i, got[i], in[i])
						}
					}
				}
				if err := h.o.Step(schedule(cfg, lr)); !errors.Is(err, optim.ErrNonFiniteGrad) {
					t.Fatalf("optim accepted a %v gradient: %v", bad, err)
				}
			}
			for range 3 {
				h.gradients()
				h.step(schedule(cfg, lr))
				lr++
			}
			if h.o.Steps() != 6 {
				t.Fatalf("optim counted %d steps", h.o.Steps())
			}
			t.Logf("max difference from optim after the refused steps: %.3g", h.compare())
		})
	}
}

func TestLayout(t *testing.T) {
	cfg := optim.DefaultConfig(optim.AdamW)
	cfg.NoDecay = optim.NoDecayVectors
	l, err := NewLayout(specs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	end := int64(0)
	for i, s := range l.Slots {
		names = append(names, s.Name)
		if s.Offset%Align != 0 || s.Offset < end {
			t.Errorf("%s at %d: not aligned or overlapping the previous end %d", s.Name, s.Offset, end)
		}
		if n, _ := elems(specs[slices.IndexFunc(specs, func(p Spec) bool { return p.Name == s.Name })].Shape); s.Len != n {
			t.Errorf("%s has length %d, want %d", s.Name, s.Len, n)
		}
		if s.Decay != (len(s.Shape) > 1) {
			t.Errorf("%s: decay %v", s.Name, s.Decay)
		}
		if s.Decay && s.Offset+s.Len > l.Decayed || !s.Decay && s.Offset < l.Decayed {
			t.Errorf("%s [%d, %d) on the wrong side of the decayed prefix %d", s.Name, s.Offset, s.Offset+s.Len, l.Decayed)
		}
		if i > 0 && s.Decay && !l.Slots[i-1].Decay {
			t.Errorf("decayed %s after an undecayed parameter", s.Name)
		}
		end = s.Offset + s.Len
	}
	want := []string{"conv.weight", "fc.weight", "conv.bias", "temperature", "gate", "norm.scale"}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	if l.Decayed != 192+128 || l.Total%Align != 0 || l.Total < end || l.Total >= end+Align {
		t.Errorf("Decayed %d, Total %d, last end %d", l.Decayed, l.Total, end)
	}

	// Without decay nothing is decayed, whatever NoDecay says.
	l, err = NewLayout(specs, optim.DefaultConfig(optim.Adam))
	if err != nil || l.Decayed != 0 || l.Slots[0].Name != "conv.weight" {
		t.Errorf("no decay: %+v, %v", l, err)
	}
	// Empty tensors take no room; the buffers still have one block.
	l, err = NewLayout([]Spec{{"a", []int64{0}}, {"b", []int64{3, 0}}}, cfg)
	if err != nil || l.Total != Align || l.Slots[1].Offset != 0 {
		t.Errorf("empty tensors: %+v, %v", l, err)
	}

	bad := optim.DefaultConfig(optim.SGD)
	bad.Momentum = 1.5
	for _, tc := range []struct {
		params []Spec
		cfg    optim.Config
		want   string
	}{
		{nil, cfg, "no parameters"},
		{[]Spec{{"a", nil}, {"b", nil}, {"a", []int64{2}}}, cfg, `duplicate parameter "a"`},
		{[]Spec{{"", nil}}, cfg, "no name"},
		{[]Spec{{"a", []int64{2, -1}}}, cfg, "bad shape"},
		{[]Spec{{"a", []int64{1 << 30, 1 << 30, 1 << 30}}}, cfg, "bad shape"},
		{specs, bad, "momentum"},
		{specs, optim.Config{Algorithm: "lion"}, "unknown algorithm"},
	} {
		if _, err := NewLayout(tc.params, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewLayout(%v): error %v, want one saying %q", tc.params, err, tc.want)
		}
	}
	if _, err := Build(Layout{Total: 100}, cfg, Options{}); err == nil {
		t.Error("Build accepted a layout of 100 elements")
	}
	if _, err := Build(Layout{Total: 128, Decayed: 192}, cfg, Options{}); err == nil {
		t.Error("Build accepted a decayed prefix longer than the buffer")
	}
	if _, err := Build(Layout{Total: 128}, bad, Options{}); err == nil {
		t.Error("Build accepted an invalid configuration")
	}
}

func TestCoefficients(t *testing.T) {
	adam := optim.DefaultConfig(optim.AdamW)
	k := Coefficients(adam, 3, 0.01)
	bc1, bc2 := 1-math.Pow(0.9, 3), 1-math.Pow(0.999, 3)
	want := []float32{float32(0.01 / bc1 * math.Sqrt(bc2)), float32(1e-8 * math.Sqrt(bc2)), float32(1 - 0.01*0.01)}
	if !slices.Equal(k, want) {
		t.Errorf("AdamW step 3: %v, want %v", k, want)
	}
	for _, c := range cases {
		cfg := c.cfg()
		m, err := Build(Layout{Total: Align}, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		in := m.Graph().Input[len(m.Graph().Input)-1]
		n := in.GetType().GetTensorType().GetShape().GetDim()[0].GetDimValue()
		if in.GetName() != CoeffsName || n != int64(len(Coefficients(cfg, 1, 0.1))) {
			t.Errorf("%s: graph takes %s[%d], Coefficients gives %d", c.name, in.GetName(), n, len(Coefficients(cfg, 1, 0.1)))
		}
	}
}

// TestGraphIsSmall bounds the nodes and the full-size passes of each graph
// (measured, so that a change which adds passes is noticed) and checks that
// the model holds no constant that grows with the parameters: a model for
// ten million parameters is a few kilobytes.
func TestGraphIsSmall(t *testing.T) {
	limits := map[optim.Algorithm]struct{ nodes, passes int }{
		optim.SGD:   {23, 10},
		optim.Adam:  {31, 15},
		optim.AdamW: {30, 14},
	}
	big := []Spec{{"w", []int64{1000, 10000}}, {"b", []int64{1001}}}
	for _, c := range cases {
		cfg := c.cfg()
		l, err := NewLayout(big, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Build(l, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 8<<10 {
			t.Errorf("%s: model of %d bytes", c.name, len(data))
		}
		if v := m.Proto.GetOpsetImport()[0].GetVersion(); v != 18 {
			t.Errorf("%s: opset %d", c.name, v)
		}
		nodes, passes, maxInit := measure(m.Graph(), append([]string{Params, Grads}, optim.SlotNames(cfg)...))
		t.Logf("%-24s %2d nodes, %2d full-size passes", c.name, nodes, passes)
		lim := limits[cfg.Algorithm]
		if nodes > lim.nodes || passes > lim.passes {
			t.Errorf("%s: %d nodes and %d passes, over the measured %d and %d", c.name, nodes, passes, lim.nodes, lim.passes)
		}
		if maxInit > 2 {
			t.Errorf("%s: an initializer holds %d elements", c.name, maxInit)
		}
	}
}

// measure counts the nodes of g and its subgraphs, the nodes that pass over
// a full-size buffer (reading one, Reshapes aside, which are views) on the
// path of a finite step, and the largest initializer's element count.
func measure(g *onnx.GraphProto, full []string) (nodes, passes, maxInit int) {
	isFull := map[string]bool{}
	for _, f := range full {
		isFull[f] = true
	}
	var walk func(g *onnx.GraphProto, counted bool)
	walk = func(g *onnx.GraphProto, counted bool) {
		for _, init := range g.GetInitializer() {
			n := 1
			for _, d := range init.GetDims() {
				n *= int(d)
			}
			maxInit = max(maxInit, n)
		}
		for _, n := range g.GetNode() {
			nodes++
			reads := slices.ContainsFunc(n.GetInput(), func(s string) bool { return isFull[s] })
			if reads && n.GetOpType() != "Reshape" && counted {
				passes++
			}
			if reads && n.GetOpType() != "ReduceSumSquare" {
				for _, o := range n.GetOutput() {
					isFull[o] = true
				}
			}
			for _, a := range n.GetAttribute() {
				if a.GetG() != nil {
					walk(a.GetG(), counted && a.GetName() != "else_branch")
				}
			}
		}
	}
	walk(g, true)
	return nodes, passes, maxInit
}
