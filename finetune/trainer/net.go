// Package trainer is a fine-tuning run's graph side: it reads the base
// network's contract, compiles the training graph (the loss, the size
// regularizer's head and term, mixed precision), opens the sessions that
// run the steps and the optimiser, and scores the current weights. The
// finetune package runs the loop around it (data, checkpoints, history,
// early stopping) and never touches a graph or a session itself.
package trainer

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Spec is what the training graph and its sessions take from a run's
// configuration (finetune.Config's fields of the same names).
type Spec struct {
	Trainable            string
	Batch, Height, Width int
	Ignore               int
	Loss                 string
	FocalGamma           float64
	// ClassWeights resolves the loss's class weights (nil: none); it runs
	// after the loss is read, so that errors come in the same order.
	ClassWeights func() ([]float64, error)
	// ClassWeightsHow says where the weights came from, for the log.
	ClassWeightsHow       string
	Optimizer             string
	Momentum, WeightDecay *float64
	Precision, ConvGrad   string
	Device, Resident      string
	Threads               int
	CUDAGraph             bool
	CUDAOptions           map[string]string
	Seed                  uint64
	Accumulate            int
	// Regularizer, with Alpha > 0, adds the size regularizer over the
	// training examples' size classes SizeClasses (split at
	// SizeThreshold, for its errors).
	Regularizer   *RegularizerConfig
	SizeClasses   []int
	SizeThreshold float64
}

// Net is the network a run trains: the base model and its contract, and
// once built the training session, its parameters and the regularizer.
type Net struct {
	base   *onnx.Model // inference network (new head applied)
	path   string      // the base model's file, for messages
	ct     *contract.Contract
	spec   Spec
	params []*optim.Param
	step   *stepper
	reg    *regularizer // nil for the baseline
	scaler *LossScaler  // nil unless Precision fp16
	par    *dataparallel.Group
	notice func(Notice)
	log    io.Writer
}

// Open takes the base network m (loaded from path) and reads its contract
// with the run's overrides, refusing the models that cannot be trained.
// Notices and log lines go to notice and log.
func Open(m *onnx.Model, path string, ov contract.Overrides, par *dataparallel.Group, notice func(Notice), log io.Writer) (*Net, error) {
	if q := onnx.Quantized(m); len(q) > 0 {
		return nil, fmt.Errorf("%s: %w", path, &network.QuantizedError{Ops: q})
	}
	ct, err := ReadContract(m, ov)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Net{base: m, path: path, ct: ct, par: par, notice: notice, log: log}, nil
}

// Contract is how the base network is fed and read.
func (n *Net) Contract() *contract.Contract { return n.ct }

// Params are the trained parameters, in Go memory (Pull brings them up
// to date, Push sends edits back).
func (n *Net) Params() []*optim.Param { return n.params }

// Regularized says whether the size regularizer is on.
func (n *Net) Regularized() bool { return n.reg != nil }

// SizeHeads is the number of size-head outputs (0 without the regularizer).
func (n *Net) SizeHeads() int {
	if n.reg == nil {
		return 0
	}
	return n.reg.heads
}

// Close releases the sessions.
func (n *Net) Close() {
	if n.reg != nil {
		n.reg.close()
	}
	if n.step != nil {
		n.step.close()
	}
}

// Build compiles the training graph for spec and opens the stepper that
// runs it, with the regularizer where spec asks for one.
func (n *Net) Build(spec Spec) error {
	n.spec = spec
	if r := spec.Regularizer; r != nil && r.Alpha > 0 {
		var err error
		if n.reg, err = newRegularizer(*r, spec.SizeClasses, spec.SizeThreshold); err != nil {
			return err
		}
	}
	gs, err := n.compile()
	if err != nil {
		return err
	}
	return n.openStep(gs)
}

// compile builds the training graph: the base model with the size head
// where the regularizer is on, the trainable parameters, the loss with its
// class weights, and mixed precision.
func (n *Net) compile() (*grad.Graphs, error) {
	spec := &n.spec
	patterns, err := TrainablePatterns(n.base, spec.Trainable)
	if err != nil {
		return nil, err
	}
	trainModel := n.base.Clone()
	if err := network.SetBatch(trainModel, int64(spec.Batch)); err != nil {
		return nil, err
	}
	ignore := int64(spec.Ignore)
	gc := grad.Config{InputShapes: map[string][]int64{}}
	if n.reg != nil {
		head, regGC, err := n.reg.addToGraph(trainModel, spec.Batch, spec.Seed)
		if err != nil {
			return nil, err
		}
		gc = regGC
		for _, h := range head {
			patterns = append(patterns, "re:"+regexp.QuoteMeta(h))
		}
	}
	gc.Trainable = patterns
	// The steps read the loss, the gradients and the regularizer's
	// ExtraOutputs, never the logits: no copy of them per step.
	gc.OmitModelOutputs = true
	gc.InputShapes[n.ct.Input] = n.ct.InputLayout.Shape(spec.Batch, spec.Height, spec.Width)
	terms, err := LossTerms(spec.Loss, spec.FocalGamma)
	if err != nil {
		return nil, err
	}
	gc.Loss = trainingLoss(n.ct, ignore, terms)
	if spec.ClassWeights != nil {
		if gc.Loss.ClassWeights, err = spec.ClassWeights(); err != nil {
			return nil, err
		}
	}
	if gc.Loss.ClassWeights != nil {
		if gc.Loss.Kind != grad.LossCrossEntropy {
			return nil, fmt.Errorf("class weights need a softmax head; %s is a sigmoid (binary) head", n.path)
		}
		fmt.Fprintf(n.log, "class weights (%s): %s\n", spec.ClassWeightsHow, formatWeights(gc.Loss.ClassWeights))
	}
	mp, err := n.precision(spec.Precision, spec.Device)
	if err != nil {
		return nil, err
	}
	if mp.Half {
		// Mixed precision: the heavy operators in half precision behind
		// Casts (the parameters stay float32 masters); float16 scales
		// the loss.
		if _, err := autocast.Apply(trainModel, mp.Type); err != nil {
			return nil, &setting.Error{Setting: "precision", Value: spec.Precision, Err: err}
		}
		gc.MinOpset = mp.Type.MinOpset()
		if mp.Type == autocast.Float16 {
			n.scaler = &LossScaler{Scale: InitialLossScale}
		}
	}
	gc.Loss.Scale = n.par.Parallel() || n.scaler != nil // each rank's share of the batch's loss; the loss scale
	gc.Prober = ortprobe.Prober{Threads: spec.Threads}
	// Winograd convolutions pay on ONNX Runtime's CPU provider; cuDNN
	// chooses its own convolution algorithms, and CUDA sums contiguous axes
	// with ONNX Runtime's own kernels rather than cuDNN's reduction.
	gc.DirectConvs = MayRunOnGPU(spec.Device)
	gc.MatrixReductions = gc.DirectConvs
	gc.WhereMasks = gc.DirectConvs // one Where per mask on CUDA; Cast+Mul is faster on the CPU
	if gc.ConvGrad, err = n.convGrad(spec.ConvGrad, gc.DirectConvs); err != nil {
		return nil, err
	}
	gs, err := grad.Build(trainModel, gc)
	if err != nil {
		if b := n.ct.Batch; b > 0 && b != int64(spec.Batch) {
			return nil, &setting.Error{Setting: "batch", Value: strconv.Itoa(spec.Batch), Err: fmt.Errorf("%s declares a fixed batch of %d and training at this batch failed: %w; its graph may bake the batch size in: train with a batch of %d",
				n.path, b, err, b)}
		}
		return nil, err
	}
	return gs, nil
}

// openStep takes the parameters out of the compiled graph, configures
// the optimiser and opens the stepper that runs the steps.
func (n *Net) openStep(gs *grad.Graphs) error {
	spec := &n.spec
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			return err
		}
		n.params = append(n.params, &optim.Param{Name: p.GetName(), Shape: p.GetDims(), Data: v})
		// From here on the weight lives in n.params, and ValidationModel
		// writes it back into a copy of the base: the base's own copy
		// would hold the model's size of memory for the whole run.
		if w := n.base.Initializer(p.GetName()); w != nil {
			onnx.DropData(w)
		}
	}
	alg, err := optim.ParseAlgorithm(spec.Optimizer)
	if err != nil {
		return err
	}
	oc := optim.DefaultConfig(alg)
	oc.NoDecay = optim.NoDecayVectors
	if spec.Momentum != nil {
		oc.Momentum = *spec.Momentum
	}
	if spec.WeightDecay != nil {
		oc.WeightDecay = *spec.WeightDecay
	}
	res, err := n.residentState(spec.Resident, spec.Device)
	if err != nil {
		return err
	}
	var outputs []string
	if n.reg != nil {
		outputs = append(outputs, sizehead.Scores)
	}
	ropts := runtime.Options{Device: spec.Device, Threads: spec.Threads, Log: n.log}
	if MayRunOnGPU(spec.Device) {
		ropts.CUDAOptions = CUDAOptions(spec.Precision, spec.CUDAOptions)
		if search := ropts.CUDAOptions[runtime.CUDAConvSearch]; search != "" && spec.CUDAOptions[runtime.CUDAConvSearch] == "" {
			n.notice(DefaultNotice{Setting: "precision", Value: spec.Precision, Override: "cuda_options",
				Chosen: fmt.Sprintf("CUDA option %s=%s", runtime.CUDAConvSearch, search),
				Why:    "cuDNN's exhaustive search re-ran every step in half precision"})
		}
	}
	ropts.ConvGradCUDA = grad.UsesConvGrad(gs.Training.Proto)
	if n.step, err = openStepper(n.notice, spec.Resident, res, func(res bool) (*stepper, error) {
		return newStepper(gs, n.params, n.ct.Input, oc, res, spec.CUDAGraph, outputs, n.scaler, ropts)
	}); err != nil {
		return err
	}
	if n.reg != nil {
		if err := n.reg.bind(n.step); err != nil {
			return err
		}
	}
	if err := bindLossScale(n.par, n.step); err != nil {
		return err
	}
	// Compiling left Go's heap at its peak (the model, its clones, the
	// shape probe's copy), mostly garbage now: hand it back to the OS
	// before the step's arena grows, so that the process peaks at the
	// larger of the two rather than their sum.
	debug.FreeOSMemory()
	return nil
}

// bindLossScale feeds the training graph's loss scale (present when the
// graph was built for several ranks).
func bindLossScale(p *dataparallel.Group, s *stepper) error {
	if !p.Parallel() {
		return nil
	}
	i := s.inputIndex(grad.LossScaleName)
	if i < 0 {
		return fmt.Errorf("training graph lacks its %q input", grad.LossScaleName)
	}
	s.setInput(i, runtime.NewFloat32(s.inputs[i].Shape, p.NewLossScale()))
	return nil
}

// CUDAOptions are the CUDA provider options of a training session at
// precision: TF32 in cuDNN's and cuBLAS's float32 kernels, as PyTorch does
// for convolutions, except under fp32; cuDNN's heuristic convolution
// search in half precision (runtime.HalfPrecisionCUDAOptions); then own
// (the run's Config.CUDAOptions) over them.
func CUDAOptions(precision string, own map[string]string) map[string]string {
	opts := map[string]string{"use_tf32": map[bool]string{true: "0", false: "1"}[strings.EqualFold(precision, "fp32")]}
	maps.Copy(opts, own)
	_, half := autocast.ForPrecision(precision)
	return runtime.HalfPrecisionCUDAOptions(opts, half)
}

// Loop returns the Algorithm 1 loop the run's steps go through: the
// regularizer's, or for the baseline one that only steps the network.
// epoch ≥ 1 is the epoch the next step belongs to, step the steps of it
// already taken and perEpoch its length. Build it after a restore.
func (n *Net) Loop(epoch, step, perEpoch int) (*dual.Loop, error) {
	if n.reg == nil {
		return dual.NewLoop(nil, nil, dual.LoopConfig{})
	}
	return n.reg.loop(epoch, step, perEpoch)
}

// StepResult is one optimiser step's outcome.
type StepResult struct {
	// Loss and LR are the step's, for the history; Reg is the
	// regularizer's term (α times its Lagrangian), 0 without one.
	Loss, LR, Reg float64
	// Skipped reports a step whose scaled gradients overflowed (mixed
	// precision): no update, the loss scale halved.
	Skipped bool
}

// Step runs one optimiser step on batch b (whose examples are ids)
// through alg; lr gives the learning rate when the update is applied.
func (n *Net) Step(alg *dual.Loop, ids []int64, b *data.Batch, lr func() float64) (StepResult, error) {
	st := &trainStep{n: n, batch: b, lrAt: lr}
	v, err := alg.Step(ids, st)
	if err != nil {
		return StepResult{}, err
	}
	res := StepResult{Loss: st.loss, LR: st.lr, Skipped: st.skipped}
	if n.reg != nil {
		res.Reg = n.reg.cfg.Alpha * v
	}
	return res, nil
}

// EpochStats are the regularizer's statistics of an epoch that st
// describes, for the history (nil without the regularizer).
func (n *Net) EpochStats(st dual.EpochStats) map[string]float64 {
	if n.reg == nil {
		return nil
	}
	return n.reg.epochStats(st)
}

// LossScale is mixed precision's dynamic loss scale (nil in float32):
// checkpointed for an exact resume, and set back by SetLossScale.
func (n *Net) LossScale() *LossScaler { return n.scaler }

// SetLossScale restores a checkpointed loss scale (nothing in float32).
func (n *Net) SetLossScale(l *LossScaler) {
	if n.scaler != nil && l != nil {
		*n.scaler = *l
	}
}

// Pull brings Params up to date with the session's (the resident form's)
// parameters.
func (n *Net) Pull() error { return n.step.pull() }

// Push sends Params to the session.
func (n *Net) Push() error { return n.step.push() }

// OptimState is the optimiser's state, for a checkpoint.
func (n *Net) OptimState() (*optim.State, error) { return n.step.optimState() }

// SetOptimState restores the optimiser's state.
func (n *Net) SetOptimState(st *optim.State) error { return n.step.setOptimState(st) }

// RegularizerState is the regularizer's part of a checkpoint (nil
// without one).
func (n *Net) RegularizerState() ([]byte, error) {
	if n.reg == nil {
		return nil, nil
	}
	return n.reg.state()
}

// RestoreRegularizer restores the regularizer's state from a checkpoint.
func (n *Net) RestoreRegularizer(b []byte) error {
	if n.reg == nil {
		return nil
	}
	return n.reg.restore(b)
}

// ValidationModel writes the current weights (avg in their place where
// given: the moving average, by Params index) into a copy of the network;
// with the regularizer, the size head is appended as a second output so
// that validation can score the size predictor too.
func (n *Net) ValidationModel(avg [][]float32) (*onnx.Model, error) {
	if err := n.step.pull(); err != nil {
		return nil, err
	}
	m := n.base.Clone()
	var ws []network.Weight
	var head []*optim.Param
	for i, p := range n.params {
		if strings.HasPrefix(p.Name, sizehead.Prefix) {
			head = append(head, p)
			continue
		}
		w := network.Weight{Name: p.Name, Shape: p.Shape, Data: p.Data}
		if avg != nil {
			w.Data = avg[i]
		}
		ws = append(ws, w)
	}
	if err := network.SetWeights(m, ws); err != nil {
		return nil, err
	}
	if n.reg != nil {
		if err := sizehead.Append(m, n.reg.cfg.Feature, n.reg.cfg.ScoreBound, head); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// openStepper opens the stepper in the form residentState chose. Where
// "auto" chose the device form and it cannot open (a provider without the
// data transfer it needs, say), the host form still trains, only slower:
// a FallbackNotice says so.
func openStepper(notice func(Notice), setting string, resident bool, open func(resident bool) (*stepper, error)) (*stepper, error) {
	s, err := open(resident)
	if err == nil || !resident || strings.EqualFold(setting, "on") {
		return s, err
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	notice(FallbackNotice{Setting: "resident", Value: "auto", Reason: msg + "; keeping the training state in host memory"})
	return open(false)
}

// Precision is what Config.Precision asks of the training graph.
type Precision struct {
	Half bool          // the heavy operators in half precision (onnx/autocast)
	Type autocast.Type // which half precision
}

// precision reads the run's Precision on device. fp16 excludes
// data-parallel runs (both use the loss_scale input). bf16 needs ONNX
// Runtime's CUDA provider, the only one with bfloat16 convolutions:
// refused with Device cpu; with Device auto on a machine without a GPU
// the run trains in float32 and says so in one line.
func (n *Net) precision(precision, device string) (Precision, error) {
	mp, err := ParsePrecision(precision)
	switch {
	case err != nil:
	case mp.Half && mp.Type == autocast.Float16 && n.par.Parallel():
		err = &setting.Error{Setting: "precision", Value: precision, Err: errors.New("data-parallel runs scale each rank's loss by its share of the batch through the same input as the loss scale; run one process, or fp32/tf32/bf16")}
	case mp.Half && mp.Type == autocast.BFloat16 && !MayRunOnGPU(device):
		if strings.EqualFold(device, runtime.DeviceCPU) {
			err = &setting.Error{Setting: "precision", Value: precision, Err: errors.New("on the CPU (Device cpu): ONNX Runtime's CPU provider has no bfloat16 convolutions; bf16 trains on a CUDA GPU (use fp32 on the CPU)")}
			break
		}
		n.notice(FallbackNotice{Setting: "precision", Value: "bf16",
			Reason: "no CUDA GPU here, and ONNX Runtime's CPU provider has no bfloat16 convolutions; training in float32"})
		mp = Precision{}
	}
	return mp, err
}

// convGrad returns the convolution classes the training graph hands to
// ConvGrad (Config.ConvGrad, checked by Validate); none, with one line,
// where the run may not use a GPU (Device auto without one).
func (n *Net) convGrad(value string, gpu bool) (grad.ConvClasses, error) {
	classes, err := grad.ParseConvClasses(value)
	if err != nil || classes == 0 || gpu {
		return classes, err
	}
	n.notice(FallbackNotice{Setting: "conv_grad", Value: value,
		Reason: "no CUDA GPU here, and ConvGrad's kernel is cuDNN's; training with the standard forms"})
	return 0, nil
}

// parsePrecision checks a Precision value. fp32 and tf32 differ only on
// GPUs with TF32 (runtime options); on the CPU both are float32.
func ParsePrecision(s string) (Precision, error) {
	if typ, ok := autocast.ForPrecision(s); ok {
		return Precision{Half: true, Type: typ}, nil
	}
	switch strings.ToLower(s) {
	case "", "tf32", "fp32":
		return Precision{}, nil
	}
	return Precision{}, &setting.Error{Setting: "precision", Value: s, Err: errors.New("want fp32, tf32, fp16 or bf16")}
}

// residentState says whether the training state lives on the device
// (finetune/resident) rather than in Go memory: Resident "on", or "auto"
// (the default) where the steps may run on a GPU, whose copies of every
// parameter and gradient each step would cost more than the step's
// compute saves. Data-parallel runs sum their gradients in Go, and
// accumulation on the host: host form.
func (n *Net) residentState(value, device string) (bool, error) {
	if err := CheckResident(value); err != nil {
		return false, err
	}
	switch strings.ToLower(value) {
	case "on":
		if n.par.Parallel() {
			return false, &setting.Error{Setting: "resident", Value: value, Err: errors.New("data-parallel runs sum their gradients across ranks in host memory; use off or auto")}
		}
		return true, nil
	case "off":
		return false, nil
	}
	return MayRunOnGPU(device) && !n.par.Parallel() && n.accumulate() == 1, nil
}

// accumulate is the number of batches an optimiser step sums.
func (n *Net) accumulate() int { return max(n.spec.Accumulate, 1) }

// CheckResident checks a Resident value.
func CheckResident(s string) error {
	switch strings.ToLower(s) {
	case "", "auto", "on", "off":
		return nil
	}
	return &setting.Error{Setting: "resident", Value: s, Err: errors.New("want auto, on or off")}
}

// MayRunOnGPU reports whether sessions for device may run on the CUDA
// provider: cuda, or auto where the provider prepared (an auto that will
// fall back to the CPU is compiled for the CPU).
func MayRunOnGPU(device string) bool {
	switch strings.ToLower(device) {
	case runtime.DeviceCUDA:
		return true
	case runtime.DeviceAuto:
		_, err := runtime.CUDADevices()
		return err == nil
	}
	return false
}

// formatWeights prints weights for the log.
func formatWeights(w []float64) string {
	s := make([]string, len(w))
	for i, v := range w {
		s[i] = fmt.Sprintf("%.4g", v)
	}
	return strings.Join(s, ", ")
}

// ReadContract reads the network's contract with the run's layout and
// output overrides, and refuses the models whose outputs cannot be trained.
func ReadContract(m *onnx.Model, ov contract.Overrides) (*contract.Contract, error) {
	ct, err := contract.Read(m, ov)
	if err != nil {
		return nil, err
	}
	switch {
	case ct.Kind == contract.Labels:
		return nil, fmt.Errorf("output %q holds labels (an ArgMax inside the graph), which carry no gradient; fine-tune the model exported without its final ArgMax", ct.Output)
	case ct.ResizedAfterActivation:
		return nil, fmt.Errorf("output %q: a Resize follows the final %s, so the scores before it are at another size than the output; fine-tuning needs the activation last", ct.Output, ct.Kind)
	case ct.ScoresClassAxis != 1 && ct.ScoresClassAxis != 3:
		return nil, &contract.LayoutError{Msg: fmt.Sprintf("output %q: the class axis of %q cannot be traced through the graph's transposes", ct.Output, ct.Scores)}
	case ct.Classes == 0:
		return nil, fmt.Errorf("output %q: its class count is neither declared nor readable from the final convolution", ct.Output)
	}
	return ct, nil
}

// trainingLoss is the loss on the scores before the model's final
// activation: softmax cross entropy for logits and softmax heads (never on
// probabilities), per-channel binary cross entropy for sigmoid and binary
// heads (one logit channel); terms (lossTerms) make it focal, add Dice, or
// replace it with Dice.
func trainingLoss(ct *contract.Contract, ignore int64, terms grad.Loss) grad.Loss {
	l := grad.Loss{Kind: grad.LossCrossEntropy, Output: ct.Scores, ClassAxis: ct.ScoresClassAxis, IgnoreIndex: &ignore,
		Focal: terms.Focal, Dice: terms.Dice, Lovasz: terms.Lovasz, NoPixel: terms.NoPixel}
	if ct.Thresholded() {
		l.Kind = grad.LossSigmoidBCE
	}
	return l
}

// lossTerms reads Config.Loss and FocalGamma into the loss's terms.
func LossTerms(loss string, gamma float64) (grad.Loss, error) {
	if gamma == 0 {
		gamma = 2
	}
	if !(gamma > 0 && gamma <= 10) {
		return grad.Loss{}, fmt.Errorf("focal gamma %v: want a number in (0, 10]", gamma)
	}
	switch strings.ToLower(loss) {
	case "", "ce":
		return grad.Loss{}, nil
	case "focal":
		return grad.Loss{Focal: gamma}, nil
	case "dice":
		return grad.Loss{NoPixel: true, Dice: 1}, nil
	case "lovasz":
		return grad.Loss{NoPixel: true, Lovasz: 1}, nil
	case "ce+dice":
		return grad.Loss{Dice: 1}, nil
	case "ce+lovasz":
		return grad.Loss{Lovasz: 1}, nil
	case "focal+dice":
		return grad.Loss{Focal: gamma, Dice: 1}, nil
	}
	return grad.Loss{}, fmt.Errorf("loss %q: want ce, focal, dice, lovasz, ce+dice, ce+lovasz or focal+dice", loss)
}
