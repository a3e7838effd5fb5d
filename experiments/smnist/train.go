package smnist

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Where the S-measure node reads from (see the package documentation).
const (
	HeadInput  = "input"  // sibling unit of the class units (models.LinearClassifier extraOutputs=1)
	HeadLogits = "logits" // s = v·logits + c, on the layer's output
)

// Projection schedules (dual's, by name).
const (
	ScheduleEpoch = string(dual.ProjectionEpoch) // Algorithm 1: one projection per epoch
	ScheduleStep  = string(dual.ProjectionStep)  // "full projections": one after every step
)

// Config is one training run of the experiment.
type Config struct {
	// Name labels the run in tables and plots ("" → derived).
	Name string `json:"name"`
	// Alpha weighs the F1 Lagrangian; 0 is the baseline.
	Alpha float64 `json:"alpha"`
	// Schedule is ScheduleEpoch (default) or ScheduleStep.
	Schedule string `json:"schedule"`
	// Head is HeadInput (default) or HeadLogits.
	Head string `json:"head"`
	// Epochs (default 40) and Batch (default 100), as in the paper.
	Epochs int `json:"epochs"`
	Batch  int `json:"batch"`
	// LR is Adam's step size for the network (default 1e-2, the paper's).
	LR float64 `json:"lr"`
	// Dual configures the Lagrangian: objective (F1 by default), the
	// normalisation α multiplies (dual.NormSum, the paper's, by default),
	// Adam's step for τ, ε (LR, default 1e-2) and the dual constants
	// CLambda (1e-3) and CMu (1e-5) of η = c/epoch.
	Dual dual.Config `json:"dual"`
	// ScoreBound, when > 0, bounds the score of head HeadLogits to
	// |s| ≤ 2·ScoreBound as finetune does (docs/method.md §6): the logits
	// are scaled to mean absolute value 1 before the head, whose weights
	// are kept in the box |v_k| ≤ ScoreBound/10 and |c| ≤ ScoreBound after
	// every step. 0 leaves the score unbounded.
	ScoreBound float64 `json:"score_bound,omitempty"`
	// Seed fixes the initial weights and the batch order (the same for
	// every α, so runs differ only by the regulariser).
	Seed uint64 `json:"seed"`
	// Threads is ONNX Runtime's intra-op thread count (0: 1).
	Threads int `json:"threads"`
	// Log, if set, receives one line per epoch.
	Log func(string) `json:"-"`
}

func (c Config) withDefaults() Config {
	if c.Schedule == "" {
		c.Schedule = ScheduleEpoch
	}
	if c.Head == "" {
		c.Head = HeadInput
	}
	if c.Epochs == 0 {
		c.Epochs = 40
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.LR == 0 {
		c.LR = 1e-2
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.Name == "" {
		switch {
		case c.Alpha == 0:
			c.Name = "baseline (α=0)"
		case c.Schedule == ScheduleStep:
			c.Name = fmt.Sprintf("α=%g, full projections", c.Alpha)
		default:
			c.Name = fmt.Sprintf("α=%g, Algorithm 1", c.Alpha)
		}
	}
	return c
}

// Data is S-MNIST ready for training: the sets and every example's size
// class (s = foreground size above the training set's mean).
type Data struct {
	Train, Test           *Set
	TrainClass, TestClass []int
	// MeanSize is the threshold: the mean foreground size of Train.
	MeanSize float64
}

// Prepare builds S-MNIST from MNIST's training and test sets (the first
// trainN and testN examples; ≤ 0 means all) with the rescaling factor scale
// (≤ 0: DefaultScale).
func Prepare(mnistTrain, mnistTest *Set, trainN, testN int, scale float64) (*Data, error) {
	if err := mnistTrain.check("training"); err != nil {
		return nil, err
	}
	if err := mnistTest.check("test"); err != nil {
		return nil, err
	}
	d := &Data{Train: SMNIST(mnistTrain.Head(trainN), scale), Test: SMNIST(mnistTest.Head(testN), scale)}
	sizes := d.Train.Sizes()
	d.MeanSize = MeanSize(sizes)
	d.TrainClass = SizeClasses(sizes, d.MeanSize)
	d.TestClass = SizeClasses(d.Test.Sizes(), d.MeanSize)
	return d, nil
}

// Epoch is what Run records after each epoch.
type Epoch struct {
	Epoch int `json:"epoch"`
	// TestAcc is the accuracy on S-MNIST's test set (MNIST test and its
	// rescaled copy); Original and Doubled split it by half.
	TestAcc         float64 `json:"test_acc"`
	TestAccOriginal float64 `json:"test_acc_original"`
	TestAccDoubled  float64 `json:"test_acc_doubled"`
	// TrainLoss is the mean cross entropy of the epoch's steps.
	TrainLoss float64 `json:"train_loss"`
	// Lagrangian is the mean minibatch Lagrangian L̂ (before α).
	Lagrangian float64 `json:"lagrangian,omitempty"`
	// SizeF1Test is the F1 of the size predictor (score > 0 ⇒ S+) on the
	// test set; SizeF1Train on the scores cached during the epoch.
	SizeF1Test  float64 `json:"size_f1_test"`
	SizeF1Train float64 `json:"size_f1_train,omitempty"`
	// Projections is the number of Π_C applications this epoch.
	Projections  int     `json:"projections"`
	ProjectionMS float64 `json:"projection_ms"`
	// The dual state at the end of the epoch (dual.EpochStats): dual
	// steps taken, mean and maximum λ, Σ τ, ε before and after the
	// projection and the fraction of active hinges among the small
	// examples of the epoch's batches.
	DualSteps   int     `json:"dual_steps,omitempty"`
	LambdaMean  float64 `json:"lambda_mean,omitempty"`
	LambdaMax   float64 `json:"lambda_max,omitempty"`
	TauSum      float64 `json:"tau_sum,omitempty"`
	EpsBefore   float64 `json:"eps_before,omitempty"`
	EpsAfter    float64 `json:"eps_after,omitempty"`
	HingeActive float64 `json:"hinge_active,omitempty"`
	// WallS is the wall time since the start of training (test evaluation
	// excluded).
	WallS float64 `json:"wall_s"`
}

// Results is one run.
type Results struct {
	Config Config  `json:"config"`
	Steps  int     `json:"steps_per_epoch"`
	Epochs []Epoch `json:"epochs"`
	// FinalAcc is the last epoch's test accuracy; MeanLast and StdLast the
	// mean and standard deviation of the test accuracy over the last
	// min(10, epochs) epochs (the stability measure).
	FinalAcc    float64 `json:"final_acc"`
	MeanLast    float64 `json:"mean_last"`
	StdLast     float64 `json:"std_last"`
	Projections int     `json:"projections"`
	WallS       float64 `json:"wall_s"`
	SizeF1Test  float64 `json:"size_f1_test"`
}

// Names in the training graph.
const (
	sMeasure = models.SMeasureOutput
	regPos   = "reg/pos"
	regNeg   = "reg/neg"
	regEps   = "reg/eps"
	regTerm  = "reg/term"
)

// buildModel returns the network: models.LinearClassifier on 784 inputs
// with its S-measure node wired per head, plus the regulariser's term
// reg/term = Σ pos·s + neg·relu(eps + s) over inputs pos, neg [B,1] and
// eps [1,1] (α folded into pos and neg by the caller).
func buildModel(head string, batch int, seed uint64, bound float64) (*onnx.Model, error) {
	extra := 1
	if head == HeadLogits {
		extra = 0
	}
	m, err := models.LinearClassifier([]int64{Pixels}, 10, extra, seed)
	if err != nil {
		return nil, err
	}
	g := m.Graph()
	node := func(op, out string, in []string, attrs ...*onnx.AttributeProto) {
		name := out + "/" + op
		g.Node = append(g.Node, &onnx.NodeProto{Name: &name, OpType: &op, Input: in, Output: []string{out}, Attribute: attrs})
	}
	switch head {
	case HeadInput:
	case HeadLogits:
		// s = logits·vᵀ + c, v drawn like nn.Linear's default on 10 inputs.
		v := make([]float32, 10)
		for i := range v {
			// A fixed small pattern (seeded by seed) keeps runs reproducible.
			v[i] = float32((float64((seed+uint64(i)*2654435761)%1000)/1000 - 0.5) * 2 / math.Sqrt(10))
		}
		in := "logits"
		if bound > 0 {
			// â = logits / (mean|logits| + δ): Σ|â_k| ≤ 10, so with
			// |v_k| ≤ bound/10 the head's linear part is at most bound.
			box := float32(bound / 10)
			for i := range v {
				v[i] = max(-box, min(box, v[i]*box))
			}
			ones := make([]float32, 10)
			for i := range ones {
				ones[i] = 0.1
			}
			g.Initializer = append(g.Initializer,
				onnx.NewFloat32Tensor("smeasure/mean", []int64{10, 1}, ones),
				onnx.NewFloat32Tensor("smeasure/delta", []int64{1}, []float32{1e-6}))
			node("Neg", "smeasure/neg", []string{"logits"})
			node("Max", "smeasure/abs", []string{"logits", "smeasure/neg"})
			node("MatMul", "smeasure/l1", []string{"smeasure/abs", "smeasure/mean"})
			node("Add", "smeasure/den", []string{"smeasure/l1", "smeasure/delta"})
			node("Div", "smeasure/normed", []string{"logits", "smeasure/den"})
			in = "smeasure/normed"
		}
		g.Initializer = append(g.Initializer,
			onnx.NewFloat32Tensor("smeasure.weight", []int64{1, 10}, v),
			onnx.NewFloat32Tensor("smeasure.bias", []int64{1}, []float32{0}))
		node("Gemm", sMeasure, []string{in, "smeasure.weight", "smeasure.bias"}, onnx.IntAttr("transB", 1))
		g.Output = append(g.Output, onnx.TensorValueInfo(sMeasure, onnx.Float32, int64(batch), 1))
	default:
		return nil, fmt.Errorf("smnist: unknown head %q (want %q or %q)", head, HeadInput, HeadLogits)
	}
	B := int64(batch)
	g.Input = append(g.Input, onnx.TensorValueInfo(regPos, onnx.Float32, B, 1), onnx.TensorValueInfo(regNeg, onnx.Float32, B, 1), onnx.TensorValueInfo(regEps, onnx.Float32, 1, 1))
	g.Initializer = append(g.Initializer, onnx.NewInt64Tensor("reg/shape", []int64{1}, []int64{1}))
	node("Mul", "reg/lin", []string{sMeasure, regPos})
	node("Add", "reg/z", []string{sMeasure, regEps})
	node("Relu", "reg/hinge", []string{"reg/z"})
	node("Mul", "reg/negterm", []string{"reg/hinge", regNeg})
	node("Add", "reg/sum", []string{"reg/lin", "reg/negterm"})
	node("ReduceSum", "reg/total", []string{"reg/sum"}, onnx.IntAttr("keepdims", 0))
	node("Reshape", regTerm, []string{"reg/total", "reg/shape"})
	return m, nil
}

// feeder fills a session's inputs by name.
type feeder struct {
	s      *runtime.Session
	inputs []*runtime.Tensor
}

func newFeeder(s *runtime.Session, byName map[string]*runtime.Tensor) (*feeder, error) {
	f := &feeder{s: s, inputs: make([]*runtime.Tensor, len(s.Inputs))}
	for i, in := range s.Inputs {
		t, ok := byName[in.Name]
		if !ok {
			return nil, fmt.Errorf("smnist: nothing to feed session input %q", in.Name)
		}
		f.inputs[i] = t
	}
	return f, nil
}

// Run trains one configuration on d and evaluates it on d.Test after every
// epoch. runtime.Init must have been called.
func Run(cfg Config, d *Data) (*Results, error) {
	cfg = cfg.withDefaults()
	if cfg.Schedule != ScheduleEpoch && cfg.Schedule != ScheduleStep {
		return nil, fmt.Errorf("smnist: unknown schedule %q (want %q or %q)", cfg.Schedule, ScheduleEpoch, ScheduleStep)
	}
	if cfg.Alpha < 0 || math.IsNaN(cfg.Alpha) {
		return nil, fmt.Errorf("smnist: alpha %g must be ≥ 0", cfg.Alpha)
	}
	if d == nil || d.Train.Len() < cfg.Batch || d.Test.Len() == 0 {
		return nil, errors.New("smnist: need at least one batch of training data and some test data")
	}
	B := cfg.Batch
	if cfg.ScoreBound < 0 || math.IsNaN(cfg.ScoreBound) || (cfg.ScoreBound > 0 && cfg.Head != HeadLogits) {
		return nil, fmt.Errorf("smnist: score bound %g: want ≥ 0, and > 0 only with head %q", cfg.ScoreBound, HeadLogits)
	}
	net, eval, ef, err := newNetwork(cfg, d)
	if err != nil {
		return nil, err
	}
	defer net.train.Close()
	defer eval.Close()

	// The Lagrangian's state over the training set; batches balanced by
	// size class for every run (the baseline included), as the paper draws
	// them, so that the runs see the same batches.
	ids := make([]int64, d.Train.Len())
	for i := range ids {
		ids[i] = int64(i)
	}
	reg, err := dual.New(cfg.Dual, ids, d.TrainClass)
	if err != nil {
		return nil, err
	}
	cfg.Dual = reg.Config()
	cache := reg.NewScoreCache()
	sampler, err := dual.NewSampler(ids, d.TrainClass, B, cfg.Seed)
	if err != nil {
		return nil, err
	}
	// The baseline leaves the Lagrangian out and still records the scores
	// (for the size F1 of the training epoch). Each epoch's dual step reads
	// only that epoch's scores.
	lc := dual.LoopConfig{Projection: dual.Projection(cfg.Schedule), Alpha: cfg.Alpha, InGraph: true, FreshCache: true}
	loopReg := reg
	if cfg.Alpha == 0 {
		loopReg = nil
	}
	loop, err := dual.NewLoop(loopReg, cache, lc)
	if err != nil {
		return nil, err
	}

	res := &Results{Config: cfg, Steps: d.Train.Len() / B}
	var wall time.Duration
	for e := 1; e <= cfg.Epochs; e++ {
		t0 := time.Now()
		net.lossSum = 0
		st, err := loop.RunEpoch(e, res.Steps, sampler, net)
		if err != nil {
			return nil, fmt.Errorf("smnist: epoch %d: %w", e, err)
		}
		wall += time.Since(t0)
		rec := Epoch{Epoch: e, Lagrangian: st.Lagrangian, Projections: st.Projections, WallS: wall.Seconds(),
			ProjectionMS: st.ProjectionTime.Seconds() * 1e3, TrainLoss: net.lossSum / float64(res.Steps),
			DualSteps: st.DualSteps, LambdaMean: st.LambdaMean, LambdaMax: st.LambdaMax, TauSum: st.TauSum,
			EpsBefore: st.EpsBefore, EpsAfter: st.EpsAfter, HingeActive: st.HingeActive}
		rec.SizeF1Train, _ = metrics.SizeF1(cache.Scores, cache.Seen, d.TrainClass, 1)
		if err := evaluate(ef, eval, d, B, net.x, net.target, &rec); err != nil {
			return nil, fmt.Errorf("smnist: epoch %d: evaluation: %w", e, err)
		}
		res.Epochs = append(res.Epochs, rec)
		res.Projections += rec.Projections
		if cfg.Log != nil {
			cfg.Log(fmt.Sprintf("%s: epoch %d/%d: test acc %.4f (orig %.4f, doubled %.4f), loss %.4f, size F1 %.3f, λ mean %.3g max %.3g, Στ %.3g, ε %.3g→%.3g, hinge %.3f, %d projections, %.1fs",
				cfg.Name, e, cfg.Epochs, rec.TestAcc, rec.TestAccOriginal, rec.TestAccDoubled, rec.TrainLoss, rec.SizeF1Test,
				rec.LambdaMean, rec.LambdaMax, rec.TauSum, rec.EpsBefore, rec.EpsAfter, rec.HingeActive, rec.Projections, rec.WallS))
		}
	}
	last := res.Epochs[len(res.Epochs)-1]
	res.FinalAcc, res.WallS, res.SizeF1Test = last.TestAcc, last.WallS, last.SizeF1Test
	res.MeanLast, res.StdLast = LastStats(res.Epochs, 10)
	return res, nil
}

// newNetwork compiles the one-layer network with its S-measure head into
// training and evaluation graphs, opens both, and returns the network the
// dual loop trains, with the evaluation session and its feeder. The
// caller closes net.train and eval.
func newNetwork(cfg Config, d *Data) (net *network, eval *runtime.Session, ef *feeder, err error) {
	B := cfg.Batch
	m, err := buildModel(cfg.Head, B, cfg.Seed, cfg.ScoreBound)
	if err != nil {
		return nil, nil, nil, err
	}
	gs, err := grad.Build(m, grad.Config{
		Prober:     ortprobe.Prober{Threads: cfg.Threads},
		Trainable:  []string{"fc.*", "smeasure.*"},
		Loss:       grad.Loss{Kind: grad.LossCrossEntropy, Output: "logits", NoIgnore: true},
		GradInputs: []string{regTerm},
		InputShapes: map[string][]int64{
			"input": {int64(B), Pixels}, regPos: {int64(B), 1}, regNeg: {int64(B), 1}, regEps: {1, 1},
		},
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("smnist: compiling the training graph: %w", err)
	}
	open := func(mm *onnx.Model) (*runtime.Session, error) {
		b, err := mm.Marshal()
		if err != nil {
			return nil, err
		}
		return runtime.NewSession(b, runtime.Options{Threads: cfg.Threads})
	}
	train, err := open(gs.Training)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("smnist: training session: %w", err)
	}
	defer func() {
		if err != nil {
			train.Close()
		}
	}()
	if eval, err = open(gs.Eval); err != nil {
		return nil, nil, nil, fmt.Errorf("smnist: evaluation session: %w", err)
	}
	defer func() {
		if err != nil {
			eval.Close()
		}
	}()

	// Parameters and the optimiser.
	params := make([]*optim.Param, len(gs.Params))
	byName := map[string]*runtime.Tensor{}
	for i, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			return nil, nil, nil, err
		}
		params[i] = &optim.Param{Name: p.GetName(), Shape: p.GetDims(), Data: v}
		byName[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
	}
	opt, err := optim.New(params, optim.DefaultConfig(optim.Adam))
	if err != nil {
		return nil, nil, nil, err
	}
	x := make([]float32, B*Pixels)
	target := make([]int64, B)
	posT, negT, epsT := make([]float32, B), make([]float32, B), make([]float32, 1)
	byName["input"] = runtime.NewFloat32([]int64{int64(B), Pixels}, x)
	byName[grad.TargetName] = runtime.NewInt64([]int64{int64(B)}, target)
	byName[regPos] = runtime.NewFloat32([]int64{int64(B), 1}, posT)
	byName[regNeg] = runtime.NewFloat32([]int64{int64(B), 1}, negT)
	byName[regEps] = runtime.NewFloat32([]int64{1, 1}, epsT)
	byName[grad.GradInPrefix+regTerm] = runtime.NewFloat32([]int64{1}, []float32{1})
	tf, err := newFeeder(train, byName)
	if err != nil {
		return nil, nil, nil, err
	}
	ef, err = newFeeder(eval, byName)
	if err != nil {
		return nil, nil, nil, err
	}
	lossOut, sOut := train.OutputIndex(grad.LossName), train.OutputIndex(sMeasure)
	gradOut := make([]int, len(params))
	for i, p := range gs.Manifest.Params {
		if p.Name != params[i].Name {
			return nil, nil, nil, fmt.Errorf("smnist: parameter order: manifest %q, params %q", p.Name, params[i].Name)
		}
		gradOut[i] = train.OutputIndex(p.Grad)
	}
	if lossOut < 0 || sOut < 0 {
		return nil, nil, nil, errors.New("smnist: training graph lacks loss or s_measure outputs")
	}

	net = &network{train: train, feed: tf, d: d, x: x, target: target, posT: posT, negT: negT, epsT: epsT,
		params: params, opt: opt, lr: cfg.LR, gradOut: gradOut, lossOut: lossOut, sOut: sOut, bound: cfg.ScoreBound}
	return net, eval, ef, nil
}

// network is the classifier as Algorithm 1's Network: the training graph
// computes the cross entropy, the α-weighted Lagrangian term (from the
// coefficients fed to reg/pos, reg/neg, reg/eps) and both gradients in one
// pass; Adam steps the weights.
type network struct {
	train            *runtime.Session
	feed             *feeder
	d                *Data
	x                []float32
	target           []int64
	posT, negT, epsT []float32
	params           []*optim.Param
	opt              *optim.Optimizer
	lr               float64
	gradOut          []int
	lossOut, sOut    int
	bound            float64 // Config.ScoreBound
	// lossSum adds up the epoch's cross entropy.
	lossSum float64
}

func (n *network) Forward(b *dual.Batch) error {
	for r, id := range b.IDs {
		img := n.d.Train.Image(int(id))
		row := n.x[r*Pixels : (r+1)*Pixels]
		for k, v := range img {
			row[k] = float32(v) / 255
		}
		n.target[r] = int64(n.d.Train.Labels[id])
	}
	if b.Pos != nil { // the baseline feeds zeros: no regulariser term
		b.CoefficientsFloat32(n.posT, n.negT, n.epsT)
	}
	outs, err := n.train.Run(n.feed.inputs...)
	if err != nil {
		return err
	}
	for i, p := range n.params {
		p.Grad = outs[n.gradOut[i]].Float32
	}
	n.lossSum += float64(outs[n.lossOut].Float32[0])
	for r, v := range outs[n.sOut].Float32 {
		b.Scores[r] = float64(v)
	}
	return nil
}

func (n *network) Update(*dual.Batch) error {
	if err := n.opt.Step(n.lr); err != nil {
		return err
	}
	if n.bound > 0 {
		for _, p := range n.params {
			box := float32(n.bound)
			switch p.Name {
			case "smeasure.weight":
				box /= 10
			case "smeasure.bias":
			default:
				continue
			}
			for i, v := range p.Data {
				p.Data[i] = max(-box, min(box, v))
			}
		}
	}
	return nil
}

// LastStats returns the mean and the (population) standard deviation of
// the test accuracy over the last k epochs.
func LastStats(eps []Epoch, k int) (mean, std float64) {
	k = min(k, len(eps))
	if k == 0 {
		return math.NaN(), math.NaN()
	}
	tail := eps[len(eps)-k:]
	for _, e := range tail {
		mean += e.TestAcc
	}
	mean /= float64(k)
	for _, e := range tail {
		std += (e.TestAcc - mean) * (e.TestAcc - mean)
	}
	return mean, math.Sqrt(std / float64(k))
}

// evaluate runs the evaluation graph over d.Test in batches of B (the last
// one padded) and fills rec's accuracies and size F1.
func evaluate(f *feeder, s *runtime.Session, d *Data, B int, x []float32, target []int64, rec *Epoch) error {
	logitsOut, sOut := s.OutputIndex("logits"), s.OutputIndex(sMeasure)
	if logitsOut < 0 || sOut < 0 {
		return errors.New("evaluation graph lacks logits or s_measure")
	}
	n := d.Test.Len()
	var right, rightOrig, rightDbl, nOrig, nDbl int
	scores := make([]float64, n)
	for lo := 0; lo < n; lo += B {
		for b := range B {
			i := min(lo+b, n-1)
			img := d.Test.Image(i)
			row := x[b*Pixels : (b+1)*Pixels]
			for k, v := range img {
				row[k] = float32(v) / 255
			}
			target[b] = int64(d.Test.Labels[i])
		}
		outs, err := s.Run(f.inputs...)
		if err != nil {
			return err
		}
		lg := outs[logitsOut].Float32
		for b := 0; b < B && lo+b < n; b++ {
			i := lo + b
			best := 0
			for k := 1; k < 10; k++ {
				if lg[b*10+k] > lg[b*10+best] {
					best = k
				}
			}
			ok := best == d.Test.Labels[i]
			dbl := d.Test.Doubled != nil && d.Test.Doubled[i]
			if ok {
				right++
			}
			if dbl {
				nDbl++
				if ok {
					rightDbl++
				}
			} else {
				nOrig++
				if ok {
					rightOrig++
				}
			}
			scores[i] = float64(outs[sOut].Float32[b])
		}
	}
	rec.TestAcc = float64(right) / float64(n)
	rec.TestAccOriginal = float64(rightOrig) / float64(max(1, nOrig))
	rec.TestAccDoubled = float64(rightDbl) / float64(max(1, nDbl))
	rec.SizeF1Test, _ = metrics.SizeF1(scores, nil, d.TestClass, 1)
	return nil
}
