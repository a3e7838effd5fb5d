package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/projection/onnxgraph"
	"github.com/segtune/segtune/runtime"
)

// RegularizerConfig configures the size regularizer of docs/method.md: α times
// the reparameterised Lagrangian of an F-measure (or rate constraint) of a
// linear size predictor on pooled features, optimised by Algorithm 1.
type RegularizerConfig struct {
	// Alpha weighs the regularizer; 0 is the baseline (no regularizer).
	Alpha float64 `json:"alpha"`
	// Dual is the objective and the primal/dual step sizes (dual.Config:
	// objective fbeta/p@r/r@p/auc-roc/auc-pr, beta, level, grid,
	// normalization sum|mean — what Alpha multiplies —, lr, c_lambda, c_mu).
	Dual dual.Config `json:"dual"`
	// Feature is the tensor whose global average pool feeds the size head;
	// empty means the input of the final classifier (the paper's a_l).
	Feature string `json:"feature,omitempty"`
	// Projection is "epoch" (Algorithm 1: one projection per epoch),
	// "step" (the "full projections" baseline: one after every step) or
	// "graph" (the relu form of docs/method.md §8: τ, ε stay free, the Lagrangian
	// reads their projection, and every step back-propagates through it;
	// the projection and its gradient run as an ONNX graph,
	// projection/onnxgraph).
	Projection string `json:"projection"`
	// ScoreBound, when > 0, bounds the size score to |s| ≤ 2·ScoreBound,
	// so that no λ can run the loss −Σ λ_i s_i away (docs/method.md §6):
	// the pooled features are scaled to mean absolute value 1 before the
	// head, and after every step the head's weights are put back in the
	// box |w_k| ≤ ScoreBound/C (C channels) and |b| ≤ ScoreBound. 0 leaves
	// the score unbounded (raw pooled features, as before; `segtune
	// finetune` defaults to 1).
	ScoreBound float64 `json:"score_bound,omitempty"`
}

// regularizer is the size regularizer's side of the training graph and its
// dual state: what Algorithm 1 (dual.Loop, driven by the trainer) feeds the
// graph, reads from it and checkpoints.
type regularizer struct {
	cfg     RegularizerConfig
	reg     *dual.Regularizer
	cache   *dual.ScoreCache
	classes []int // size class per training example
	terms   int
	heads   int
	// The graph's coefficient inputs, fed from dual.Batch each step.
	posT, negT []float32
	epsT       []float32
	in         struct{ pos, neg, eps, gradIn int }
	scoresOut  int
	// projectors run the projection of each term under the "graph" schedule.
	projectors []*onnxgraph.Projector
	// headW and headB are the size head's parameters (set by bind), kept
	// in the box of ScoreBound by boxHead.
	headW, headB *optim.Param
	channels     int
}

// newRegularizer builds the dual state over the training examples, whose
// size classes are classes (split at threshold, for its errors).
func newRegularizer(cfg RegularizerConfig, classes []int, threshold float64) (*regularizer, error) {
	switch cfg.Projection {
	case "", "epoch":
		cfg.Projection = "epoch"
	case "step", "graph":
	default:
		return nil, fmt.Errorf("projection %q: want epoch, step or graph", cfg.Projection)
	}
	if !(cfg.ScoreBound >= 0) || math.IsInf(cfg.ScoreBound, 1) {
		return nil, fmt.Errorf("score bound %v must be finite and ≥ 0", cfg.ScoreBound)
	}
	r := &regularizer{cfg: cfg, classes: classes}
	ids := make([]int64, len(classes))
	for id := range ids {
		ids[id] = int64(id)
	}
	var err error
	if r.reg, err = dual.New(cfg.Dual, ids, r.classes); err != nil {
		return nil, fmt.Errorf("regularizer: %w (size threshold %.4g)", err, threshold)
	}
	r.cache = r.reg.NewScoreCache()
	r.terms, r.heads = len(r.reg.Terms()), r.reg.Heads()
	if cfg.Projection == "graph" {
		for _, term := range r.reg.Terms() {
			p, err := onnxgraph.NewProjector(len(term.Tau), runtime.Options{Threads: 1})
			if err != nil {
				r.close()
				return nil, fmt.Errorf("regularizer: %w", err)
			}
			r.projectors = append(r.projectors, p)
		}
		if err := r.projectThrough(); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

// projectThrough hands the ONNX projectors to the dual state (again after a
// restore, which rebuilds it).
func (r *regularizer) projectThrough() error {
	ps := make([]dual.Projector, len(r.projectors))
	for i, p := range r.projectors {
		ps[i] = p
	}
	if err := r.reg.ProjectThrough(ps); err != nil {
		return fmt.Errorf("regularizer: %w", err)
	}
	return nil
}

// close releases the projectors' sessions.
func (r *regularizer) close() {
	for _, p := range r.projectors {
		p.Close()
	}
	r.projectors = nil
}

// addToGraph appends the size head and the regularizer's term to the
// training model: scores = GAP(feature)·W + b, and
// term = Σ pos·s + neg·relu(eps + s) over the batch and the terms, whose
// coefficients Go computes each step from the dual state (dual.Coefficients).
// Feeding 1 as the term's upstream gradient adds ∂term/∂θ to every
// parameter's gradient, the size head included.
func (r *regularizer) addToGraph(m *onnx.Model, batch int, seed uint64) (trainable []string, gc grad.Config, err error) {
	pooled, channels, err := sizehead.Tap(m, r.cfg.Feature)
	if err != nil {
		return nil, gc, err
	}
	r.channels = channels
	rng := rand.New(rand.NewPCG(seed, 0x512e))
	w := make([]float32, channels*r.heads)
	scale := 0.01
	if b := r.cfg.ScoreBound; b > 0 {
		scale = 0.1 * b / float64(channels) // well inside the box
	}
	for i := range w {
		w[i] = float32(scale * rng.NormFloat64())
	}
	r.boxData(w, nil)
	heads := make([]int64, r.terms)
	for t, term := range r.reg.Terms() {
		heads[t] = int64(term.Head)
	}
	gc = sizehead.AddTerm(m, pooled, channels, r.heads, r.cfg.ScoreBound, w, heads, batch)
	r.posT, r.negT, r.epsT = make([]float32, batch*r.terms), make([]float32, batch*r.terms), make([]float32, r.terms)
	return []string{sizehead.Weight, sizehead.Bias}, gc, nil
}

// bind finds the regularizer's inputs and outputs in the training session.
func (r *regularizer) bind(s *stepper) error {
	r.in.pos, r.in.neg, r.in.eps = s.inputIndex(sizehead.Pos), s.inputIndex(sizehead.Neg), s.inputIndex(sizehead.Eps)
	r.in.gradIn = s.inputIndex(grad.GradInPrefix + sizehead.Term)
	r.scoresOut = s.outputIndex(sizehead.Scores)
	if r.in.pos < 0 || r.in.neg < 0 || r.in.eps < 0 || r.in.gradIn < 0 || r.scoresOut < 0 {
		return fmt.Errorf("training graph lacks the regularizer's inputs or outputs")
	}
	for _, p := range s.params {
		switch p.Name {
		case sizehead.Weight:
			r.headW = p
		case sizehead.Bias:
			r.headB = p
		}
	}
	if r.headW == nil || r.headB == nil {
		return fmt.Errorf("training graph lacks the size head's parameters")
	}
	shape := s.inputs[r.in.gradIn].Shape
	one := make([]float32, 1)
	one[0] = 1
	s.setInput(r.in.gradIn, runtime.NewFloat32(shape, one))
	s.setInput(r.in.pos, runtime.NewFloat32(s.inputs[r.in.pos].Shape, r.posT))
	s.setInput(r.in.neg, runtime.NewFloat32(s.inputs[r.in.neg].Shape, r.negT))
	s.setInput(r.in.eps, runtime.NewFloat32(s.inputs[r.in.eps].Shape, r.epsT))
	return nil
}

// boxHead puts the size head back in the box of ScoreBound after an
// optimiser step (a projected step; nothing without a bound).
func (r *regularizer) boxHead(s *stepper) error {
	if r.headW == nil || r.cfg.ScoreBound <= 0 {
		return nil
	}
	if err := s.pull(r.headW, r.headB); err != nil {
		return err
	}
	r.boxData(r.headW.Data, r.headB.Data)
	return s.push(r.headW, r.headB)
}

// boxData clips head weights w (and biases b, when given) to the box.
func (r *regularizer) boxData(w, b []float32) {
	bound := r.cfg.ScoreBound
	if bound <= 0 {
		return
	}
	bw, bb := float32(bound/float64(r.channels)), float32(bound)
	for i, v := range w {
		w[i] = max(-bw, min(bw, v))
	}
	for i, v := range b {
		b[i] = max(-bb, min(bb, v))
	}
}

// loop returns Algorithm 1 over the dual state, the schedule the
// configuration names; the graph computes the term (InGraph). epoch ≥ 1
// is the epoch the next step belongs to, step the steps of it already
// taken and perEpoch its length (where the dual steps every K steps
// fall). Build it after a restore, which replaces the score cache.
func (r *regularizer) loop(epoch, step, perEpoch int) (*dual.Loop, error) {
	return dual.NewLoop(r.reg, r.cache, dual.LoopConfig{Projection: dual.Projection(r.cfg.Projection), Alpha: r.cfg.Alpha, InGraph: true,
		Epoch: epoch, StepInEpoch: step, StepsPerEpoch: perEpoch})
}

// feed sets the graph's coefficient inputs to the batch's (α-scaled)
// coefficients.
func (r *regularizer) feed(b *dual.Batch) { b.CoefficientsFloat32(r.posT, r.negT, r.epsT) }

// readScores copies the size head's scores out of the step's outputs.
func (r *regularizer) readScores(outs []*runtime.Tensor, scores []float64) {
	for i, v := range outs[r.scoresOut].Float32 {
		scores[i] = float64(v)
	}
}

// epochStats returns the regularizer's statistics of an epoch that st
// describes, for the history.
func (r *regularizer) epochStats(st dual.EpochStats) map[string]float64 {
	out := map[string]float64{
		"reg_projections":   float64(st.Projections),
		"reg_projection_ms": st.ProjectionTime.Seconds() * 1e3,
		"reg_dual_steps":    float64(st.DualSteps),
		"reg_lambda_mean":   st.LambdaMean,
		"reg_lambda_max":    st.LambdaMax,
		"reg_tau_sum":       st.TauSum,
		"reg_eps_before":    st.EpsBefore,
		"reg_eps_after":     st.EpsAfter,
		"reg_hinge_active":  st.HingeActive,
	}
	if st.Evals > 0 {
		out["reg_lagrangian"] = st.Lagrangian
	}
	out["reg_violation"] = r.violation()
	if f1, ok := metrics.SizeF1(r.cache.Scores, r.cache.Seen, r.classes, r.heads); ok {
		out["size_f1_train"] = f1
	}
	return out
}

// violation is the mean constraint violation max(0, τ_i − s_i) over the
// positives seen, plus |Σ τ − 1|, of every term.
func (r *regularizer) violation() float64 {
	var v float64
	var n int
	for _, t := range r.reg.Terms() {
		sum := 0.0
		k := 0
		for i, c := range r.classes {
			if c != t.Class {
				continue
			}
			sum += t.Tau[k]
			if r.cache.Seen[i] {
				v += math.Max(0, t.Tau[k]-r.cache.Scores[i*r.heads+t.Head])
				n++
			}
			k++
		}
		v += math.Abs(sum - 1)
	}
	if n > 0 {
		v /= float64(n)
	}
	return v
}

// regState is the regularizer's part of a checkpoint.
type regState struct {
	Reg   json.RawMessage `json:"regularizer"`
	Cache json.RawMessage `json:"cache"`
}

func (r *regularizer) state() ([]byte, error) {
	reg, err := json.Marshal(r.reg)
	if err != nil {
		return nil, err
	}
	cache, err := json.Marshal(r.cache)
	if err != nil {
		return nil, err
	}
	return json.Marshal(regState{Reg: reg, Cache: cache})
}

// DualVariables reads the size regularizer's τ, λ, ε and μ from a
// checkpoint, term after term: what two runs that should agree (ranks of
// one job, a run and its resumption) are compared on. A checkpoint
// without a regularizer gives none.
func DualVariables(ck *checkpoint.Checkpoint) ([]float64, error) {
	if len(ck.RegularizerState) == 0 {
		return nil, nil
	}
	var st regState
	if err := json.Unmarshal(ck.RegularizerState, &st); err != nil {
		return nil, fmt.Errorf("regularizer state: %w", err)
	}
	var reg dual.Regularizer
	if err := json.Unmarshal(st.Reg, &reg); err != nil {
		return nil, fmt.Errorf("regularizer state: %w", err)
	}
	var out []float64
	for _, term := range reg.Terms() {
		out = append(append(append(out, term.Tau...), term.Lambda...), term.Eps, term.Mu)
	}
	return out, nil
}

func (r *regularizer) restore(b []byte) error {
	var st regState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("regularizer state: %w", err)
	}
	if err := json.Unmarshal(st.Reg, r.reg); err != nil {
		return fmt.Errorf("regularizer state: %w", err)
	}
	c, err := r.reg.RestoreScoreCache(st.Cache)
	if err != nil {
		return fmt.Errorf("regularizer state: %w", err)
	}
	r.cache = c
	if r.projectors != nil {
		return r.projectThrough()
	}
	return nil
}
