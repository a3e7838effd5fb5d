package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

func near(t *testing.T, what string, got float32, want, tol float64) {
	t.Helper()
	if d := math.Abs(float64(got) - want); d > tol*math.Max(1, math.Abs(want)) || math.IsNaN(float64(got)) {
		t.Errorf("%s = %.9g, want %.9g (diff %.3g)", what, got, want, d)
	}
}

func scalar(v, g float32) *Param {
	return &Param{Name: "w", Shape: []int64{1, 1}, Data: []float32{v}, Grad: []float32{g}}
}

// Hand-computed with PyTorch's SGD rule: d = g + wd*p; buf = mu*buf + d
// (buf = d at step 1); p -= lr*buf, or p -= lr*(d + mu*buf) for Nesterov.
func TestSGDHandComputed(t *testing.T) {
	cfg := DefaultConfig(SGD)
	cfg.WeightDecay = 0.01
	p := scalar(1, 0.5)
	o, err := New([]*Param{p}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Step(0.1); err != nil {
		t.Fatal(err)
	}
	// d = 0.5 + 0.01 = 0.51; buf = 0.51; p = 1 - 0.051.
	near(t, "step 1", p.Data[0], 0.949, 1e-7)
	if err := o.Step(0.1); err != nil {
		t.Fatal(err)
	}
	// d = 0.5 + 0.01*0.949 = 0.50949; buf = 0.9*0.51 + 0.50949 = 0.96849.
	near(t, "step 2", p.Data[0], 0.949-0.1*0.96849, 1e-7)

	cfg.Nesterov = true
	p = scalar(1, 0.5)
	o, _ = New([]*Param{p}, cfg)
	o.Step(0.1)
	// buf = 0.51; d = 0.51 + 0.9*0.51 = 0.969.
	near(t, "nesterov step 1", p.Data[0], 1-0.0969, 1e-7)
	o.Step(0.1)
	// p = 0.9031; d = 0.5 + 0.009031 = 0.509031; buf = 0.459 + 0.509031.
	buf := 0.9*0.51 + 0.509031
	near(t, "nesterov step 2", p.Data[0], 0.9031-0.1*(0.509031+0.9*buf), 1e-7)
}

// Hand-computed with PyTorch's Adam: after one step the update is
// lr*g/(|g|+eps) whatever the betas, because bias correction undoes the
// moment decay exactly.
func TestAdamHandComputed(t *testing.T) {
	cfg := DefaultConfig(Adam)
	p := scalar(1, 0.5)
	o, _ := New([]*Param{p}, cfg)
	o.Step(0.1)
	near(t, "step 1", p.Data[0], 1-0.1*0.5/(0.5+1e-8), 1e-7)
	// Step 2 with g = -0.25:
	// m = 0.9*0.05 + 0.1*(-0.25) = 0.02; v = 0.999*0.00025 + 0.001*0.0625
	p.Grad[0] = -0.25
	o.Step(0.1)
	m := 0.9*0.05 + 0.1*-0.25
	v := 0.999*0.00025 + 0.001*0.0625
	mhat := m / (1 - 0.9*0.9)
	vhat := v / (1 - 0.999*0.999)
	near(t, "step 2", p.Data[0], 0.9-0.1*mhat/(math.Sqrt(vhat)+1e-8), 1e-6)
}

// AdamW decays the weight by (1 - lr*wd) before the Adam step; Adam adds
// wd*p to the gradient instead.
func TestWeightDecayCoupledVsDecoupled(t *testing.T) {
	cfg := DefaultConfig(AdamW)
	cfg.WeightDecay = 0.1
	p := scalar(2, 0.5)
	o, _ := New([]*Param{p}, cfg)
	o.Step(0.01)
	near(t, "adamw", p.Data[0], 2*(1-0.01*0.1)-0.01*0.5/(0.5+1e-8), 1e-7)

	cfg = DefaultConfig(Adam)
	cfg.WeightDecay = 0.1
	p = scalar(2, 0.5)
	o, _ = New([]*Param{p}, cfg)
	o.Step(0.01)
	g := 0.5 + 0.1*2
	near(t, "adam L2", p.Data[0], 2-0.01*g/(g+1e-8), 1e-7)
}

func TestNoDecayPredicate(t *testing.T) {
	w := &Param{Name: "conv.weight", Shape: []int64{1, 1, 1, 1}, Data: []float32{1}, Grad: []float32{0}}
	b := &Param{Name: "conv.bias", Shape: []int64{1}, Data: []float32{1}, Grad: []float32{0}}
	cfg := Config{Algorithm: SGD, WeightDecay: 0.5, NoDecay: NoDecayVectors}
	o, err := New([]*Param{w, b}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.Step(0.1)
	near(t, "weight", w.Data[0], 1-0.1*0.5, 1e-7)
	near(t, "bias", b.Data[0], 1, 0)
}

func TestClipGlobalNorm(t *testing.T) {
	a := &Param{Name: "a", Shape: []int64{2}, Data: []float32{0, 0}, Grad: []float32{3, 0}}
	b := &Param{Name: "b", Shape: []int64{}, Data: []float32{0}, Grad: []float32{4}}
	cfg := Config{Algorithm: SGD, MaxGradNorm: 1}
	o, _ := New([]*Param{a, b}, cfg)
	if err := o.Step(1); err != nil {
		t.Fatal(err)
	}
	if o.GradNorm() != 5 {
		t.Errorf("GradNorm = %v, want 5", o.GradNorm())
	}
	c := 1 / (5 + 1e-6)
	near(t, "a[0]", a.Data[0], -3*c, 1e-7)
	near(t, "b", b.Data[0], -4*c, 1e-7)
	if a.Grad[0] != 3 || b.Grad[0] != 4 {
		t.Error("Step modified the caller's gradients")
	}
	// Below the threshold nothing is scaled.
	o.cfg.MaxGradNorm = 10
	a.Data[0] = 0
	o.Step(1)
	near(t, "unclipped", a.Data[0], -3, 0)
}

// ref is a float64 transliteration of PyTorch's update rules, for
// multi-step comparisons on random data.
type ref struct {
	cfg     Config
	p, m, v []float64
	decay   bool
	t       int
}

func (r *ref) step(lr float64, g []float64) {
	r.t++
	wd := 0.0
	if r.decay {
		wd = r.cfg.WeightDecay
	}
	for i := range r.p {
		d := g[i]
		switch r.cfg.Algorithm {
		case SGD:
			d += wd * r.p[i]
			if r.cfg.Momentum != 0 {
				if r.t == 1 {
					r.m[i] = d
				} else {
					r.m[i] = r.cfg.Momentum*r.m[i] + d
				}
				if r.cfg.Nesterov {
					d += r.cfg.Momentum * r.m[i]
				} else {
					d = r.m[i]
				}
			}
			r.p[i] -= lr * d
		case Adam, AdamW:
			if r.cfg.Algorithm == AdamW {
				r.p[i] *= 1 - lr*wd
			} else {
				d += wd * r.p[i]
			}
			b1, b2 := r.cfg.Beta1, r.cfg.Beta2
			r.m[i] = b1*r.m[i] + (1-b1)*d
			r.v[i] = b2*r.v[i] + (1-b2)*d*d
			bc1 := 1 - math.Pow(b1, float64(r.t))
			bc2 := 1 - math.Pow(b2, float64(r.t))
			r.p[i] -= lr / bc1 * r.m[i] / (math.Sqrt(r.v[i])/math.Sqrt(bc2) + r.cfg.Eps)
		}
	}
}

func configs() map[string]Config {
	sgd := DefaultConfig(SGD)
	sgd.WeightDecay = 1e-4
	nest := sgd
	nest.Nesterov = true
	plain := Config{Algorithm: SGD, WeightDecay: 1e-3}
	adam := DefaultConfig(Adam)
	adam.WeightDecay = 1e-3
	adamw := DefaultConfig(AdamW)
	return map[string]Config{"sgd": sgd, "nesterov": nest, "plain": plain, "adam": adam, "adamw": adamw}
}

func TestAgainstReference(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 64
			p := &Param{Name: "w", Shape: []int64{8, 8}, Data: make([]float32, n), Grad: make([]float32, n)}
			r := &ref{cfg: cfg, p: make([]float64, n), m: make([]float64, n), v: make([]float64, n), decay: true}
			for i := range n {
				p.Data[i] = float32(rng.NormFloat64())
				r.p[i] = float64(p.Data[i])
			}
			o, err := New([]*Param{p}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			g := make([]float64, n)
			for s := range 20 {
				for i := range n {
					p.Grad[i] = float32(rng.NormFloat64())
					g[i] = float64(p.Grad[i])
				}
				lr := 0.01 * (1 + float64(s%3))
				if err := o.Step(lr); err != nil {
					t.Fatal(err)
				}
				r.step(lr, g)
			}
			for i := range n {
				near(t, p.Name, p.Data[i], r.p[i], 2e-5)
			}
		})
	}
}

// Minimise f(x) = ½ Σ a_i (x_i - c_i)² from x = 0.
func TestConvergesOnQuadratic(t *testing.T) {
	lrs := map[string]float64{"sgd": 0.05, "nesterov": 0.05, "plain": 0.2, "adam": 0.05, "adamw": 0.05}
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			cfg.WeightDecay = 0
			a := []float64{1, 2, 4, 0.5}
			c := []float64{1, -2, 0.5, 3}
			p := &Param{Name: "x", Shape: []int64{4}, Data: make([]float32, 4), Grad: make([]float32, 4)}
			o, err := New([]*Param{p}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for s := range 2000 {
				for i := range a {
					p.Grad[i] = float32(a[i] * (float64(p.Data[i]) - c[i]))
				}
				lr := lrs[name]
				if cfg.Algorithm != SGD {
					lr *= 1 - float64(s)/2000 // decay so Adam settles
				}
				if err := o.Step(lr); err != nil {
					t.Fatal(err)
				}
			}
			for i := range c {
				near(t, "x", p.Data[i], c[i], 1e-3)
			}
		})
	}
}

func TestStateRoundTripContinuesIdentically(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			mk := func() []*Param {
				rng := rand.New(rand.NewPCG(7, 8))
				var ps []*Param
				for i, shape := range [][]int64{{3, 4}, {4}, {}} {
					n, _ := shapeElems(shape)
					p := &Param{Name: string(rune('a' + i)), Shape: shape, Data: make([]float32, n), Grad: make([]float32, n)}
					for j := range p.Data {
						p.Data[j] = float32(rng.NormFloat64())
					}
					ps = append(ps, p)
				}
				return ps
			}
			fill := func(ps []*Param, step int) {
				r := rand.New(rand.NewPCG(uint64(step), 99))
				for _, p := range ps {
					for j := range p.Grad {
						p.Grad[j] = float32(r.NormFloat64())
					}
				}
			}
			a := mk()
			oa, _ := New(a, cfg)
			for s := range 5 {
				fill(a, s)
				oa.Step(0.01)
			}
			st := oa.State()
			// Resume on fresh parameters holding the same weights.
			b := mk()
			for i := range b {
				copy(b[i].Data, a[i].Data)
			}
			ob, _ := New(b, cfg)
			// Shuffle the buffers: SetState matches them by name.
			slices.Reverse(st.Buffers)
			if err := ob.SetState(st); err != nil {
				t.Fatal(err)
			}
			if ob.Steps() != 5 {
				t.Fatalf("Steps = %d after SetState, want 5", ob.Steps())
			}
			for s := 5; s < 10; s++ {
				fill(a, s)
				fill(b, s)
				oa.Step(0.01)
				ob.Step(0.01)
			}
			for i := range a {
				for j := range a[i].Data {
					if math.Float32bits(a[i].Data[j]) != math.Float32bits(b[i].Data[j]) {
						t.Fatalf("%s[%d]: resumed %v, uninterrupted %v", a[i].Name, j, b[i].Data[j], a[i].Data[j])
					}
				}
			}
		})
	}
}

func TestSetStateRejectsMismatch(t *testing.T) {
	p := &Param{Name: "w", Shape: []int64{2}, Data: []float32{1, 2}, Grad: []float32{0, 0}}
	o, _ := New([]*Param{p}, DefaultConfig(Adam))
	good := o.State()
	cases := map[string]func(s *State){
		"algorithm": func(s *State) { s.Algorithm = SGD },
		"missing":   func(s *State) { s.Buffers = s.Buffers[:1] },
		"length":    func(s *State) { s.Buffers[0].Data = s.Buffers[0].Data[:1] },
		"duplicate": func(s *State) { s.Buffers[1].Slot = s.Buffers[0].Slot },
		"extra": func(s *State) {
			s.Buffers = append(s.Buffers, Buffer{Param: "other", Slot: SlotExpAvg, Data: []float32{0}})
		},
		"negative step": func(s *State) { s.Step = -1 },
	}
	for name, corrupt := range cases {
		s := o.State()
		corrupt(s)
		if err := o.SetState(s); err == nil {
			t.Errorf("%s: SetState accepted a bad state", name)
		}
	}
	if err := o.SetState(nil); err == nil {
		t.Error("SetState(nil) accepted")
	}
	if err := o.SetState(good); err != nil {
		t.Errorf("good state: %v", err)
	}
}

func TestStepRefusesBadInput(t *testing.T) {
	p := &Param{Name: "w", Shape: []int64{2}, Data: []float32{1, 2}, Grad: []float32{0, float32(math.NaN())}}
	o, _ := New([]*Param{p}, DefaultConfig(Adam))
	if err := o.Step(0.1); !errors.Is(err, ErrNonFiniteGrad) {
		t.Errorf("NaN gradient: err = %v", err)
	}
	if p.Data[0] != 1 || p.Data[1] != 2 || o.Steps() != 0 {
		t.Error("refused step changed parameters or step count")
	}
	p.Grad = p.Grad[:1]
	if err := o.Step(0.1); !errors.Is(err, ErrGradShape) {
		t.Errorf("short gradient: err = %v", err)
	}
	p.Grad = []float32{0, 0}
	if err := o.Step(math.Inf(1)); err == nil {
		t.Error("infinite learning rate accepted")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	p := func() []*Param {
		return []*Param{{Name: "w", Shape: []int64{2}, Data: []float32{1, 2}}}
	}
	bad := []Config{
		{Algorithm: "rmsprop"},
		{Algorithm: SGD, Momentum: 1},
		{Algorithm: SGD, Nesterov: true},
		{Algorithm: Adam, Beta1: 0.9, Beta2: 1, Eps: 1e-8},
		{Algorithm: Adam, Beta1: 0.9, Beta2: 0.99},
		{Algorithm: SGD, WeightDecay: -1},
		{Algorithm: SGD, WeightDecay: math.NaN()},
		{Algorithm: SGD, MaxGradNorm: math.Inf(1)},
	}
	for _, c := range bad {
		if _, err := New(p(), c); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
	dup := append(p(), p()...)
	if _, err := New(dup, DefaultConfig(SGD)); err == nil {
		t.Error("duplicate names accepted")
	}
	shape := p()
	shape[0].Shape = []int64{3}
	if _, err := New(shape, DefaultConfig(SGD)); err == nil {
		t.Error("shape/data mismatch accepted")
	}
	if _, err := New([]*Param{nil}, DefaultConfig(SGD)); err == nil {
		t.Error("nil parameter accepted")
	}
	if a, err := ParseAlgorithm(" AdamW "); err != nil || a != AdamW {
		t.Errorf("ParseAlgorithm = %v, %v", a, err)
	}
	if _, err := ParseAlgorithm("lion"); err == nil {
		t.Error("ParseAlgorithm accepted lion")
	}
}

// The parallel path must give the same bits as the serial one: each
// element's update is independent of the split.
func TestParallelMatchesSerial(t *testing.T) {
	for _, alg := range []Algorithm{SGD, Adam} {
		mk := func(workers int) (*Optimizer, []*Param) {
			rng := rand.New(rand.NewPCG(5, 6))
			var ps []*Param
			for i, n := range []int{ParallelThreshold, 1000, 3} {
				p := &Param{Name: string(rune('a' + i)), Shape: []int64{int64(n)}, Data: make([]float32, n), Grad: make([]float32, n)}
				for j := range n {
					p.Data[j] = float32(rng.NormFloat64())
					p.Grad[j] = float32(rng.NormFloat64())
				}
				ps = append(ps, p)
			}
			cfg := DefaultConfig(alg)
			cfg.Workers = workers
			cfg.WeightDecay = 1e-3
			o, err := New(ps, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return o, ps
		}
		os, ps := mk(1)
		op, pp := mk(4)
		if len(op.chunks) == 0 {
			t.Fatal("parallel optimiser planned no chunks")
		}
		for range 3 {
			os.Step(0.01)
			op.Step(0.01)
		}
		for i := range ps {
			if !slices.Equal(ps[i].Data, pp[i].Data) {
				t.Fatalf("%s: parallel step differs from serial", alg)
			}
		}
	}
}

func TestStepDoesNotAllocate(t *testing.T) {
	for name, cfg := range configs() {
		for _, size := range []int{100, ParallelThreshold} {
			cfg.MaxGradNorm = 1
			cfg.Workers = 2
			p := &Param{Name: "w", Shape: []int64{int64(size)}, Data: make([]float32, size), Grad: make([]float32, size)}
			for i := range p.Grad {
				p.Grad[i] = float32(i % 7)
			}
			o, _ := New([]*Param{p}, cfg)
			if n := testing.AllocsPerRun(20, func() { o.Step(0.01) }); n != 0 {
				t.Errorf("%s, %d elements: %v allocations per step", name, size, n)
			}
		}
	}
}

func benchStep(b *testing.B, alg Algorithm, workers int) {
	// About the size of DeepLabV3+ with a MobileNetV2 backbone (5.8M).
	sizes := []int{2 << 20, 2 << 20, 1 << 20, 512 << 10, 256 << 10, 64 << 10, 256}
	var ps []*Param
	total := 0
	for i, n := range sizes {
		p := &Param{Name: string(rune('a' + i)), Shape: []int64{int64(n)}, Data: make([]float32, n), Grad: make([]float32, n)}
		for j := range p.Grad {
			p.Grad[j] = 1e-3
		}
		ps = append(ps, p)
		total += n
	}
	cfg := DefaultConfig(alg)
	cfg.Workers = workers
	cfg.WeightDecay = 1e-4
	o, _ := New(ps, cfg)
	b.SetBytes(int64(total) * 4)
	b.ReportAllocs()
	for b.Loop() {
		o.Step(0.01)
	}
}

func BenchmarkSGDSerial(b *testing.B)    { benchStep(b, SGD, 1) }
func BenchmarkSGDParallel(b *testing.B)  { benchStep(b, SGD, 2) }
func BenchmarkAdamSerial(b *testing.B)   { benchStep(b, AdamW, 1) }
func BenchmarkAdamParallel(b *testing.B) { benchStep(b, AdamW, 2) }

// The pool workers of a parallel optimiser exit once it is unreachable.
func TestWorkersExitWithOptimizer(t *testing.T) {
	var during int
	func() {
		n := ParallelThreshold
		p := &Param{Name: "w", Shape: []int64{int64(n)}, Data: make([]float32, n), Grad: make([]float32, n)}
		cfg := DefaultConfig(SGD)
		cfg.Workers = 3
		o, _ := New([]*Param{p}, cfg)
		o.Step(0.1)
		if o.pool == nil {
			t.Fatal("no pool workers started")
		}
		during = runtime.NumGoroutine()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > during-2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left, %d while the optimiser lived", runtime.NumGoroutine(), during)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
