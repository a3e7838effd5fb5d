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
	"strings"
	"time"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/schedule"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models/contract"
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

// runner is one run's state.
type runner struct {
	cfg     Config
	dir     string
	hooks   Hooks
	train   *data.Dataset
	val     *data.Dataset
	net     *trainer.Net // the graph side: the network, its training session
	ct      *contract.Contract
	params  []*optim.Param // net's, in Go memory
	sched   schedule.Schedule
	keeper  *checkpoint.Keeper
	hist    *history.Writer
	perEp   int   // steps per epoch
	total   int64 // steps in the run
	epoch   int   // loader position
	inEpoch int
	steps   int64 // optimiser steps done
	best    *float64
	sizer   *sizer // nil when size groups cannot be formed
	ema     *ema   // nil without Config.EMA
	par     *dataparallel.Group
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
	t := &runner{dir: dir, hooks: hooks, keeper: &checkpoint.Keeper{Dir: dir, Metric: "val_miou", Log: hooks.Log},
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
	if t.net != nil {
		defer t.net.Close()
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
func (t *runner) prepare(ctx context.Context, cfg Config, ck *checkpoint.Checkpoint) (resumed []resumeChange, err error) {
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
func (t *runner) setup(ctx context.Context) error {
	if err := t.setupData(ctx); err != nil {
		return err
	}
	if err := t.net.Build(t.graphSpec()); err != nil {
		return err
	}
	t.params = t.net.Params()
	var err error
	if t.sched, err = schedule.Parse(t.cfg.Schedule, t.cfg.LR, t.total); err != nil {
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
func (t *runner) setupData(ctx context.Context) error {
	cfg := &t.cfg
	base, err := cfg.Network.LoadNetwork("")
	if err != nil {
		return err
	}
	if cfg.Network.Dequantize {
		fmt.Fprintf(t.hooks.Log, "dequantize: %s trains with its integer weights turned into float ones (scale × (q − zero point)); %s will be a float model (an int8 export quantizes it again)\n",
			filepath.Base(cfg.Network.BaseModel), ModelFile)
	}
	if note := base.WeightInputsNote(); note != "" { // as export says it
		fmt.Fprintf(t.hooks.Log, "note: %s: %s\n", filepath.Base(cfg.Network.BaseModel), note)
	}
	if t.net, err = trainer.Open(base, cfg.Network.BaseModel, ContractOverrides(cfg.Preprocess, cfg.Output), t.par, t.hooks.notice, t.hooks.Log); err != nil {
		return err
	}
	t.ct = t.net.Contract()
	// The loader feeds the layout the model takes; the run records it.
	if cfg.Preprocess.Layout == "" {
		cfg.Preprocess.Layout = imageio.Layout(t.ct.InputLayout)
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

// graphSpec is what the graph side takes of the run's configuration,
// its class weights and its examples' size classes.
func (t *runner) graphSpec() trainer.Spec {
	cfg := &t.cfg
	spec := trainer.Spec{
		Trainable: cfg.Trainable, Batch: cfg.Batch, Height: cfg.Height, Width: cfg.Width, Ignore: cfg.Ignore,
		Loss: cfg.Loss, FocalGamma: cfg.FocalGamma,
		ClassWeights:    func() ([]float64, error) { return resolveClassWeights(cfg.ClassWeights, t.train) },
		ClassWeightsHow: "as given",
		Optimizer:       cfg.Optimizer, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Precision: cfg.Precision, ConvGrad: cfg.ConvGrad, Device: cfg.Device, Resident: cfg.Resident,
		Threads: cfg.Threads, CUDAGraph: cfg.CUDAGraph, CUDAOptions: cfg.CUDAOptions,
		Seed: cfg.Seed, Accumulate: cfg.Accumulate, Regularizer: cfg.Regularizer,
	}
	if cfg.ClassWeights == ClassWeightsAuto {
		spec.ClassWeightsHow = "auto: 1/ln(1.02 + p), p each class's share of the training masks' pixels"
	}
	if r := cfg.Regularizer; r != nil && r.Alpha > 0 {
		spec.SizeClasses = make([]int, t.train.Len())
		for id := range spec.SizeClasses {
			spec.SizeClasses[id] = t.sizer.class(t.train, id)
		}
		spec.SizeThreshold = t.sizer.threshold
	}
	return spec
}

// dataState is the loader position stored in checkpoints, and under
// mixed precision the loss scale.
type dataState struct {
	Epoch     int                 `json:"epoch"`
	Step      int                 `json:"step"`
	LossScale *trainer.LossScaler `json:"loss_scale,omitempty"`
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

func (t *runner) restore(ck *checkpoint.Checkpoint) error {
	byName := map[string]*optim.Param{}
	for _, p := range t.params {
		byName[p.Name] = p
	}
	for _, w := range ck.Weights {
		if strings.HasPrefix(w.Name, checkpoint.EMAPrefix) {
			continue // the moving average, restored below
		}
		p := byName[w.Name]
		if p == nil || len(p.Data) != len(w.Data) {
			return fmt.Errorf("weights %q do not fit the training graph", w.Name)
		}
		copy(p.Data, w.Data)
	}
	if err := t.net.Push(); err != nil {
		return err
	}
	if t.ema != nil {
		if err := t.ema.restore(t.params, ck.Weights); err != nil {
			return err
		}
	}
	if ck.Optimizer != nil {
		if err := t.net.SetOptimState(ck.Optimizer); err != nil {
			return err
		}
	}
	var ds dataState
	if err := json.Unmarshal(ck.DataState, &ds); err != nil {
		return fmt.Errorf("data state: %w", err)
	}
	t.epoch, t.inEpoch, t.steps, t.unvalidated, t.part = ds.Epoch, ds.Step, ck.Step, ds.Unvalidated, ds.Partial
	t.net.SetLossScale(ds.LossScale)
	if v, ok := ck.Metrics["best_val_miou"]; ok {
		t.best = &v
	}
	t.stop.restore(ck.Metrics)
	return t.net.RestoreRegularizer(ck.RegularizerState)
}

// trimHistory drops the history lines written after the checkpoint at
// step, which the resumed run will write again. Its errors name the
// history file (and line), not the checkpoint.
func (t *runner) trimHistory(step int64) error {
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

func (t *runner) startHistory() error {
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
func (t *runner) run(ctx context.Context) error {
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
	alg, err := t.net.Loop(t.epoch+1, t.inEpoch, t.perEp)
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
		st, err := t.net.Step(alg, ids, b, func() float64 { return t.sched.At(t.steps) })
		if err != nil {
			return t.par.Verdict(t.diverged(err))
		}
		if t.ema != nil {
			if err := t.net.Pull(); err != nil { // the resident form's weights, every step
				return err
			}
			t.ema.update(t.params)
		}
		var stepExtra map[string]float64
		if t.net.Regularized() {
			stepExtra = map[string]float64{"reg": st.Reg}
		}
		stepExtra = t.par.StepStats(stepExtra)
		if scaler := t.net.LossScale(); scaler != nil {
			if stepExtra == nil {
				stepExtra = map[string]float64{}
			}
			stepExtra["loss_scale"] = scaler.Scale // after this step's update
			if st.Skipped {
				stepExtra["skipped"] = 1
			}
		}
		loss, lr := st.Loss, st.LR
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
			if t.par.Writes() {
				end.Extra = t.net.EpochStats(algStats)
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

// finishEpoch ends the epoch whose training finished (end) on every
// rank: rank 0 validates, checkpoints and logs it. Until that is done the
// epoch is t.unvalidated, which an interruption's checkpoint records.
func (t *runner) finishEpoch(ctx context.Context, end epochEnd) error {
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
func (t *runner) endEpoch(ctx context.Context, end epochEnd) error {
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
func (t *runner) save(metricsOut map[string]float64) (bool, error) {
	cfgJSON, err := json.Marshal(t.cfg)
	if err != nil {
		return false, err
	}
	part := t.part
	if part.Steps > 0 {
		part.Seconds = time.Since(t.epochStart).Seconds()
	}
	ds, _ := json.Marshal(dataState{Epoch: t.epoch, Step: t.inEpoch, LossScale: t.net.LossScale(), Partial: part, Unvalidated: t.unvalidated})
	if err := t.net.Pull(); err != nil {
		return false, err
	}
	ost, err := t.net.OptimState()
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
	if ck.RegularizerState, err = t.net.RegularizerState(); err != nil {
		return false, err
	}
	return t.keeper.Save(ck)
}

// interrupt saves the current step and reports the interruption.
func (t *runner) interrupt() error {
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

func (t *runner) plot() error {
	recs, err := history.Read(filepath.Join(t.dir, HistoryFile))
	if err != nil {
		return err
	}
	return history.PlotPNG(filepath.Join(t.dir, PlotFile), []history.Run{{Name: filepath.Base(t.dir), Records: recs}},
		history.PlotOptions{Title: "segtune finetune " + filepath.Base(t.cfg.Network.BaseModel)})
}

// finish exports the best checkpoint (or the last) and builds the summary.
func (t *runner) finish() (*Result, error) {
	res := &Result{Epochs: t.epoch, Steps: t.steps, BestMIoU: t.best, Dir: t.dir}
	if !t.par.Writes() {
		return res, nil // rank 0 exports
	}
	src, ok := t.keeper.ExportPath() // best.ckpt if intact and this run's, else last.ckpt
	if ok {
		out := filepath.Join(t.dir, ModelFile)
		if err := Export(src, "", out); err != nil {
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
