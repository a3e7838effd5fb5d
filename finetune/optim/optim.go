// Package optim implements first-order optimisers (SGD with momentum, Adam,
// AdamW) over named float32 parameter tensors.
//
// The update rules follow PyTorch's torch.optim.SGD, Adam and AdamW (with
// dampening 0 and amsgrad off), so hyperparameters carry over unchanged from
// PyTorch recipes such as DeepLab's. Moments are kept in float32 like
// PyTorch; each element's update is computed in float64 and rounded once.
//
// A Step allocates nothing: it walks the parameter slices with plain loops.
// Gradients are read, never written, so the caller may keep using its
// gradient buffers (for example tensors owned by ONNX Runtime).
package optim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// Param is one trainable tensor: its name, shape, values and the gradient of
// the loss with respect to those values. Grad must have the same length as
// Data when Step is called; the optimiser updates Data in place.
type Param struct {
	Name  string
	Shape []int64
	Data  []float32
	Grad  []float32
}

// Algorithm names an update rule.
type Algorithm string

// The supported update rules.
const (
	SGD   Algorithm = "sgd"   // SGD with optional (Nesterov) momentum and L2 weight decay
	Adam  Algorithm = "adam"  // Adam with L2 weight decay added to the gradient
	AdamW Algorithm = "adamw" // Adam with decoupled weight decay
)

// ParseAlgorithm returns the Algorithm named by s (case-insensitive).
func ParseAlgorithm(s string) (Algorithm, error) {
	switch a := Algorithm(strings.ToLower(strings.TrimSpace(s))); a {
	case SGD, Adam, AdamW:
		return a, nil
	}
	return "", fmt.Errorf("optim: unknown algorithm %q (want sgd, adam or adamw)", s)
}

// Config holds the hyperparameters of an optimiser. Use DefaultConfig for
// PyTorch's defaults and change fields from there; the zero values of
// Momentum and Beta1 are legal settings, not "unset".
type Config struct {
	Algorithm Algorithm

	// Momentum is SGD's momentum factor; 0 disables momentum.
	Momentum float64
	// Nesterov selects Nesterov momentum (SGD only; needs Momentum > 0).
	Nesterov bool

	// Beta1, Beta2 and Eps are Adam's and AdamW's moment decay rates and
	// the term added to the denominator for numerical stability.
	Beta1, Beta2, Eps float64

	// WeightDecay is coupled L2 regularisation (added to the gradient) for
	// SGD and Adam, and decoupled decay (p *= 1 - lr*wd) for AdamW.
	WeightDecay float64
	// NoDecay, if set, exempts the parameters it returns true for from
	// weight decay. NoDecayVectors is the usual choice (biases, norms).
	NoDecay func(p *Param) bool

	// MaxGradNorm, if positive, clips the gradients by their global L2 norm
	// over all parameters, like torch.nn.utils.clip_grad_norm_.
	MaxGradNorm float64

	// Workers is the number of goroutines a step may use; 0 means
	// GOMAXPROCS. Small models (under ParallelThreshold elements) always
	// run on one goroutine, where starting workers costs more than it saves.
	Workers int
}

// ParallelThreshold is the total element count below which a step runs on
// the calling goroutine only.
const ParallelThreshold = 1 << 18

// DefaultConfig returns PyTorch's default hyperparameters for a: momentum
// 0.9 for SGD (DeepLab's setting; PyTorch's own default is 0), betas
// (0.9, 0.999) and eps 1e-8 for Adam and AdamW, and weight decay 0.01 for
// AdamW and 0 otherwise.
func DefaultConfig(a Algorithm) Config {
	c := Config{Algorithm: a, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	switch a {
	case SGD:
		c.Momentum = 0.9
	case AdamW:
		c.WeightDecay = 0.01
	}
	return c
}

// NoDecayVectors reports whether p has at most one dimension: biases and
// normalisation scales and shifts, which are conventionally not decayed.
func NoDecayVectors(p *Param) bool { return len(p.Shape) <= 1 }

// Errors reported by Step.
var (
	// ErrNonFiniteGrad means the gradients contained NaN or Inf; the
	// parameters and optimiser state were left unchanged.
	ErrNonFiniteGrad = errors.New("optim: non-finite gradient")
	// ErrGradShape means a gradient's length does not match its parameter.
	ErrGradShape = errors.New("optim: gradient length does not match parameter")
)

// Slot names of the per-parameter state buffers.
const (
	SlotMomentum = "momentum_buffer" // SGD
	SlotExpAvg   = "exp_avg"         // Adam, AdamW: first moment
	SlotExpAvgSq = "exp_avg_sq"      // Adam, AdamW: second moment
)

// Optimizer updates a fixed list of parameters. It is not safe for
// concurrent use.
type Optimizer struct {
	cfg    Config
	params []*Param
	decay  []bool      // per parameter: apply weight decay
	slots  [][]float32 // per parameter: moments, concatenated (see SlotNames)
	step   int64
	norm   float64
	chunks []chunk // precomputed work split for parallel steps

	// Per-step scratch, kept here so a step allocates nothing.
	k    coeffs
	next atomic.Int64
	wg   sync.WaitGroup
	pool *pool // started on the first parallel step
}

// chunk is a contiguous element range [lo, hi) of one parameter.
type chunk struct{ p, lo, hi int }

// New returns an optimiser for params. It validates the configuration and
// that parameter names are unique and non-empty, and allocates the state
// (zeroed moments). Params are referenced, not copied: Step updates their
// Data, and the caller fills their Grad before each step.
func New(params []*Param, cfg Config) (*Optimizer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := &Optimizer{cfg: cfg, params: params}
	seen := make(map[string]bool, len(params))
	nslot := len(SlotNames(cfg))
	total := 0
	for i, p := range params {
		if p == nil {
			return nil, fmt.Errorf("optim: parameter %d is nil", i)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("optim: parameter %d has no name", i)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("optim: duplicate parameter %q", p.Name)
		}
		seen[p.Name] = true
		if n, ok := shapeElems(p.Shape); !ok || n != len(p.Data) {
			return nil, fmt.Errorf("optim: parameter %q: shape %v does not match %d values", p.Name, p.Shape, len(p.Data))
		}
		o.decay = append(o.decay, cfg.WeightDecay != 0 && (cfg.NoDecay == nil || !cfg.NoDecay(p)))
		o.slots = append(o.slots, make([]float32, nslot*len(p.Data)))
		total += len(p.Data)
	}
	o.planChunks(total)
	return o, nil
}

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("optim: "+format, a...)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch c.Algorithm {
	case SGD:
		if !(c.Momentum >= 0 && c.Momentum < 1) {
			return bad("momentum %v outside [0, 1)", c.Momentum)
		}
		if c.Nesterov && c.Momentum == 0 {
			return bad("Nesterov momentum needs momentum > 0")
		}
	case Adam, AdamW:
		if !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1) {
			return bad("betas (%v, %v) outside [0, 1)", c.Beta1, c.Beta2)
		}
		if !(c.Eps > 0) || !finite(c.Eps) {
			return bad("eps %v must be positive", c.Eps)
		}
		if c.Nesterov {
			return bad("Nesterov applies to SGD only")
		}
	default:
		return bad("unknown algorithm %q", c.Algorithm)
	}
	if !(c.WeightDecay >= 0) || !finite(c.WeightDecay) {
		return bad("weight decay %v must be a non-negative number", c.WeightDecay)
	}
	if !(c.MaxGradNorm >= 0) || !finite(c.MaxGradNorm) {
		return bad("max grad norm %v must be a non-negative number", c.MaxGradNorm)
	}
	if c.Workers < 0 {
		return bad("workers %d is negative", c.Workers)
	}
	return nil
}

// SlotNames lists the state buffers per parameter for cfg's algorithm:
// SlotMomentum for SGD with momentum, SlotExpAvg and SlotExpAvgSq for Adam
// and AdamW, none for plain SGD.
func SlotNames(cfg Config) []string {
	switch cfg.Algorithm {
	case SGD:
		if cfg.Momentum == 0 {
			return nil
		}
		return []string{SlotMomentum}
	default:
		return []string{SlotExpAvg, SlotExpAvgSq}
	}
}

func shapeElems(shape []int64) (int, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt32/d) {
			return 0, false
		}
		n *= d
	}
	return int(n), true
}

// planChunks splits the elements of all parameters into about 4 chunks per
// worker, each within one parameter, so goroutines get balanced work
// whatever the mix of large and small tensors.
func (o *Optimizer) planChunks(total int) {
	w := o.cfg.Workers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	if w <= 1 || total < ParallelThreshold {
		return
	}
	target := max(total/(4*w), 1<<14)
	for i, p := range o.params {
		for lo := 0; lo < len(p.Data); lo += target {
			o.chunks = append(o.chunks, chunk{i, lo, min(lo+target, len(p.Data))})
		}
	}
	o.cfg.Workers = w
}

// Config returns the optimiser's configuration.
func (o *Optimizer) Config() Config { return o.cfg }

// Params returns the parameters the optimiser updates, in order.
func (o *Optimizer) Params() []*Param { return o.params }

// Steps returns the number of steps taken (PyTorch's "step" state).
func (o *Optimizer) Steps() int64 { return o.step }

// GradNorm returns the global L2 norm of the gradients at the last Step,
// before clipping; NaN or Inf if that step was refused for non-finite
// gradients.
func (o *Optimizer) GradNorm() float64 { return o.norm }

// Step applies one update with learning rate lr to every parameter.
//
// It first checks every gradient's length and computes the global gradient
// norm; if a length is wrong (ErrGradShape) or the norm is not finite
// (ErrNonFiniteGrad), it returns an error and changes nothing, so the caller
// can stop or skip the batch with parameters and state intact.
func (o *Optimizer) Step(lr float64) error {
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return fmt.Errorf("optim: learning rate %v must be a non-negative number", lr)
	}
	var sq float64
	for _, p := range o.params {
		if len(p.Grad) != len(p.Data) {
			return fmt.Errorf("%w: %q has %d values and %d gradients", ErrGradShape, p.Name, len(p.Data), len(p.Grad))
		}
		sq += sumSquares(p.Grad)
	}
	o.norm = math.Sqrt(sq)
	if math.IsNaN(o.norm) || math.IsInf(o.norm, 0) {
		return fmt.Errorf("%w (global norm %v)", ErrNonFiniteGrad, o.norm)
	}
	scale := 1.0
	if m := o.cfg.MaxGradNorm; m > 0 {
		// Same rule as clip_grad_norm_: scale only when the norm exceeds m.
		if c := m / (o.norm + 1e-6); c < 1 {
			scale = c
		}
	}
	o.step++
	o.k = o.coefficients(lr, scale)
	if len(o.chunks) == 0 {
		for i, p := range o.params {
			o.update(i, 0, len(p.Data))
		}
		return nil
	}
	o.parallel()
	return nil
}

// parallel runs the precomputed chunks on cfg.Workers goroutines (the
// caller's and cfg.Workers-1 pool workers), which take the next chunk from
// a shared counter until none are left. The workers are started once and
// fed through a channel, so a step allocates nothing.
func (o *Optimizer) parallel() {
	if o.pool == nil {
		o.pool = &pool{jobs: make(chan *Optimizer)}
		for range o.cfg.Workers - 1 {
			go o.pool.serve()
		}
		// The workers reference only the pool, never the optimiser
		// between steps, so the optimiser can become unreachable; then
		// closing the channel ends them.
		runtime.AddCleanup(o, func(p *pool) { close(p.jobs) }, o.pool)
	}
	o.next.Store(0)
	o.wg.Add(o.cfg.Workers - 1)
	for range o.cfg.Workers - 1 {
		o.pool.jobs <- o
	}
	o.work()
	o.wg.Wait()
}

// pool is a set of worker goroutines that run steps sent to them.
type pool struct{ jobs chan *Optimizer }

func (p *pool) serve() {
	for o := range p.jobs {
		o.work()
		o.wg.Done()
	}
}

func (o *Optimizer) work() {
	for {
		i := int(o.next.Add(1) - 1)
		if i >= len(o.chunks) {
			return
		}
		c := o.chunks[i]
		o.update(c.p, c.lo, c.hi)
	}
}

// coeffs are the per-step scalars shared by all elements.
type coeffs struct {
	lr, scale, wd float64
	// SGD
	mu float64
	// Adam: step size lr/bc1, 1/sqrt(bc2), and decoupled decay factor.
	b1, b2, stepSize, invSqrtBC2, decayMul float64
}

func (o *Optimizer) coefficients(lr, scale float64) coeffs {
	c := o.cfg
	k := coeffs{lr: lr, scale: scale, wd: c.WeightDecay, mu: c.Momentum, b1: c.Beta1, b2: c.Beta2}
	if c.Algorithm != SGD {
		t := float64(o.step)
		bc1 := 1 - math.Pow(c.Beta1, t)
		bc2 := 1 - math.Pow(c.Beta2, t)
		k.stepSize = lr / bc1
		k.invSqrtBC2 = 1 / math.Sqrt(bc2)
		k.decayMul = 1 - lr*c.WeightDecay
	}
	return k
}

// update applies the step to elements [lo, hi) of parameter i.
func (o *Optimizer) update(i, lo, hi int) {
	k := &o.k
	p := o.params[i]
	x := p.Data[lo:hi]
	g := p.Grad[lo:hi]
	g = g[:len(x)]
	n := len(p.Data)
	wd := 0.0
	if o.decay[i] {
		wd = k.wd
	}
	switch o.cfg.Algorithm {
	case SGD:
		if k.mu == 0 {
			for j := range x {
				d := float64(g[j])*k.scale + wd*float64(x[j])
				x[j] = float32(float64(x[j]) - k.lr*d)
			}
			return
		}
		buf := o.slots[i][lo:hi]
		buf = buf[:len(x)]
		for j := range x {
			d := float64(g[j])*k.scale + wd*float64(x[j])
			// PyTorch initialises the buffer to the first gradient;
			// with zero dampening that equals mu*0 + d exactly.
			b := float32(k.mu*float64(buf[j]) + d)
			buf[j] = b
			if o.cfg.Nesterov {
				d += k.mu * float64(b)
			} else {
				d = float64(b)
			}
			x[j] = float32(float64(x[j]) - k.lr*d)
		}
	case Adam, AdamW:
		m := o.slots[i][lo:hi]
		v := o.slots[i][n+lo : n+hi]
		m = m[:len(x)]
		v = v[:len(x)]
		decoupled := o.cfg.Algorithm == AdamW
		decayMul := 1.0
		if decoupled && wd != 0 {
			decayMul = k.decayMul
		}
		for j := range x {
			xj := float64(x[j])
			d := float64(g[j]) * k.scale
			if decoupled {
				xj *= decayMul
			} else {
				d += wd * xj
			}
			mj := float32(k.b1*float64(m[j]) + (1-k.b1)*d)
			vj := float32(k.b2*float64(v[j]) + (1-k.b2)*d*d)
			m[j], v[j] = mj, vj
			den := math.Sqrt(float64(vj))*k.invSqrtBC2 + o.cfg.Eps
			x[j] = float32(xj - k.stepSize*float64(mj)/den)
		}
	}
}

// sumSquares returns the sum of squares of g in float64, with four
// accumulators so the loop is not bound by one addition chain.
func sumSquares(g []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		a, b, c, d := float64(g[i]), float64(g[i+1]), float64(g[i+2]), float64(g[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(g); i++ {
		a := float64(g[i])
		s0 += a * a
	}
	return (s0 + s1) + (s2 + s3)
}
