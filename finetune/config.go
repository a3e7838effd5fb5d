package finetune

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// Config is a fine-tuning run's configuration. It is stored in every
// checkpoint: a resumed run must use the same settings, and export rebuilds
// the network from Network.
type Config struct {
	Network NetworkSpec `json:"network"`
	// Train and Val are the data: folders of images and masks.
	Train DataSpec `json:"train" setting:"data,format,split,coco_crowd,train_images,train_masks,val_images,val_masks,val_split,split_seed,split_by"`
	Val   DataSpec `json:"val" setting:"data,format,split,coco_crowd,train_images,train_masks,val_images,val_masks,val_split,split_seed,split_by"`
	// LabelMap remaps mask labels to classes (imageio.ParseLabelMap syntax).
	LabelMap string `json:"label_map,omitempty" setting:"label_map"`
	// MaskPalette reads RGB colour masks: a pixel of colour i has label i
	// (before LabelMap). Single-channel and palette PNG masks need none.
	MaskPalette imageio.Palette `json:"mask_palette,omitempty" setting:"mask_palette"`
	// Ignore is the mask label left out of the loss and the scores.
	Ignore int `json:"ignore" setting:"ignore"`
	// ClassNames label the classes in reports.
	ClassNames []string `json:"class_names,omitempty" setting:"class_names"`
	// Palette colours the classes in the exported model's settings (the
	// base model's, where the run keeps its classifier).
	Palette imageio.Palette `json:"palette,omitempty"`
	// Trainable selects the trained parameters (network.Trainable specs).
	Trainable string `json:"trainable" setting:"trainable"`
	// Batch, Height and Width are the training graph's static input shape.
	// With Ranks > 1, Batch is each rank's share of a step's examples.
	Batch  int `json:"batch" setting:"batch"`
	Height int `json:"height" setting:"crop"`
	Width  int `json:"width" setting:"crop"`
	// Ranks is the number of data-parallel processes (MPI ranks) that
	// train the run, each on Batch examples of every step; 0 is one. It is
	// set by the run, not by the caller, and fixed on resume.
	Ranks int `json:"ranks,omitempty"`
	// Accumulate, when > 1, sums the gradients of that many batches
	// before each optimiser step: the update of a batch Accumulate times
	// larger (each batch's mean loss counting equally) in the memory of
	// one batch. Steps, epochs and the schedule count optimiser steps.
	// The host form only (Resident off; auto picks it), without the size
	// regularizer, whose per-step state follows one batch.
	Accumulate int `json:"accumulate,omitempty" setting:"accumulate"`
	// EMA, in (0, 1), keeps an exponential moving average of the trained
	// weights with this decay (0.999: about the last 1000 steps):
	// validation, best.ckpt and the exported model use the average, and
	// checkpoints keep both (EMAPrefix). 0 is none.
	EMA float64 `json:"ema,omitempty" setting:"ema"`
	// Epochs bounds the run; MaxSteps, when > 0, bounds it in steps.
	Epochs   int   `json:"epochs" setting:"epochs,resume"`
	MaxSteps int64 `json:"max_steps,omitempty" setting:"max_steps,resume"`
	// Optimizer is sgd, adam or adamw; LR the base learning rate;
	// Schedule a finetune/schedule spec (constant, poly:0.9, cosine, with
	// optional ,warmup=N).
	Optimizer   string   `json:"optimizer" setting:"optimizer"`
	LR          float64  `json:"lr" setting:"lr,resume"`
	Momentum    *float64 `json:"momentum,omitempty" setting:"momentum"`
	WeightDecay *float64 `json:"weight_decay,omitempty" setting:"weight_decay"`
	Schedule    string   `json:"schedule" setting:"schedule"`
	// ClassWeights weights the loss per class: "" none, "auto" ENet's
	// inverse log frequency of the training masks (InverseLogFrequency),
	// or one comma-separated weight per class.
	ClassWeights string `json:"class_weights,omitempty" setting:"class_weights"`
	// Patience, when > 0, stops the run after that many epochs in which
	// Monitor (MonitorMIoU, the default, or MonitorLoss) did not improve;
	// best.ckpt and model.onnx are then the best epoch by Monitor.
	Patience int    `json:"patience,omitempty" setting:"patience"`
	Monitor  string `json:"monitor,omitempty" setting:"monitor"`
	// ValDense, when set, validates with sliding-window inference and
	// test-time augmentation as segment runs them (inference.Dense)
	// instead of one run per whole image: the validation scores, the best
	// checkpoint and early stopping follow the tiled/TTA inference.
	ValDense *inference.Dense `json:"val_dense,omitempty" setting:"val_tile,val_overlap,val_tta"`
	// Seed fixes data order, augmentation and any new classifier.
	Seed uint64 `json:"seed" setting:"seed"`
	// Augment is the training augmentation (Height and Width come from
	// the fields above).
	Augment data.Augment `json:"augment" setting:"scale_min,scale_max,no_flip,brightness,contrast,saturation,gamma,blur,rotate,shear,translate,cutout"`
	// Preprocess is the model's normalisation; its geometry (resize
	// policy, size) is used for validation only.
	Preprocess imageio.Preprocess `json:"preprocess" setting:"preprocess,size,resize,scale,multiple_of,plus_one,interpolation,bgr,nhwc,mean,std,value_scale,value_offset,output_layout,threshold"`
	// Output says how to read the model's output where its graph cannot
	// (layout, sigmoid threshold).
	Output imageio.OutputSpec `json:"output,omitempty" setting:"preprocess,size,resize,scale,multiple_of,plus_one,interpolation,bgr,nhwc,mean,std,value_scale,value_offset,output_layout,threshold"`
	// Device and Threads configure ONNX Runtime.
	Device  string `json:"device,omitempty" setting:"device,resume"`
	Threads int    `json:"threads,omitempty" setting:"threads,resume"`
	// Resident is where the training state (parameters, gradients,
	// optimiser moments) lives: "on" in the session's device memory
	// (finetune/resident), "off" in Go memory, "auto" or "" on the device
	// when the steps may run on a GPU and the run is one process.
	Resident string `json:"resident,omitempty" setting:"resident,resume"`
	// CUDAGraph captures the resident training and optimiser steps as
	// CUDA graphs (finetune/resident), one launch a step instead of one a
	// node: the batch shape is fixed (training drops an epoch's last
	// partial batch, graphs or not) and so is every address. Off by
	// default until a GPU run measures it; ignored with a line where the
	// state is not resident on a CUDA device or ONNX Runtime will not
	// capture the graph (a node on the CPU).
	CUDAGraph bool `json:"cuda_graph,omitempty" setting:"cuda_graph,resume"`
	// Precision is fp32, tf32 (the default: float32 with TF32 in cuDNN
	// and cuBLAS on GPUs that have it, as PyTorch's convolutions), fp16
	// (mixed precision: onnx/autocast, float32 master weights, a dynamic
	// loss scale) or bf16 (the same in bfloat16 without a loss scale;
	// CUDA only).
	Precision string `json:"precision,omitempty" setting:"precision"`
	// ConvGrad names the convolution classes whose backward pass runs on a
	// GPU as one ConvGrad node, a cuDNN backward-data and backward-filter
	// call, instead of standard operators (grad.ParseConvClasses: none,
	// all, or a list of dense, pointwise, depthwise and grouped); "" is
	// none. Device cpu refuses any other value; Device auto without a GPU
	// says so and trains without.
	ConvGrad string `json:"conv_grad,omitempty" setting:"conv_grad,resume"`
	// CUDAOptions are CUDA provider options (e.g. "cudnn_conv_algo_search":
	// "EXHAUSTIVE") set over the ones the run picks for its Precision.
	CUDAOptions map[string]string `json:"cuda_options,omitempty" setting:"cuda_options,resume"`
	// Loss is the training objective: "ce" or "" (cross entropy: softmax,
	// or per-channel sigmoid for sigmoid and one-channel heads), "focal"
	// (the focal loss with FocalGamma), "dice" (soft Dice alone),
	// "lovasz" (Lovász-softmax alone), or the sums "ce+dice", "ce+lovasz",
	// "focal+dice".
	Loss string `json:"loss,omitempty" setting:"loss"`
	// FocalGamma is the focal loss's γ (0 means 2).
	FocalGamma float64 `json:"focal_gamma,omitempty" setting:"focal_gamma"`
	// CacheBytes bounds the decoded-image cache (see data.Config).
	CacheBytes int64 `json:"cache_bytes,omitempty"`
	// SkipBad skips unreadable examples with a warning instead of failing.
	SkipBad bool `json:"skip_bad,omitempty" setting:"skip_bad"`
	// Size defines object size, for the regularizer and for reporting
	// validation scores of small and large objects separately.
	Size SizeSpec `json:"size" setting:"size_classes,size_threshold,size_vote,size_bins"`
	// Balanced draws about half of each batch from each size class, as the
	// paper does (with or without the regularizer, so that a baseline can
	// be sampled like the regularised run); otherwise batches are shuffled.
	Balanced bool `json:"balanced,omitempty" setting:"balance,no_balance"`
	// SampleBy "class" draws each epoch's images by LVIS's repeat factors
	// (classsampling.go): images holding classes found in fewer than
	// RepeatThreshold of the images (0: DefaultRepeatThreshold) come up
	// more often. "" shuffles (or balances sizes, with Balanced).
	SampleBy        string  `json:"sample_by,omitempty" setting:"sample_by,repeat_threshold"`
	RepeatThreshold float64 `json:"repeat_threshold,omitempty" setting:"sample_by,repeat_threshold"`
	// Regularizer, with Alpha > 0, adds the size regularizer.
	Regularizer *RegularizerConfig `json:"regularizer,omitempty" setting:"alpha,objective,beta,level,grid,normalization,projection,feasibility,dual_every,lambda_init,score_bound,train_view,feature,dual_lr,c_lambda,c_mu"`

	// Explicit names the settings of the run the caller gave, by the
	// keys IsRunSetting knows ("lr", "batch"; not stored): resuming, a
	// given setting that differs from the recorded one is refused, except
	// those that may change (see mergeResume); Repeat takes them from this
	// configuration. Nil takes epochs, steps, device and threads from the
	// new configuration when resuming.
	Explicit []string `json:"-"`
}

// Settings are what a model exported from the run carries, in its
// metadata_props and its sidecar: the run's preprocessing, output spec,
// classes, palette, label map and ignore label.
func (c Config) Settings() (imageio.Sidecar, error) {
	pre, out := c.Preprocess, c.Output
	ignore := c.Ignore
	s := imageio.Sidecar{Version: imageio.SidecarVersion, Preprocess: &pre, IgnoreLabel: &ignore,
		Classes: c.ClassNames, Palette: c.Palette}
	if out != (imageio.OutputSpec{}) {
		s.Output = &out
	}
	if c.LabelMap != "" {
		lm, err := imageio.ParseLabelMap(c.LabelMap)
		if err != nil {
			return s, fmt.Errorf("label map: %w", err)
		}
		s.LabelMap = lm
	}
	return s, nil
}

// DataSpec names a split's data: its image and mask folders, or a data
// folder in any layout datalayout knows, the layout's name ("" detects
// it) and the split.
type DataSpec struct {
	Images string `json:"images"`
	Masks  string `json:"masks"`
	Data   string `json:"data,omitempty"`
	Format string `json:"format,omitempty"`
	Split  string `json:"split,omitempty"`
	// CrowdAsClass: COCO's crowd regions take their class (ignored by
	// default).
	CrowdAsClass bool `json:"crowd_as_class,omitempty"`
	// ValSplit, when set, divides the data: the spec reads the samples
	// held out for validation when HeldOut is set, the rest otherwise.
	ValSplit *datalayout.ValSplit `json:"val_split,omitempty"`
	HeldOut  bool                 `json:"held_out,omitempty"`
}

// Given reports whether the spec names any data.
func (s DataSpec) Given() bool { return s.Data != "" || s.Images != "" && s.Masks != "" }

// DataConfig is a data.Config reading the spec's data.
func (s DataSpec) DataConfig() data.Config {
	return data.Config{ImageDir: s.Images, MaskDir: s.Masks, Data: s.Data, Format: s.Format, Split: s.Split, CrowdAsClass: s.CrowdAsClass,
		ValSplit: s.ValSplit, HeldOut: s.HeldOut}
}

// validate checks what can be checked before any file is read.
func (c *Config) validate() error {
	switch {
	case c.Network.BaseModel == "":
		return fmt.Errorf("no model")
	case !c.Train.Given():
		return fmt.Errorf("no training data")
	case c.Batch < 1:
		return fmt.Errorf("batch %d must be at least 1", c.Batch)
	case c.Height < 1 || c.Width < 1:
		return fmt.Errorf("training size %dx%d must be positive", c.Height, c.Width)
	case c.Ignore < int(IgnoreRange.Min) || c.Ignore > int(IgnoreRange.Max):
		return fmt.Errorf("ignore label %d is outside %g..%g", c.Ignore, IgnoreRange.Min, IgnoreRange.Max)
	}
	if err := CheckLength(c.Epochs, c.MaxSteps, c.LR); err != nil {
		return err
	}
	if err := CheckModes(c.Precision, c.Resident); err != nil {
		return err
	}
	if err := CheckAccumulate(c.Accumulate, c.Resident, c.Regularizer); err != nil {
		return err
	}
	if err := CheckEMA(c.EMA); err != nil {
		return err
	}
	if err := CheckSampleBy(c.SampleBy, c.RepeatThreshold, c.Balanced); err != nil {
		return err
	}
	if err := CheckConvGrad(c.ConvGrad, c.Device); err != nil {
		return err
	}
	// The values flags range-check, for a configuration that came from a
	// file (a hand-edited config.json replayed with --config).
	if c.Threads < 0 {
		return fmt.Errorf("threads %d must be 0 (one per core) or more", c.Threads)
	}
	if t := c.Size.Threshold; !(t >= 0 && t <= 1) {
		return fmt.Errorf("size threshold %v is not a fraction of the image in [0, 1]", t)
	}
	for _, s := range []DataSpec{c.Train, c.Val} {
		if s.ValSplit != nil {
			if err := s.ValSplit.Check(); err != nil {
				return err
			}
		}
	}
	if err := c.Preprocess.Validate(); err != nil {
		return err
	}
	if _, err := lossTerms(c.Loss, c.FocalGamma); err != nil {
		return err
	}
	if err := CheckClassWeights(c.ClassWeights); err != nil {
		return err
	}
	if err := c.checkEarlyStop(); err != nil {
		return err
	}
	if c.ValDense != nil {
		if err := c.ValDense.Validate(); err != nil {
			return &setting.Error{Setting: "val_dense", Err: err}
		}
	}
	return c.checkMemory()
}

// ClassesRange is the classes of the fresh classifier a run may give its
// base model (NetworkSpec.Classes; 0 keeps the model's).
var ClassesRange = setting.Range{Min: 1, Max: 65536, Zero: true, Why: "0 keeps the model's classifier"}

// IgnoreRange is the ignore labels a run takes: training reads 8-bit
// masks (finetune/data), and 0 is a class.
var IgnoreRange = setting.Range{Min: 1, Max: 255, Why: "training masks hold 8-bit labels; 0 is a class"}

// LRRange is the learning rates a run takes: positive and at most 10
// (more is a typo, and diverges at the first step).
var LRRange = setting.Range{Min: 0, MinOpen: true, Max: 10}

// Ranges are the valid values of the run's numbers as a user gives them,
// by setting key (the regularizer's dual steps: dual.Ranges);
// CheckRanges refuses others.
var Ranges = map[string]setting.Range{
	"lr":               LRRange,
	"batch":            inference.BatchRange,
	"epochs":           {Min: 0, Max: 1 << 24},
	"max_steps":        {Min: 0, Max: 1 << 40},
	"patience":         {Min: 0, Max: 1 << 24},
	"momentum":         {Min: 0, Max: 1, Why: "SGD momentum is in [0, 1]"},
	"weight_decay":     {Min: 0, Max: math.Inf(1)},
	"scale_min":        {Min: 0, MinOpen: true, Max: 100},
	"scale_max":        {Min: 0, MinOpen: true, Max: 100},
	"accumulate":       {Min: 1, Max: 1 << 16, Zero: true, Why: "0 or 1: none"},
	"rotate":           {Min: 0, Max: 180, Why: "degrees either way"},
	"shear":            {Min: 0, Max: 45, Why: "degrees either way"},
	"translate":        {Min: 0, Max: 0.5, Why: "a share of the crop's side"},
	"cutout":           {Min: 0, Max: 16},
	"repeat_threshold": {Min: 0, Max: 1, Why: "a share of the training images"},
	"score_bound":      {Min: 0, Max: math.Inf(1), Why: "0: unbounded"},
}

// CheckRanges refuses a number of c out of its range (Ranges, and the
// regularizer's dual.Ranges), a NaN or an infinity, with a
// *setting.Error keyed as Ranges is, for callers that want the error
// before any other work (the CLI checks every number it binds, defaults
// included). Unset optional numbers (Momentum, WeightDecay, Regularizer)
// are not checked.
func (c *Config) CheckRanges() error {
	a, g := c.Augment, c.Augment.Geometric
	nums := []setting.Number{{Key: "lr", V: c.LR}, {Key: "batch", V: float64(c.Batch), Int: true},
		{Key: "epochs", V: float64(c.Epochs), Int: true}, {Key: "max_steps", V: float64(c.MaxSteps), Int: true},
		{Key: "patience", V: float64(c.Patience), Int: true}, {Key: "scale_min", V: a.ScaleMin}, {Key: "scale_max", V: a.ScaleMax},
		{Key: "accumulate", V: float64(c.Accumulate), Int: true}, {Key: "rotate", V: g.Rotate}, {Key: "shear", V: g.Shear},
		{Key: "translate", V: g.Translate}, {Key: "cutout", V: float64(g.Cutout), Int: true}, {Key: "repeat_threshold", V: c.RepeatThreshold}}
	for _, p := range []struct {
		key string
		v   *float64
	}{{"momentum", c.Momentum}, {"weight_decay", c.WeightDecay}} {
		if p.v != nil {
			nums = append(nums, setting.Number{Key: p.key, V: *p.v})
		}
	}
	if r := c.Regularizer; r != nil {
		nums = append(nums, setting.Number{Key: "score_bound", V: r.ScoreBound})
		if err := r.Dual.CheckRanges(); err != nil {
			return err
		}
	}
	if err := IgnoreRange.Check("ignore", float64(c.Ignore), true); err != nil { // not in Ranges: other commands' ignore is any mask label
		return err
	}
	return setting.CheckAll(Ranges, nums)
}

// CheckLength checks how long a run trains and at what learning rate
// (Config's Epochs, MaxSteps and LR), for callers that want the error
// before any other work: a run needs epochs or a step count.
func CheckLength(epochs int, maxSteps int64, lr float64) error {
	if epochs < 1 && maxSteps < 1 {
		return &setting.Error{Setting: "epochs", Value: strconv.Itoa(epochs), Needs: "max_steps"}
	}
	return LRRange.Check("lr", lr, false)
}

// CheckLoss checks a loss name and focal γ (Config.Loss, FocalGamma),
// for callers that want the error before any other work.
func CheckLoss(loss string, gamma float64) error {
	_, err := lossTerms(loss, gamma)
	return err
}

// CheckConvGrad checks Config's ConvGrad value against its Device, for
// callers that want the error before any other work: ConvGrad's CPU kernel
// is for checks, so a run on the CPU takes none.
func CheckConvGrad(convGrad, device string) error {
	classes, err := grad.ParseConvClasses(convGrad)
	if err == nil && classes != 0 && strings.EqualFold(device, runtime.DeviceCPU) {
		err = setting.Messagef("needs a GPU ({device} cuda or auto): on the CPU the standard forms are faster")
	}
	if err != nil {
		return &setting.Error{Setting: "conv_grad", Value: convGrad, Err: err}
	}
	return nil
}

// CheckModes checks Config's Precision and Resident values, for callers
// that want the error before any other work (the CLI checks them first).
func CheckModes(precision, resident string) error {
	if _, err := parsePrecision(precision); err != nil {
		return err
	}
	return checkResident(resident)
}

// CheckExecution checks the settings that decide how a run executes
// (CheckModes, CheckConvGrad, CheckLoss), for callers that check them
// before any other.
func (c Config) CheckExecution() error {
	if err := CheckModes(c.Precision, c.Resident); err != nil {
		return err
	}
	if err := CheckConvGrad(c.ConvGrad, c.Device); err != nil {
		return err
	}
	if err := CheckLoss(c.Loss, c.FocalGamma); err != nil {
		return setting.Messagef("{loss} %s {focal_gamma} %v: %w", c.Loss, c.FocalGamma, err)
	}
	return nil
}

// CheckAccumulate checks Config's Accumulate against its Resident and
// Regularizer values, for callers that want the error before any other
// work.
func CheckAccumulate(n int, resident string, reg *RegularizerConfig) error {
	var err error
	switch {
	case n < 0:
		err = errors.New("must be 1 or more (0 and 1: no accumulation)")
	case n <= 1:
		return nil
	case strings.EqualFold(resident, "on"):
		err = errors.New("sums the gradients in host memory, and resident on keeps the training state on the device, updated after every batch: use resident off or auto")
	case reg != nil && reg.Alpha > 0:
		err = errors.New("the size regularizer's state follows every batch: train with it at the larger batch instead")
	}
	if err != nil {
		return &setting.Error{Setting: "accumulate", Value: strconv.Itoa(n), Err: err}
	}
	return nil
}

// ParseCUDAOptions reads CUDA provider options "K=V,K=V" (CUDAOptions;
// nil for "").
func ParseCUDAOptions(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	opts := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || val == "" {
			return nil, setting.Errorf("cuda_options", strconv.Quote(v), "%q is not K=V", kv)
		}
		opts[k] = val
	}
	return opts, nil
}
