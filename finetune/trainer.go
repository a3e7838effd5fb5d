package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/schedule"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// ErrInterrupted is returned when the context is cancelled (Ctrl-C): the
// run saved a checkpoint at the current step first.
var ErrInterrupted = errors.New("training interrupted")

// Files a run writes in its output folder.
const (
	HistoryFile = "metrics.jsonl"
	PlotFile    = "curves.png"
	ModelFile   = "model.onnx" // the best (or last) weights, exported
	ConfigFile  = "config.json"
	// TensorBoardDir holds the run's TensorBoard event files: the records
	// of metrics.jsonl as scalars (history.TensorBoard).
	TensorBoardDir = "tb"
)

// Hooks let the caller follow a run. All are optional.
type Hooks struct {
	OnStep  func(StepInfo)
	OnEpoch func(EpochInfo)
	// OnBase receives the base model's validation before the first step
	// (an EpochInfo with Base set, epoch 0 in the progress lines).
	OnBase func(EpochInfo)
	// Log receives notices (resuming, data problems, exports).
	Log io.Writer
	// Notice, when set, receives the notices about the run's settings
	// (the Notice types) instead of Log.
	Notice func(Notice)

	// phase, when set, is told each part of an epoch's end as it starts
	// ("validate", "checkpoint", "curves"): tests interrupt the run there.
	phase func(string)
}

// enter tells the phase hook that the run starts phase.
func (h Hooks) enter(phase string) {
	if h.phase != nil {
		h.phase(phase)
	}
}

// StepInfo describes a finished optimiser step.
type StepInfo struct {
	Epoch, Epochs              int
	StepInEpoch, StepsPerEpoch int
	Step, TotalSteps           int64
	Loss, LR, ImagesPerSec     float64
}

// EpochInfo describes a finished epoch and its validation.
type EpochInfo struct {
	Epoch   int
	Loss    float64 // mean training loss
	Seconds float64
	// Val is nil without a validation set.
	Val    *metrics.Report
	Groups map[string]metrics.Report
	Best   bool
	// Base marks the base model's validation before any step: epoch 0,
	// no training loss.
	Base bool
}

// String is the epoch's line in a run's log: loss, time, val mIoU (with
// each class's IoU when there are at most four) and whether it is the best.
func (e EpochInfo) String() string {
	line := fmt.Sprintf("epoch %3d  loss %.4f  %6.1fs", e.Epoch+1, e.Loss, e.Seconds)
	if e.Base {
		line = fmt.Sprintf("epoch %3d  base model    %6.1fs", 0, e.Seconds)
	}
	if e.Val != nil && e.Val.MeanIoU != nil {
		line += fmt.Sprintf("  val mIoU %.4f", *e.Val.MeanIoU)
		var parts []string
		for _, cl := range e.Val.Classes {
			if cl.IoU != nil && len(e.Val.Classes) <= 4 {
				parts = append(parts, fmt.Sprintf("%s %.3f", cl.Name, *cl.IoU))
			}
		}
		if len(parts) > 0 {
			line += " (" + strings.Join(parts, ", ") + ")"
		}
	}
	if e.Best {
		line += "  *best"
	}
	return line
}

// Result summarises a run.
type Result struct {
	Epochs   int
	Steps    int64
	BestMIoU *float64
	Dir      string
	Model    string // exported inference model
	Table    *history.Table
	// Base compares the best trained epoch with the base model (nil
	// without validation, or for a run resumed from before base
	// validation existed).
	Base *BaseComparison `json:",omitempty"`
}

// trainer is one run's state.
type trainer struct {
	cfg     Config
	dir     string
	hooks   Hooks
	train   *data.Dataset
	val     *data.Dataset
	base    *onnx.Model // inference network (new head applied)
	ct      *contract.Contract
	input   string
	params  []*optim.Param
	sched   schedule.Schedule
	step    *stepper
	keeper  *checkpoint.Keeper
	hist    *history.Writer
	perEp   int   // steps per epoch
	total   int64 // steps in the run
	epoch   int   // loader position
	inEpoch int
	steps   int64 // optimiser steps done
	best    *float64
	sizer   *sizer       // nil when size groups cannot be formed
	ema     *ema         // nil without Config.EMA
	reg     *regularizer // nil for the baseline
	par     *dataparallel.Group
	scaler  *lossScaler // nil unless Precision fp16
	stop    earlyStop
	stopped bool // the monitored value stopped improving: the run ends
	// unvalidated is the epoch whose end is under way (or, restored, was
	// cut short), nil between epochs.
	unvalidated *epochEnd
	part        partialEpoch // the epoch under way
	epochStart  time.Time    // when the epoch under way started (or resumed, less part.Seconds)

	// baseDigest is the SHA-256 of the base model file, recorded in checkpoints.
	baseDigest string
}

// Train runs fine-tuning into dir. With resume, it continues from
// dir/last.ckpt when there is one, with that checkpoint's configuration
// (cfg then only changes Epochs, MaxSteps, Device and Threads).
func Train(ctx context.Context, cfg Config, dir string, resume bool, hooks Hooks) (*Result, error) {
	return train(ctx, nil, cfg, dir, resume, hooks)
}

// train is Train on the ranks of comm (nil: this process alone); see
// TrainParallel.
func train(ctx context.Context, comm *mpi.Comm, cfg Config, dir string, resume bool, hooks Hooks) (*Result, error) {
	if hooks.Log == nil {
		hooks.Log = io.Discard
	}
	t := &trainer{dir: dir, hooks: hooks, keeper: &checkpoint.Keeper{Dir: dir, Metric: "val_miou", Log: hooks.Log},
		par: dataparallel.New(comm)}
	var lock *runLock
	var ck *checkpoint.Checkpoint
	var err error
	if t.par.Writes() { // rank 0 alone touches the folder
		lock, ck, err = t.openRunDir(resume)
	}
	defer lock.release()
	if ck, err = t.par.ShareCheckpoint(ck, err); err != nil {
		return nil, err
	}
	resumed, err := t.prepare(ctx, cfg, ck)
	if t.reg != nil {
		defer t.reg.close()
	}
	if t.step != nil {
		defer t.step.close()
	}
	if t.hist != nil {
		defer t.hist.Close()
	}
	if err = t.par.Agree(err); err != nil {
		return nil, err
	}
	if err := t.checkSameRun(); err != nil {
		return nil, err
	}
	if err := t.recordResume(resumed); err != nil {
		return nil, err
	}
	runErr := t.run(ctx)
	if runErr != nil && !errors.Is(runErr, ErrInterrupted) {
		return nil, runErr
	}
	res, err := t.finish()
	if err = t.par.Agree(err); err != nil {
		return nil, err
	}
	return res, runErr
}

// prepare settles the run's configuration (the checkpoint's, when
// resuming), builds it and restores the checkpoint; on rank 0 it also
// starts or trims the history.
func (t *trainer) prepare(ctx context.Context, cfg Config, ck *checkpoint.Checkpoint) (resumed []resumeChange, err error) {
	if ck != nil {
		var old Config
		if err := json.Unmarshal(ck.Config, &old); err != nil {
			return nil, fmt.Errorf("%s: config: %w", t.keeper.LastPath(), err)
		}
		if err := checkRanks(t.par, old, t.keeper.LastPath()); err != nil {
			return nil, err
		}
		// An older segtune recorded paths as given: relative ones are
		// read against the working directory, and refused, naming the
		// checkpoint, where they name nothing here.
		if err := old.CheckPaths(); err != nil {
			return nil, fmt.Errorf("finetune: %s records %v: the run was started in another folder, or its files moved", t.keeper.LastPath(), err) // the key as recorded: no flag gave it
		}
		if err := errors.Join(old.absPaths(), cfg.absPaths()); err != nil {
			return nil, fmt.Errorf("finetune: %w", err)
		}
		keepFixedCrop(old, &cfg)
		if cfg, resumed, err = mergeResume(old, cfg); err != nil {
			return nil, fmt.Errorf("finetune: %s: %w", t.keeper.LastPath(), err)
		}
		// ck.Epoch counts from 0; progress lines and tables from 1.
		fmt.Fprintf(t.hooks.Log, "resuming from %s (epoch %d, step %d)\n", t.keeper.LastPath(), ck.Epoch+1, ck.Step)
	} else {
		cfg.Ranks = 0
		if t.par.Parallel() {
			cfg.Ranks = t.par.Size()
		}
		// The run records its paths absolute: its config.json and
		// checkpoints are then repeated and resumed from any folder.
		if err := cfg.CheckPaths(); err != nil {
			return nil, fmt.Errorf("finetune: %w", err)
		}
		if err := cfg.absPaths(); err != nil {
			return nil, fmt.Errorf("finetune: %w", err)
		}
	}
	if t.par.Writes() {
		if err := t.identify(ck); err != nil {
			return nil, err
		}
	}
	t.cfg = cfg
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	if t.baseDigest, err = baseDigest(cfg.Network.BaseModel, ck, t.keeper.LastPath(), t.hooks.Log); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	if err := t.setup(ctx); err != nil {
		return nil, err
	}
	if ck != nil {
		if err := t.restore(ck); err != nil {
			return nil, fmt.Errorf("%s: %w", t.keeper.LastPath(), err)
		}
	}
	if !t.par.Writes() {
		t.hist = history.Discard()
		return resumed, nil
	}
	if ck != nil {
		if err := t.trimHistory(ck.Step); err != nil {
			return nil, fmt.Errorf("finetune: %w", err)
		}
	} else if err := t.startHistory(); err != nil {
		return nil, err
	}
	if err := t.writeSplitList(ck != nil); err != nil {
		return nil, err
	}
	if t.hist, err = history.Open(filepath.Join(t.dir, HistoryFile)); err != nil {
		return nil, err
	}
	var from int64
	if ck != nil {
		from = ck.Step
	}
	// TensorBoard is for watching the run; one that cannot be written
	// leaves the run and metrics.jsonl as they are, with one line.
	if tb, err := history.OpenTensorBoard(filepath.Join(t.dir, TensorBoardDir), from); err != nil {
		fmt.Fprintf(t.hooks.Log, "segtune: no TensorBoard events: %v\n", err)
	} else {
		t.hist.Tee(tb)
	}
	return resumed, nil
}

// setup opens the data, builds the network and its training graph and the
// optimiser.
func (t *trainer) setup(ctx context.Context) error {
	if err := t.setupData(ctx); err != nil {
		return err
	}
	gs, err := t.compile()
	if err != nil {
		return err
	}
	if err := t.setupStepper(gs); err != nil {
		return err
	}
	if t.cfg.EMA > 0 {
		t.ema = newEMA(t.cfg.EMA, t.params) // a resumed run's comes from the checkpoint
	}
	return nil
}

// setupData reads the base model and its contract, opens the training
// and validation data, fits the size groups and the regularizer's state,
// and counts the run's steps.
func (t *trainer) setupData(ctx context.Context) error {
	cfg := &t.cfg
	var err error
	if t.base, err = cfg.Network.LoadNetwork(""); err != nil {
		return err
	}
	if q := onnx.Quantized(t.base); len(q) > 0 {
		return fmt.Errorf("%s: %w", cfg.Network.BaseModel, &network.QuantizedError{Ops: q})
	}
	if cfg.Network.Dequantize {
		fmt.Fprintf(t.hooks.Log, "dequantize: %s trains with its integer weights turned into float ones (scale × (q − zero point)); %s will be a float model (an int8 export quantizes it again)\n",
			filepath.Base(cfg.Network.BaseModel), ModelFile)
	}
	if note := t.base.WeightInputsNote(); note != "" { // as export says it
		fmt.Fprintf(t.hooks.Log, "note: %s: %s\n", filepath.Base(cfg.Network.BaseModel), note)
	}
	if t.ct, err = readContract(t.base, cfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.Network.BaseModel, err)
	}
	if err := t.setupEarlyStop(); err != nil {
		return err
	}
	if cfg.ValDense != nil {
		if err := cfg.ValDense.CheckContract(t.ct); err != nil {
			return &setting.Error{Setting: "val_dense", Err: fmt.Errorf("%s: %w", cfg.Network.BaseModel, err)}
		}
	}
	if note := t.ct.BinaryNote(); note != "" {
		fmt.Fprintf(t.hooks.Log, "note: %s: %s\n", cfg.Network.BaseModel, note)
	}
	if fitFixedSize(cfg, t.ct) {
		fmt.Fprintf(t.hooks.Log, "note: %s takes a fixed %dx%d input: training crops are %dx%d\n",
			cfg.Network.BaseModel, t.ct.Height, t.ct.Width, cfg.Height, cfg.Width)
	}
	classes := t.ct.Classes
	t.input = t.ct.Input
	var lm *imageio.LabelMap
	if cfg.LabelMap != "" {
		if lm, err = imageio.ParseLabelMap(cfg.LabelMap); err != nil {
			return fmt.Errorf("label map: %w", err)
		}
	}
	open := func(s DataSpec) (*data.Dataset, error) {
		dc := s.DataConfig()
		dc.LabelMap, dc.NumClasses, dc.Ignore, dc.ClassNames, dc.SkipBad, dc.CacheBytes = lm, classes, cfg.Ignore, cfg.ClassNames, cfg.SkipBad, cfg.CacheBytes
		dc.Palette = cfg.MaskPalette
		ds, problems, err := data.Open(ctx, dc)
		for _, p := range problems {
			fmt.Fprintf(t.hooks.Log, "warning: skipped %s: %v\n", p.Path, p.Err)
		}
		return ds, err
	}
	if t.train, err = open(cfg.Train); err != nil {
		return err
	}
	if cfg.Val.Given() && t.par.Writes() { // rank 0 validates
		if t.val, err = open(cfg.Val); err != nil {
			return err
		}
	}
	if t.sizer, err = newSizer(cfg.Size, t.train); err != nil {
		if cfg.Regularizer != nil && cfg.Regularizer.Alpha > 0 {
			return err
		}
		t.sizer = nil // reports go without size groups
	} else {
		// Record the fitted threshold so that checkpoints (and `segtune
		// eval` on them) split small and large objects the same way.
		cfg.Size.Threshold, cfg.Size.Classes = t.sizer.threshold, t.sizer.classes
	}
	if cfg.Regularizer != nil && cfg.Regularizer.Alpha > 0 {
		if t.reg, err = newRegularizer(*cfg.Regularizer, t.sizer, t.train); err != nil {
			return err
		}
	}
	t.perEp = t.train.Len() / t.globalBatch()
	if t.perEp == 0 {
		return &NoBatchError{Examples: t.train.Len(), Batch: cfg.Batch * t.accumulate(), Processes: t.par.Size()}
	}
	t.total = int64(cfg.Epochs) * int64(t.perEp)
	if cfg.MaxSteps > 0 && (t.total == 0 || cfg.MaxSteps < t.total) {
		t.total = cfg.MaxSteps
	}
	return nil
}

// compile builds the training graph: the base model with the size head
// where the regularizer is on, the trainable parameters, the loss with its
// class weights, and mixed precision.
func (t *trainer) compile() (*grad.Graphs, error) {
	cfg := &t.cfg
	patterns, err := TrainablePatterns(t.base, cfg.Trainable)
	if err != nil {
		return nil, err
	}
	trainModel := t.base.Clone()
	if err := network.SetBatch(trainModel, int64(cfg.Batch)); err != nil {
		return nil, err
	}
	ignore := int64(cfg.Ignore)
	gc := grad.Config{InputShapes: map[string][]int64{}}
	if t.reg != nil {
		head, regGC, err := t.reg.addToGraph(trainModel, cfg.Batch, cfg.Seed)
		if err != nil {
			return nil, err
		}
		gc = regGC
		for _, n := range head {
			patterns = append(patterns, "re:"+regexp.QuoteMeta(n))
		}
	}
	gc.Trainable = patterns
	// The steps read the loss, the gradients and the regularizer's
	// ExtraOutputs, never the logits: no copy of them per step.
	gc.OmitModelOutputs = true
	gc.InputShapes[t.input] = t.ct.InputLayout.Shape(cfg.Batch, cfg.Height, cfg.Width)
	terms, err := lossTerms(cfg.Loss, cfg.FocalGamma)
	if err != nil {
		return nil, err
	}
	gc.Loss = trainingLoss(t.ct, ignore, terms)
	if gc.Loss.ClassWeights, err = resolveClassWeights(cfg.ClassWeights, t.train); err != nil {
		return nil, err
	}
	if gc.Loss.ClassWeights != nil {
		if gc.Loss.Kind != grad.LossCrossEntropy {
			return nil, fmt.Errorf("class weights need a softmax head; %s is a sigmoid (binary) head", cfg.Network.BaseModel)
		}
		how := "as given"
		if cfg.ClassWeights == ClassWeightsAuto {
			how = "auto: 1/ln(1.02 + p), p each class's share of the training masks' pixels"
		}
		fmt.Fprintf(t.hooks.Log, "class weights (%s): %s\n", how, formatWeights(gc.Loss.ClassWeights))
	}
	mp, err := t.precision(*cfg)
	if err != nil {
		return nil, err
	}
	if mp.half {
		// Mixed precision: the heavy operators in half precision behind
		// Casts (the parameters stay float32 masters); float16 scales
		// the loss.
		if _, err := autocast.Apply(trainModel, mp.typ); err != nil {
			return nil, &setting.Error{Setting: "precision", Value: cfg.Precision, Err: err}
		}
		gc.MinOpset = mp.typ.MinOpset()
		if mp.typ == autocast.Float16 {
			t.scaler = &lossScaler{Scale: initialLossScale}
		}
	}
	gc.Loss.Scale = t.par.Parallel() || t.scaler != nil // each rank's share of the batch's loss; the loss scale
	gc.Prober = ortprobe.Prober{Threads: cfg.Threads}
	// Winograd convolutions pay on ONNX Runtime's CPU provider; cuDNN
	// chooses its own convolution algorithms, and CUDA sums contiguous axes
	// with ONNX Runtime's own kernels rather than cuDNN's reduction.
	gc.DirectConvs = mayRunOnGPU(cfg.Device)
	gc.MatrixReductions = gc.DirectConvs
	gc.WhereMasks = gc.DirectConvs // one Where per mask on CUDA; Cast+Mul is faster on the CPU
	if gc.ConvGrad, err = t.convGrad(*cfg, gc.DirectConvs); err != nil {
		return nil, err
	}
	gs, err := grad.Build(trainModel, gc)
	if err != nil {
		if b := t.ct.Batch; b > 0 && b != int64(cfg.Batch) {
			return nil, &setting.Error{Setting: "batch", Value: strconv.Itoa(cfg.Batch), Err: fmt.Errorf("%s declares a fixed batch of %d and training at this batch failed: %w; its graph may bake the batch size in: train with a batch of %d",
				cfg.Network.BaseModel, b, err, b)}
		}
		return nil, err
	}
	return gs, nil
}

// setupStepper takes the parameters out of the compiled graph, configures
// the optimiser and opens the stepper that runs the steps.
func (t *trainer) setupStepper(gs *grad.Graphs) error {
	cfg := &t.cfg
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			return err
		}
		t.params = append(t.params, &optim.Param{Name: p.GetName(), Shape: p.GetDims(), Data: v})
		// From here on the weight lives in t.params, and validationModel
		// writes it back into a copy of the base: the base's own copy
		// would hold the model's size of memory for the whole run.
		if w := t.base.Initializer(p.GetName()); w != nil {
			onnx.DropData(w)
		}
	}
	alg, err := optim.ParseAlgorithm(cfg.Optimizer)
	if err != nil {
		return err
	}
	oc := optim.DefaultConfig(alg)
	oc.NoDecay = optim.NoDecayVectors
	if cfg.Momentum != nil {
		oc.Momentum = *cfg.Momentum
	}
	if cfg.WeightDecay != nil {
		oc.WeightDecay = *cfg.WeightDecay
	}
	res, err := t.residentState(*cfg)
	if err != nil {
		return err
	}
	var outputs []string
	if t.reg != nil {
		outputs = append(outputs, sizehead.Scores)
	}
	ropts := runtime.Options{Device: cfg.Device, Threads: cfg.Threads, Log: t.hooks.Log}
	if mayRunOnGPU(cfg.Device) {
		ropts.CUDAOptions = cudaOptions(*cfg)
		if search := ropts.CUDAOptions[runtime.CUDAConvSearch]; search != "" && cfg.CUDAOptions[runtime.CUDAConvSearch] == "" {
			t.hooks.notice(DefaultNotice{Setting: "precision", Value: cfg.Precision, Override: "cuda_options",
				Chosen: fmt.Sprintf("CUDA option %s=%s", runtime.CUDAConvSearch, search),
				Why:    "cuDNN's exhaustive search re-ran every step in half precision"})
		}
	}
	ropts.ConvGradCUDA = grad.UsesConvGrad(gs.Training.Proto)
	if t.step, err = openStepper(t.hooks.notice, cfg.Resident, res, func(res bool) (*stepper, error) {
		return newStepper(gs, t.params, t.input, oc, res, cfg.CUDAGraph, outputs, t.scaler, ropts)
	}); err != nil {
		return err
	}
	if t.reg != nil {
		if err := t.reg.bind(t.step); err != nil {
			return err
		}
	}
	if err := bindLossScale(t.par, t.step); err != nil {
		return err
	}
	// Compiling left Go's heap at its peak (the model, its clones, the
	// shape probe's copy), mostly garbage now: hand it back to the OS
	// before the step's arena grows, so that the process peaks at the
	// larger of the two rather than their sum.
	debug.FreeOSMemory()
	if t.sched, err = schedule.Parse(cfg.Schedule, cfg.LR, t.total); err != nil {
		return err
	}
	return nil
}

// cudaOptions are the CUDA provider options of cfg's training session:
// TF32 in cuDNN's and cuBLAS's float32 kernels, as PyTorch does for
// convolutions, except under Precision fp32; cuDNN's heuristic convolution
// search in half precision (runtime.HalfPrecisionCUDAOptions); then
// cfg.CUDAOptions over them.
func cudaOptions(cfg Config) map[string]string {
	opts := map[string]string{"use_tf32": map[bool]string{true: "0", false: "1"}[strings.EqualFold(cfg.Precision, "fp32")]}
	maps.Copy(opts, cfg.CUDAOptions)
	_, half := autocast.ForPrecision(cfg.Precision)
	return runtime.HalfPrecisionCUDAOptions(opts, half)
}

// dataState is the loader position stored in checkpoints, and under
// mixed precision the loss scale.
type dataState struct {
	Epoch     int         `json:"epoch"`
	Step      int         `json:"step"`
	LossScale *lossScaler `json:"loss_scale,omitempty"`
	// Partial is the training of the epoch so far, when the checkpoint
	// was written in the middle of one (an interruption).
	Partial partialEpoch `json:"partial"`
	// Unvalidated is the epoch whose training finished and whose end
	// (validation, checkpoint, history line) an interruption cut short:
	// a resumed run finishes it before it trains on.
	Unvalidated *epochEnd `json:"unvalidated,omitempty"`
}

// partialEpoch adds up the steps of an epoch under way, so that a run
// resumed in its middle reports the whole epoch's mean loss.
type partialEpoch struct {
	Loss    float64 `json:"loss_sum"`
	Steps   int     `json:"steps"`
	Seconds float64 `json:"seconds"`
}

// epochEnd is what an epoch's end reports besides validation: kept in the
// checkpoint while that end is unfinished.
type epochEnd struct {
	Epoch   int                `json:"epoch"`
	Loss    float64            `json:"loss"`
	Seconds float64            `json:"seconds"`
	Extra   map[string]float64 `json:"extra,omitempty"` // the regularizer's epoch statistics
}

func (t *trainer) restore(ck *checkpoint.Checkpoint) error {
	byName := map[string]*optim.Param{}
	for _, p := range t.params {
		byName[p.Name] = p
	}
	for _, w := range ck.Weights {
		if strings.HasPrefix(w.Name, EMAPrefix) {
			continue // the moving average, restored below
		}
		p := byName[w.Name]
		if p == nil || len(p.Data) != len(w.Data) {
			return fmt.Errorf("weights %q do not fit the training graph", w.Name)
		}
		copy(p.Data, w.Data)
	}
	if err := t.step.push(); err != nil {
		return err
	}
	if t.ema != nil {
		if err := t.ema.restore(t.params, ck.Weights); err != nil {
			return err
		}
	}
	if ck.Optimizer != nil {
		if err := t.step.setOptimState(ck.Optimizer); err != nil {
			return err
		}
	}
	var ds dataState
	if err := json.Unmarshal(ck.DataState, &ds); err != nil {
		return fmt.Errorf("data state: %w", err)
	}
	t.epoch, t.inEpoch, t.steps, t.unvalidated, t.part = ds.Epoch, ds.Step, ck.Step, ds.Unvalidated, ds.Partial
	if t.scaler != nil && ds.LossScale != nil {
		*t.scaler = *ds.LossScale
	}
	if v, ok := ck.Metrics["best_val_miou"]; ok {
		t.best = &v
	}
	t.stop.restore(ck.Metrics)
	if t.reg != nil {
		if err := t.reg.restore(ck.RegularizerState); err != nil {
			return err
		}
	}
	return nil
}

// trimHistory drops the history lines written after the checkpoint at
// step, which the resumed run will write again. Its errors name the
// history file (and line), not the checkpoint.
func (t *trainer) trimHistory(step int64) error {
	path := filepath.Join(t.dir, HistoryFile)
	recs, err := history.Read(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var keep []history.Record
	for _, r := range recs {
		if r.Step <= step {
			keep = append(keep, r)
		}
	}
	return rewriteHistory(path, keep)
}

func (t *trainer) startHistory() error {
	cfgJSON, err := json.MarshalIndent(t.cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(t.dir, ConfigFile), append(cfgJSON, '\n'), 0o644); err != nil {
		return err
	}
	return rewriteHistory(filepath.Join(t.dir, HistoryFile), nil)
}

// rewriteHistory replaces the history file with recs, atomically.
func rewriteHistory(path string, recs []history.Record) error {
	var buf []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	return atomicfile.Write(path, buf, 0o644)
}

// run trains until the step budget is spent or ctx is cancelled.
func (t *trainer) run(ctx context.Context) error {
	cfg := &t.cfg
	if t.unvalidated != nil {
		if err := t.finishEpoch(ctx, *t.unvalidated); err != nil || t.stopped {
			return err
		}
	}
	if cfg.Val.Given() && t.steps == 0 { // epoch 0: the base model
		var err error
		if t.par.Writes() {
			err = t.validateBase(ctx)
		}
		if err = t.endEpochRanks(-1, err); err != nil {
			return err
		}
	}
	if t.steps >= t.total {
		return nil
	}
	aug, err := trainingAugment(*cfg)
	if err != nil {
		return err
	}
	lc := data.LoaderConfig{
		BatchSize: t.globalBatch(), Preprocess: normalisationOnly(cfg.Preprocess), Augment: &aug, Seed: cfg.Seed,
		StartEpoch: t.epoch, StartStep: t.inEpoch,
	}
	if t.par.Parallel() { // this rank's share of every batch
		lc.Parts, lc.Part = t.par.Size(), t.par.Rank()
	}
	if cfg.Balanced {
		if t.sizer == nil {
			return fmt.Errorf("balanced sampling needs object sizes, and the data set has no size classes")
		}
		classes := make([]int, t.train.Len())
		for id := range classes {
			classes[id] = t.sizer.class(t.train, id)
		}
		lc.Order = balancedOrder(classes, cfg.Seed, t.globalBatch(), t.perEp)
	}
	if cfg.SampleBy == SampleByClass {
		th := cfg.RepeatThreshold
		if th == 0 {
			th = DefaultRepeatThreshold
		}
		lc.Order = repeatFactorOrder(repeatFactors(t.train, th), cfg.Seed, t.perEp*t.globalBatch())
	}
	loader, err := data.NewLoader(ctx, t.train, lc)
	if err != nil {
		return err
	}
	defer loader.Close()
	alg, err := t.algorithm1()
	if err != nil {
		return err
	}
	var ids []int64
	epochs := int((t.total + int64(t.perEp) - 1) / int64(t.perEp))
	// The epoch's time so far: a run resumed mid-epoch adds to what the
	// interrupted one spent.
	t.epochStart = time.Now().Add(-time.Duration(t.part.Seconds * float64(time.Second)))
	for t.steps < t.total {
		b, err := t.nextBatch(ctx, loader)
		if errors.Is(err, errStop) {
			return t.interrupt()
		} else if err != nil {
			return err
		}
		t0 := time.Now()
		ids = ids[:0]
		for _, id := range b.GlobalIDs() {
			ids = append(ids, int64(id))
		}
		st := &trainStep{t: t, batch: b}
		v, err := alg.Step(ids, st)
		if err != nil {
			return t.par.Verdict(t.diverged(err))
		}
		if t.ema != nil {
			if err := t.step.pull(); err != nil { // the resident form's weights, every step
				return err
			}
			t.ema.update(t.params)
		}
		var stepExtra map[string]float64
		if t.reg != nil {
			stepExtra = map[string]float64{"reg": t.reg.cfg.Alpha * v}
		}
		stepExtra = t.par.StepStats(stepExtra)
		if t.scaler != nil {
			if stepExtra == nil {
				stepExtra = map[string]float64{}
			}
			stepExtra["loss_scale"] = t.scaler.Scale // after this step's update
			if st.skipped {
				stepExtra["skipped"] = 1
			}
		}
		loss, lr := st.loss, st.lr
		t.steps++
		t.epoch, t.inEpoch = loader.Position()
		loader.Recycle(b)
		secs := time.Since(t0).Seconds()
		t.part.Loss += loss
		t.part.Steps++
		ips := float64(t.globalBatch()) / secs
		if err := t.hist.Write(history.Record{Kind: history.KindStep, Epoch: int64(b.Epoch), Step: t.steps, Loss: loss, LR: lr, Seconds: secs, ImagesPerSec: ips, Extra: stepExtra}); err != nil {
			return err
		}
		if t.hooks.OnStep != nil {
			t.hooks.OnStep(StepInfo{Epoch: b.Epoch, Epochs: epochs, StepInEpoch: b.Step + 1, StepsPerEpoch: t.perEp,
				Step: t.steps, TotalSteps: t.total, Loss: loss, LR: lr, ImagesPerSec: ips})
		}
		if t.inEpoch == 0 || t.steps == t.total { // the epoch (or the run) is complete
			algStats, err := alg.EndEpoch(b.Epoch + 1)
			if err != nil {
				return t.par.Verdict(err)
			}
			end := epochEnd{Epoch: b.Epoch, Loss: t.part.Loss / float64(t.part.Steps), Seconds: time.Since(t.epochStart).Seconds()}
			t.part = partialEpoch{}
			if t.reg != nil && t.par.Writes() {
				end.Extra = t.reg.epochStats(algStats)
			}
			if err := t.finishEpoch(ctx, end); err != nil || t.stopped {
				return err
			}
			t.epochStart = time.Now()
		}
	}
	return nil
}

// normalisationOnly keeps the value mapping of pre and drops its geometry,
// which the training crop replaces.
func normalisationOnly(pre imageio.Preprocess) imageio.Preprocess {
	pre.Height, pre.Width, pre.Resize, pre.ScaleFactor, pre.MultipleOf, pre.PlusOne = 0, 0, "", 0, 0, false
	return pre
}

// algorithm1 returns the Algorithm 1 loop the run's steps go through: the
// regularizer's, or for the baseline one that only steps the network.
func (t *trainer) algorithm1() (*dual.Loop, error) {
	if t.reg == nil {
		return dual.NewLoop(nil, nil, dual.LoopConfig{})
	}
	return t.reg.loop(t.epoch+1, t.inEpoch, t.perEp)
}

// finishEpoch ends the epoch whose training finished (end) on every
// rank: rank 0 validates, checkpoints and logs it. Until that is done the
// epoch is t.unvalidated, which an interruption's checkpoint records.
func (t *trainer) finishEpoch(ctx context.Context, end epochEnd) error {
	t.unvalidated = &end
	var err error
	if t.par.Writes() {
		err = t.endEpoch(ctx, end)
	}
	if err = t.endEpochRanks(end.Epoch, err); err != nil {
		return err
	}
	t.unvalidated = nil
	return nil
}

// endEpoch validates, checkpoints and logs the epoch end describes.
func (t *trainer) endEpoch(ctx context.Context, end epochEnd) error {
	epoch, loss := end.Epoch, end.Loss
	info := EpochInfo{Epoch: epoch, Loss: loss, Seconds: end.Seconds, Groups: map[string]metrics.Report{}}
	extra := map[string]float64{}
	metricsOut := map[string]float64{"train_loss": loss}
	for k, v := range end.Extra {
		extra[k] = v
	}
	if t.val != nil {
		t.hooks.enter("validate")
		v, err := t.validate(ctx)
		if err != nil {
			return err
		}
		info.Val, info.Groups = &v.rep, v.groups
		maps.Copy(extra, v.extra)
		if m := v.rep.MeanIoU; m != nil {
			metricsOut["val_miou"] = *m
			if t.best == nil || *m > *t.best {
				best := *m
				t.best = &best
			}
		}
		if l, ok := v.extra["val_loss"]; ok {
			metricsOut["val_loss"] = l
		}
	}
	if t.best != nil {
		metricsOut["best_val_miou"] = *t.best
	}
	stop := t.stop.epochEnd(metricsOut)
	t.hooks.enter("checkpoint")
	// This checkpoint holds the epoch's validation: resuming from it
	// does not validate again.
	t.unvalidated = nil
	best, err := t.save(metricsOut)
	if err != nil {
		return err
	}
	info.Best = best
	if err := t.hist.Write(history.Record{Kind: history.KindEpoch, Epoch: int64(epoch), Step: t.steps, Loss: loss,
		Seconds: end.Seconds, Extra: extra}); err != nil {
		return err
	}
	if stop {
		if err := t.stopEarly(epoch); err != nil {
			return err
		}
	}
	t.hooks.enter("curves")
	if err := t.plot(); err != nil {
		fmt.Fprintf(t.hooks.Log, "warning: plotting the curves: %v\n", err)
	}
	if t.hooks.OnEpoch != nil {
		t.hooks.OnEpoch(info)
	}
	return nil
}

// save writes last.ckpt (and best.ckpt when it improves val_miou).
func (t *trainer) save(metricsOut map[string]float64) (bool, error) {
	cfgJSON, err := json.Marshal(t.cfg)
	if err != nil {
		return false, err
	}
	part := t.part
	if part.Steps > 0 {
		part.Seconds = time.Since(t.epochStart).Seconds()
	}
	ds, _ := json.Marshal(dataState{Epoch: t.epoch, Step: t.inEpoch, LossScale: t.scaler, Partial: part, Unvalidated: t.unvalidated})
	if err := t.step.pull(); err != nil {
		return false, err
	}
	ost, err := t.step.optimState()
	if err != nil {
		return false, err
	}
	ck := &checkpoint.Checkpoint{
		BaseModel: t.cfg.Network.BaseModel, BaseSHA256: t.baseDigest, Epoch: int64(t.epoch), Step: t.steps,
		Metrics: metricsOut, Config: cfgJSON, Optimizer: ost, DataState: ds,
	}
	for _, p := range t.params {
		ck.Weights = append(ck.Weights, checkpoint.Tensor{Name: p.Name, Shape: p.Shape, Data: p.Data})
	}
	if t.ema != nil {
		ck.Weights = append(ck.Weights, t.ema.tensors(t.params)...)
	}
	if t.reg != nil {
		if ck.RegularizerState, err = t.reg.state(); err != nil {
			return false, err
		}
	}
	return t.keeper.Save(ck)
}

// interrupt saves the current step and reports the interruption.
func (t *trainer) interrupt() error {
	if !t.par.Writes() {
		return ErrInterrupted // rank 0 saves
	}
	m := map[string]float64{}
	if t.best != nil {
		m["best_val_miou"] = *t.best
	}
	t.stop.record(m) // a resumed run counts on from here
	if _, err := t.save(m); err != nil {
		return fmt.Errorf("interrupted, and saving the checkpoint failed: %w", err)
	}
	t.hooks.notice(InterruptedNotice{Checkpoint: t.keeper.LastPath(), Step: t.steps})
	return ErrInterrupted
}

// validationModel writes the current weights (their moving average, with
// Config.EMA) into a copy of the network;
// with the regularizer, the size head is appended as a second output so
// that validation can score the size predictor too.
func (t *trainer) validationModel() (*onnx.Model, error) {
	if err := t.step.pull(); err != nil {
		return nil, err
	}
	m := t.base.Clone()
	var ws []network.Weight
	var head []*optim.Param
	for i, p := range t.params {
		if strings.HasPrefix(p.Name, SizeHeadPrefix) {
			head = append(head, p)
			continue
		}
		w := network.Weight{Name: p.Name, Shape: p.Shape, Data: p.Data}
		if t.ema != nil {
			w.Data = t.ema.avg[i]
		}
		ws = append(ws, w)
	}
	if err := network.SetWeights(m, ws); err != nil {
		return nil, err
	}
	if t.reg != nil {
		if err := sizehead.Append(m, t.reg.cfg.Feature, t.reg.cfg.ScoreBound, head); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (t *trainer) plot() error {
	recs, err := history.Read(filepath.Join(t.dir, HistoryFile))
	if err != nil {
		return err
	}
	return history.PlotPNG(filepath.Join(t.dir, PlotFile), []history.Run{{Name: filepath.Base(t.dir), Records: recs}},
		history.PlotOptions{Title: "segtune finetune " + filepath.Base(t.cfg.Network.BaseModel)})
}

// finish exports the best checkpoint (or the last) and builds the summary.
func (t *trainer) finish() (*Result, error) {
	res := &Result{Epochs: t.epoch, Steps: t.steps, BestMIoU: t.best, Dir: t.dir}
	if !t.par.Writes() {
		return res, nil // rank 0 exports
	}
	src, ok := t.keeper.ExportPath() // best.ckpt if intact and this run's, else last.ckpt
	if ok {
		out := filepath.Join(t.dir, ModelFile)
		if _, err := Export(src, "", out); err != nil {
			return nil, fmt.Errorf("exporting %s: %w", src, err)
		}
		res.Model = out
		what := ""
		if t.cfg.EMA > 0 {
			what = " (the moving average of the weights)"
		}
		fmt.Fprintf(t.hooks.Log, "exported %s from %s%s\n", out, src, what)
	}
	recs, err := history.Read(filepath.Join(t.dir, HistoryFile))
	if err == nil {
		res.Table = history.EpochTable(recs)
		_, key, lower := t.cfg.monitor()
		res.Base = compareWithBase(recs, key, lower)
	}
	return res, nil
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

// mixedPrecision is what Config.Precision asks of the training graph.
type mixedPrecision struct {
	half bool          // the heavy operators in half precision (onnx/autocast)
	typ  autocast.Type // which half precision
}

// precision reads cfg.Precision for this run. fp16 excludes data-parallel
// runs (both use the loss_scale input). bf16 needs ONNX Runtime's CUDA
// provider, the only one with bfloat16 convolutions: refused with Device
// cpu; with Device auto on a machine without a GPU the run trains in
// float32 and says so in one line.
func (t *trainer) precision(cfg Config) (mixedPrecision, error) {
	mp, err := parsePrecision(cfg.Precision)
	switch {
	case err != nil:
	case mp.half && mp.typ == autocast.Float16 && t.par.Parallel():
		err = &setting.Error{Setting: "precision", Value: cfg.Precision, Err: errors.New("data-parallel runs scale each rank's loss by its share of the batch through the same input as the loss scale; run one process, or fp32/tf32/bf16")}
	case mp.half && mp.typ == autocast.BFloat16 && !mayRunOnGPU(cfg.Device):
		if strings.EqualFold(cfg.Device, runtime.DeviceCPU) {
			err = &setting.Error{Setting: "precision", Value: cfg.Precision, Err: errors.New("on the CPU (Device cpu): ONNX Runtime's CPU provider has no bfloat16 convolutions; bf16 trains on a CUDA GPU (use fp32 on the CPU)")}
			break
		}
		t.hooks.notice(FallbackNotice{Setting: "precision", Value: "bf16",
			Reason: "no CUDA GPU here, and ONNX Runtime's CPU provider has no bfloat16 convolutions; training in float32"})
		mp = mixedPrecision{}
	}
	return mp, err
}

// convGrad returns the convolution classes the training graph hands to
// ConvGrad (Config.ConvGrad, checked by Validate); none, with one line,
// where the run may not use a GPU (Device auto without one).
func (t *trainer) convGrad(cfg Config, gpu bool) (grad.ConvClasses, error) {
	classes, err := grad.ParseConvClasses(cfg.ConvGrad)
	if err != nil || classes == 0 || gpu {
		return classes, err
	}
	t.hooks.notice(FallbackNotice{Setting: "conv_grad", Value: cfg.ConvGrad,
		Reason: "no CUDA GPU here, and ConvGrad's kernel is cuDNN's; training with the standard forms"})
	return 0, nil
}

// parsePrecision checks a Precision value. fp32 and tf32 differ only on
// GPUs with TF32 (runtime options); on the CPU both are float32.
func parsePrecision(s string) (mixedPrecision, error) {
	if typ, ok := autocast.ForPrecision(s); ok {
		return mixedPrecision{half: true, typ: typ}, nil
	}
	switch strings.ToLower(s) {
	case "", "tf32", "fp32":
		return mixedPrecision{}, nil
	}
	return mixedPrecision{}, &setting.Error{Setting: "precision", Value: s, Err: errors.New("want fp32, tf32, fp16 or bf16")}
}

// residentState says whether the training state lives on the device
// (finetune/resident) rather than in Go memory: cfg.Resident "on", or
// "auto" (the default) where the steps may run on a GPU, whose copies of
// every parameter and gradient each step would cost more than the step's
// compute saves. Data-parallel runs sum their gradients in Go: host form.
func (t *trainer) residentState(cfg Config) (bool, error) {
	if err := checkResident(cfg.Resident); err != nil {
		return false, err
	}
	switch strings.ToLower(cfg.Resident) {
	case "on":
		if t.par.Parallel() {
			return false, &setting.Error{Setting: "resident", Value: cfg.Resident, Err: errors.New("data-parallel runs sum their gradients across ranks in host memory; use off or auto")}
		}
		return true, nil
	case "off":
		return false, nil
	}
	return mayRunOnGPU(cfg.Device) && !t.par.Parallel() && t.accumulate() == 1, nil // accumulation sums on the host
}

// checkResident checks a Resident value.
func checkResident(s string) error {
	switch strings.ToLower(s) {
	case "", "auto", "on", "off":
		return nil
	}
	return &setting.Error{Setting: "resident", Value: s, Err: errors.New("want auto, on or off")}
}

// mayRunOnGPU reports whether sessions for device may run on the CUDA
// provider: cuda, or auto where the provider prepared (an auto that will
// fall back to the CPU is compiled for the CPU).
func mayRunOnGPU(device string) bool {
	switch strings.ToLower(device) {
	case runtime.DeviceCUDA:
		return true
	case runtime.DeviceAuto:
		_, err := runtime.CUDADevices()
		return err == nil
	}
	return false
}
