package finetune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
)

// KindResume marks the metrics.jsonl line a resumed run writes when it
// changes a setting that may change on resume.
const KindResume = "resume"

// settingFields returns pointers to the fields of a Config that one
// setting of the run sets: resuming compares them with the checkpoint's,
// and repeating a recorded run copies them.
type settingFields func(*Config) []any

// runSettings maps the names of the run's settings (those Config.Explicit
// lists; `segtune finetune` has a flag of each name) to the fields they
// set. Where the run is written and whether it resumes are not settings
// of the run.
var runSettings = func() map[string]settingFields {
	m := map[string]settingFields{
		"model":         func(c *Config) []any { return []any{&c.Network.BaseModel} },
		"classes":       func(c *Config) []any { return []any{&c.Network.Classes, &c.Network.HeadSeed} },
		"dequantize":    func(c *Config) []any { return []any{&c.Network.Dequantize} },
		"label-map":     func(c *Config) []any { return []any{&c.LabelMap} },
		"mask-palette":  func(c *Config) []any { return []any{&c.MaskPalette} },
		"ignore":        func(c *Config) []any { return []any{&c.Ignore} },
		"class-names":   func(c *Config) []any { return []any{&c.ClassNames} },
		"trainable":     func(c *Config) []any { return []any{&c.Trainable} },
		"batch":         func(c *Config) []any { return []any{&c.Batch} },
		"accumulate":    func(c *Config) []any { return []any{&c.Accumulate} },
		"ema":           func(c *Config) []any { return []any{&c.EMA} },
		"crop":          func(c *Config) []any { return []any{&c.Height, &c.Width} },
		"optimizer":     func(c *Config) []any { return []any{&c.Optimizer} },
		"momentum":      func(c *Config) []any { return []any{&c.Momentum} },
		"weight-decay":  func(c *Config) []any { return []any{&c.WeightDecay} },
		"schedule":      func(c *Config) []any { return []any{&c.Schedule} },
		"seed":          func(c *Config) []any { return []any{&c.Seed} },
		"class-weights": func(c *Config) []any { return []any{&c.ClassWeights} },
		"patience":      func(c *Config) []any { return []any{&c.Patience} },
		"monitor":       func(c *Config) []any { return []any{&c.Monitor} },
		"skip-bad":      func(c *Config) []any { return []any{&c.SkipBad} },
		"precision":     func(c *Config) []any { return []any{&c.Precision} },
		"loss":          func(c *Config) []any { return []any{&c.Loss} },
		"focal-gamma":   func(c *Config) []any { return []any{&c.FocalGamma} },
		"lr":            func(c *Config) []any { return []any{&c.LR} },
		"epochs":        func(c *Config) []any { return []any{&c.Epochs} },
		"steps":         func(c *Config) []any { return []any{&c.MaxSteps} },
		"device":        func(c *Config) []any { return []any{&c.Device} },
		"threads":       func(c *Config) []any { return []any{&c.Threads} },
		"resident":      func(c *Config) []any { return []any{&c.Resident} },
		"conv-grad":     func(c *Config) []any { return []any{&c.ConvGrad} },
		"cuda-opt":      func(c *Config) []any { return []any{&c.CUDAOptions} },
		"cuda-graph":    func(c *Config) []any { return []any{&c.CUDAGraph} },
	}
	group := func(f settingFields, names ...string) {
		for _, n := range names {
			m[n] = f
		}
	}
	group(func(c *Config) []any { return []any{&c.Train, &c.Val} },
		"data", "format", "split", "coco-crowd", "train-images", "train-masks", "val-images", "val-masks",
		"val-split", "split-seed", "split-by")
	group(func(c *Config) []any { return []any{&c.Augment} },
		"scale-min", "scale-max", "no-flip", "brightness", "contrast", "saturation", "gamma", "blur",
		"rotate", "shear", "translate", "cutout")
	group(func(c *Config) []any { return []any{&c.Regularizer} },
		"alpha", "objective", "beta", "level", "grid", "normalization", "projection", "feasibility", "dual-every",
		"lambda-init", "score-bound", "train-view", "feature", "dual-lr", "c-lambda", "c-mu")
	group(func(c *Config) []any { return []any{&c.Balanced} }, "balance", "no-balance")
	group(func(c *Config) []any { return []any{&c.SampleBy, &c.RepeatThreshold} }, "sample-by", "repeat-threshold")
	group(func(c *Config) []any { return []any{&c.ValDense} }, "val-tile", "val-overlap", "val-tta")
	group(func(c *Config) []any { return []any{&c.Size} }, "size-classes", "size-threshold", "size-vote", "size-bins")
	group(func(c *Config) []any { return []any{&c.Preprocess, &c.Output} },
		"preprocess", "size", "resize", "scale", "multiple-of", "plus-one", "interpolation",
		"bgr", "nhwc", "mean", "std", "value-scale", "value-offset", "output-layout", "threshold")
	return m
}()

// mayChangeOnResume are the settings a resumed run may change; they apply
// from the resumed step on and are recorded in metrics.jsonl. Where the
// state lives (resident), how cuDNN picks its algorithms (cuda-opt), how
// convolutions' gradients are computed (conv-grad) and whether the steps
// are captured as CUDA graphs (cuda-graph) do not change the run beyond
// rounding: checkpoints hold it in one format either way.
var mayChangeOnResume = map[string]bool{"lr": true, "epochs": true, "steps": true, "device": true, "threads": true, "resident": true, "cuda-opt": true, "conv-grad": true, "cuda-graph": true}

// IsRunSetting reports whether name is a setting of the run (one that
// resuming checks and Repeat takes from the caller's configuration).
func IsRunSetting(name string) bool { _, ok := runSettings[name]; return ok }

// values returns the values of the fields f selects in c, for comparing
// and showing.
func (f settingFields) values(c *Config) any {
	ptrs := f(c)
	if len(ptrs) == 1 {
		return reflect.ValueOf(ptrs[0]).Elem().Interface()
	}
	vs := make([]any, len(ptrs))
	for i, p := range ptrs {
		vs[i] = reflect.ValueOf(p).Elem().Interface()
	}
	return vs
}

// copy sets the fields f selects in dst to their values in src.
func (f settingFields) copy(dst, src *Config) {
	from := f(src)
	for i, p := range f(dst) {
		reflect.ValueOf(p).Elem().Set(reflect.ValueOf(from[i]).Elem())
	}
}

// Repeat returns a recorded run's configuration (an earlier run's
// config.json) with the settings the caller gave (cfg.Explicit) taken
// from cfg: the same run again, or a variation of it.
// The number of processes is the new run's.
func Repeat(recorded, cfg Config) Config {
	out := recorded
	for _, name := range cfg.Explicit {
		if f, ok := runSettings[name]; ok {
			f.copy(&out, &cfg)
		}
	}
	out.Ranks, out.Explicit = 0, nil
	return out
}

// IsRecordedRun reports whether settings, a file's mapping of names to
// values, is a run's config.json (a Config) rather than flag values: it
// names the run's network and data.
func IsRecordedRun(settings map[string]any) bool {
	_, network := settings["network"]
	_, train := settings["train"]
	return network && train
}

// ParseRecordedRun reads a run's config.json, refusing fields it does not
// know: settings it would drop would not repeat the run.
func ParseRecordedRun(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("not a fine-tuning run's config.json: %v", err)
	}
	return &cfg, nil
}

// resumeChange is a resumable setting a resumed run changed.
type resumeChange struct {
	Setting  string
	Old, New any
}

// SettingChange is a setting of the run given a value other than the one
// the run recorded: its name (as Config.Explicit names it), the value
// given and the run's, as text.
type SettingChange struct{ Setting, Value, Was string }

// ResumeConflictError refuses to resume a run with settings that differ
// from those it recorded (besides the ones that may change on resume).
type ResumeConflictError struct {
	Refused []SettingChange // sorted by setting
}

func (e *ResumeConflictError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *ResumeConflictError) Named(name func(key string) string) string {
	var refused []string
	for _, c := range e.Refused {
		refused = append(refused, fmt.Sprintf("%s (the run has %s)", name(c.Setting), c.Was))
	}
	return setting.Sprintf(name, "{resume} continues the run with its recorded settings, and these settings differ from them: %s"+
		"; only {lr}, {epochs}, {max_steps}, {device} and {threads} may change on resume (drop the others, or start a new run in another {run_dir})", strings.Join(refused, ", "))
}

// keepFixedCrop takes the crop of a resumed run whose model has a fixed
// input size for the crop cfg asks: such a run trains at the model's size
// whatever crop it is given (fitFixedSize), so no crop asked changes it
// (the command that started the run included). A model that cannot be
// read now leaves the crop to mergeResume.
func keepFixedCrop(old Config, cfg *Config) {
	if cfg.Height == old.Height && cfg.Width == old.Width || !slices.Contains(cfg.Explicit, "crop") {
		return
	}
	m, err := old.Network.LoadNetwork("")
	if err != nil {
		return
	}
	if ct, err := trainer.ReadContract(m, ContractOverrides(old.Preprocess, old.Output)); err == nil && ct.Height == int64(old.Height) && ct.Width == int64(old.Width) {
		cfg.Height, cfg.Width = old.Height, old.Width
	}
}

// mergeResume returns the checkpoint's configuration old with the
// resumable settings of cfg that the caller gave (cfg.Explicit) applied.
// A given setting that would change any other setting is a
// ResumeConflictError listing every such setting: the run continues with
// its recorded settings or not at all. Without cfg.Explicit, epochs,
// steps, device and threads are taken from cfg.
func mergeResume(old, cfg Config) (Config, []resumeChange, error) {
	merged := old
	explicit := cfg.Explicit
	if explicit == nil {
		explicit = []string{"epochs", "steps", "device", "threads"}
	}
	// The run recorded the input layout its model's graph gave; flags that
	// leave the layout to the graph (no --nhwc) ask for that same layout.
	if cfg.Preprocess.Layout == "" {
		cfg.Preprocess.Layout = old.Preprocess.Layout
	}
	var changes []resumeChange
	var refused []SettingChange
	for _, name := range explicit {
		f, ok := runSettings[name]
		if !ok {
			continue // not a setting of the run
		}
		o, n := f.values(&old), f.values(&cfg)
		if reflect.DeepEqual(o, n) {
			continue
		}
		if mayChangeOnResume[name] {
			f.copy(&merged, &cfg)
			changes = append(changes, resumeChange{Setting: name, Old: o, New: n})
			continue
		}
		refused = append(refused, SettingChange{Setting: name, Value: show(n), Was: show(o)})
	}
	if len(refused) > 0 {
		sort.Slice(refused, func(i, j int) bool { return refused[i].Setting < refused[j].Setting })
		return old, nil, &ResumeConflictError{Refused: refused}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Setting < changes[j].Setting })
	merged.Explicit = nil
	return merged, changes, nil
}

func show(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "the default"
		}
		v = rv.Elem().Interface()
	}
	if s, ok := v.(string); ok {
		if s == "" {
			return "none"
		}
		return fmt.Sprintf("%q", s)
	}
	// Settings made of several fields (preprocessing, augmentation) read
	// better as their JSON, as config.json has them, than as Go's %v.
	if _, ok := v.(fmt.Stringer); !ok {
		switch reflect.ValueOf(v).Kind() {
		case reflect.Struct, reflect.Slice, reflect.Map:
			if b, err := json.Marshal(v); err == nil {
				return string(b)
			}
		}
	}
	return fmt.Sprintf("%v", v)
}

// resumeRecord is the metrics.jsonl line recording the changes a resumed
// run made: new values as fields, old ones as prev_<field>; the device,
// not a number, is recorded as device_cuda (1 or 0).
func resumeRecord(epoch, step int64, changes []resumeChange) history.Record {
	r := history.Record{Kind: KindResume, Epoch: epoch, Step: step, Extra: map[string]float64{}}
	num := func(v any) (float64, bool) {
		switch x := v.(type) {
		case float64:
			return x, true
		case int:
			return float64(x), true
		case int64:
			return float64(x), true
		case string:
			if x == "cuda" {
				return 1, true
			}
			return 0, true
		}
		return 0, false
	}
	for _, c := range changes {
		name := strings.ReplaceAll(c.Setting, "-", "_")
		if c.Setting == "device" {
			name = "device_cuda"
		}
		if c.Setting == "lr" {
			name = "new_lr" // "lr" is a core field of the record
		}
		if v, ok := num(c.New); ok {
			r.Extra[name] = v
		}
		if v, ok := num(c.Old); ok {
			r.Extra["prev_"+name] = v
		}
	}
	return r
}

// recordResume notes the settings a resumption changed and writes them to
// metrics.jsonl as a KindResume line.
func (t *runner) recordResume(changes []resumeChange) error {
	if len(changes) == 0 {
		return nil
	}
	var n ResumedNotice
	for _, c := range changes {
		n.Changes = append(n.Changes, SettingChange{Setting: c.Setting, Value: show(c.New), Was: show(c.Old)})
	}
	t.hooks.notice(n)
	return t.hist.Write(resumeRecord(int64(t.epoch), t.steps, changes))
}

// DivergedError stops a run whose loss or gradients are no longer finite
// (Err). The last good checkpoint is left as it was.
type DivergedError struct {
	Step int64 // the step that diverged
	Err  error
	// LR is a lower learning rate to go on with.
	LR float64
	// Checkpoint is the last good checkpoint and CheckpointStep its step;
	// Checkpoint is "" when none was written. Dir is the run's folder.
	Checkpoint, Dir string
	CheckpointStep  int64
}

func (e *DivergedError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *DivergedError) Named(name func(key string) string) string {
	return fmt.Sprintf("training diverged at step %d (%v); %s", e.Step, e.Err, e.advice(name))
}

func (e *DivergedError) Unwrap() error { return e.Err }

// advice says how to go on, naming only a checkpoint that exists: resume
// from it with a lower learning rate (which resuming applies), or, when
// none was written, start again with one.
func (e *DivergedError) advice(name func(key string) string) string {
	if e.Checkpoint != "" {
		return setting.Sprintf(name, "the last good checkpoint is %s (step %d): continue from it with a lower learning rate: {run_dir} %s, {resume}, {lr} %.3g",
			e.Checkpoint, e.CheckpointStep, e.Dir, e.LR)
	}
	return setting.Sprintf(name, "no checkpoint was written before it diverged: run again with a lower learning rate (e.g. {lr} %.3g)", e.LR)
}

// diverged is the DivergedError of the coming step, failing with err.
func (t *runner) diverged(err error) error {
	e := &DivergedError{Step: t.steps + 1, Err: err, LR: t.cfg.LR / 10, Dir: t.dir}
	if in, rerr := checkpoint.ReadInfo(t.keeper.LastPath()); rerr == nil {
		e.Checkpoint, e.CheckpointStep = t.keeper.LastPath(), in.Step
	}
	return e
}
