package finetune

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
)

// KindResume marks the metrics.jsonl line a resumed run writes when it
// changes a setting that may change on resume.
const KindResume = "resume"

// resumeSetting extracts the part of a Config that a command-line flag
// sets, for comparing a resumed run's flags with the checkpoint's settings.
type resumeSetting func(*Config) any

// resumable are the flags a resumed run may change; they apply from the
// resumed step on and are recorded in metrics.jsonl.
var resumable = map[string]struct {
	get resumeSetting
	set func(dst, src *Config)
}{
	"lr":      {func(c *Config) any { return c.LR }, func(d, s *Config) { d.LR = s.LR }},
	"epochs":  {func(c *Config) any { return c.Epochs }, func(d, s *Config) { d.Epochs = s.Epochs }},
	"steps":   {func(c *Config) any { return c.MaxSteps }, func(d, s *Config) { d.MaxSteps = s.MaxSteps }},
	"device":  {func(c *Config) any { return c.Device }, func(d, s *Config) { d.Device = s.Device }},
	"threads": {func(c *Config) any { return c.Threads }, func(d, s *Config) { d.Threads = s.Threads }},
	// Where the state lives does not change the run: checkpoints hold
	// it in one format either way.
	"resident": {func(c *Config) any { return c.Resident }, func(d, s *Config) { d.Resident = s.Resident }},
}

// fixedOnResume maps the other flags of `segtune finetune` to the settings
// they make; a resumed run must not change them.
var fixedOnResume = func() map[string]resumeSetting {
	m := map[string]resumeSetting{
		"model":     func(c *Config) any { return c.Network.BaseModel },
		"classes":   func(c *Config) any { return c.Network.Classes },
		"label-map": func(c *Config) any { return c.LabelMap },
		"mask-palette": func(c *Config) any {
			return c.MaskPalette
		},
		"ignore": func(c *Config) any { return c.Ignore },
		"class-names": func(c *Config) any {
			return c.ClassNames
		},
		"trainable": func(c *Config) any { return c.Trainable },
		"batch":     func(c *Config) any { return c.Batch },
		"crop":      func(c *Config) any { return [2]int{c.Height, c.Width} },
		"optimizer": func(c *Config) any { return c.Optimizer },
		"momentum":  func(c *Config) any { return c.Momentum },
		"weight-decay": func(c *Config) any {
			return c.WeightDecay
		},
		"schedule": func(c *Config) any { return c.Schedule },
		"seed":     func(c *Config) any { return c.Seed },
		"class-weights": func(c *Config) any {
			return c.ClassWeights
		},
		"patience": func(c *Config) any { return c.Patience },
		"monitor":  func(c *Config) any { return c.Monitor },
		"skip-bad": func(c *Config) any { return c.SkipBad },
		"precision": func(c *Config) any {
			return c.Precision
		},
	}
	data := func(c *Config) any { return [2]DataSpec{c.Train, c.Val} }
	for _, f := range []string{"data", "format", "split", "train-images", "train-masks", "val-images", "val-masks"} {
		m[f] = data
	}
	aug := func(c *Config) any { return c.Augment }
	for _, f := range []string{"scale-min", "scale-max", "no-flip"} {
		m[f] = aug
	}
	reg := func(c *Config) any { return c.Regularizer }
	for _, f := range []string{"alpha", "objective", "beta", "level", "grid", "normalization", "projection",
		"feature", "dual-lr", "c-lambda", "c-mu"} {
		m[f] = reg
	}
	bal := func(c *Config) any { return c.Balanced }
	m["balance"], m["no-balance"] = bal, bal
	size := func(c *Config) any { return c.Size }
	for _, f := range []string{"size-classes", "size-threshold", "size-vote", "size-bins"} {
		m[f] = size
	}
	pre := func(c *Config) any { return c.Preprocess }
	for _, f := range []string{"preprocess", "size", "resize", "scale", "multiple-of", "plus-one", "interpolation",
		"bgr", "nhwc", "mean", "std", "value-scale", "value-offset"} {
		m[f] = pre
	}
	return m
}()

// resumeChange is a resumable setting a resumed run changed.
type resumeChange struct {
	Flag     string
	Old, New any
}

// mergeResume returns the checkpoint's configuration old with the
// resumable settings of cfg that the user gave (cfg.Explicit) applied. A
// flag the user gave that would change any other setting is an error
// listing every such flag: the run continues with its recorded settings
// or not at all. Without cfg.Explicit (callers that do not say which
// flags were given), epochs, steps, device and threads are taken from cfg.
func mergeResume(old, cfg Config) (Config, []resumeChange, error) {
	merged := old
	explicit := cfg.Explicit
	if explicit == nil {
		explicit = []string{"epochs", "steps", "device", "threads"}
	}
	var changes []resumeChange
	var refused []string
	for _, f := range explicit {
		if r, ok := resumable[f]; ok {
			if o, n := r.get(&old), r.get(&cfg); !reflect.DeepEqual(o, n) {
				r.set(&merged, &cfg)
				changes = append(changes, resumeChange{Flag: f, Old: o, New: n})
			}
			continue
		}
		get, ok := fixedOnResume[f]
		if !ok {
			continue // not a setting of the run (--out, --resume, --json, ...)
		}
		if o, n := get(&old), get(&cfg); !reflect.DeepEqual(o, n) {
			refused = append(refused, fmt.Sprintf("--%s (the run has %s)", f, show(o)))
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return old, nil, fmt.Errorf("--resume continues the run with its recorded settings, and these flags differ from them: %s; "+
			"only --lr, --epochs, --steps, --device and --threads may change on resume (drop the others, or start a new run in another --out)",
			strings.Join(refused, ", "))
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Flag < changes[j].Flag })
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
		name := strings.ReplaceAll(c.Flag, "-", "_")
		if c.Flag == "device" {
			name = "device_cuda"
		}
		if c.Flag == "lr" {
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

// recordResume logs the settings a resumption changed and writes them to
// metrics.jsonl as a KindResume line.
func (t *trainer) recordResume(changes []resumeChange) error {
	if len(changes) == 0 {
		return nil
	}
	var parts []string
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf("--%s %s (was %s)", c.Flag, show(c.New), show(c.Old)))
	}
	fmt.Fprintf(t.hooks.Log, "resuming with %s\n", strings.Join(parts, ", "))
	return t.hist.Write(resumeRecord(int64(t.epoch), t.steps, changes))
}

// divergenceAdvice says how to go on after the loss diverged, naming only
// checkpoints that exist: resuming from last.ckpt with a lower --lr (which
// --resume applies), or, when no checkpoint was written yet, starting
// again with a lower --lr.
func (t *trainer) divergenceAdvice() string {
	lower := t.cfg.LR / 10
	if in, err := checkpoint.ReadInfo(t.keeper.LastPath()); err == nil {
		return fmt.Sprintf("the last good checkpoint is %s (step %d): continue from it with a lower learning rate: segtune finetune --out %s --resume --lr %.3g",
			t.keeper.LastPath(), in.Step, t.dir, lower)
	}
	return fmt.Sprintf("no checkpoint was written before it diverged: run again with a lower learning rate (e.g. --lr %.3g)", lower)
}
