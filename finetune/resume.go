package finetune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
)

// KindResume marks the metrics.jsonl line a resumed run writes when it
// changes a setting that may change on resume.
const KindResume = "resume"

// A setting of the run is named by its config key (as Config.Explicit and
// the errors name it) and sets the Config fields whose `setting` tag lists
// the key: resuming compares them with the checkpoint's, and repeating a
// recorded run copies them. A tag ending in "resume" marks settings a
// resumed run may change; they apply from the resumed step on and are
// recorded in metrics.jsonl. Where the state lives (resident), how cuDNN
// picks its algorithms (cuda_options), how convolutions' gradients are
// computed (conv_grad) and whether the steps are captured as CUDA graphs
// (cuda_graph) do not change the run beyond rounding: checkpoints hold it
// in one format either way. Where the run is written and whether it
// resumes are not settings of the run.
type runSetting struct {
	fields [][]int // reflect field indices in Config
	resume bool
}

// runSettings are the settings the tags of Config (and of the fields of
// its untagged structs, Network's) name, by key.
var runSettings = func() map[string]*runSetting {
	m := map[string]*runSetting{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f, at := t.Field(i), append(slices.Clone(index), i)
			tag, ok := f.Tag.Lookup("setting")
			if !ok {
				if f.Type.Kind() == reflect.Struct {
					walk(f.Type, at)
				}
				continue
			}
			keys := strings.Split(tag, ",")
			resume := keys[len(keys)-1] == "resume"
			if resume {
				keys = keys[:len(keys)-1]
			}
			for _, k := range keys {
				if m[k] == nil {
					m[k] = &runSetting{resume: resume}
				}
				m[k].fields = append(m[k].fields, at)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), nil)
	return m
}()

// IsRunSetting reports whether key is a setting of the run (one that
// resuming checks and Repeat takes from the caller's configuration).
func IsRunSetting(key string) bool { _, ok := runSettings[key]; return ok }

// RunSettings are the keys of the run's settings, sorted.
func RunSettings() []string { return slices.Sorted(maps.Keys(runSettings)) }

// values returns the values of the setting's fields in c, for comparing
// and showing.
func (s *runSetting) values(c *Config) any {
	v := reflect.ValueOf(c).Elem()
	if len(s.fields) == 1 {
		return v.FieldByIndex(s.fields[0]).Interface()
	}
	vs := make([]any, len(s.fields))
	for i, f := range s.fields {
		vs[i] = v.FieldByIndex(f).Interface()
	}
	return vs
}

// copy sets the setting's fields in dst to their values in src.
func (s *runSetting) copy(dst, src *Config) {
	d, from := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for _, f := range s.fields {
		d.FieldByIndex(f).Set(from.FieldByIndex(f))
	}
}

// Repeat returns a recorded run's configuration (an earlier run's
// config.json) with the settings the caller gave (cfg.Explicit) taken
// from cfg: the same run again, or a variation of it.
// The number of processes is the new run's.
func Repeat(recorded, cfg Config) Config {
	out := recorded
	for _, key := range cfg.Explicit {
		if s, ok := runSettings[key]; ok {
			s.copy(&out, &cfg)
		}
	}
	out.Ranks, out.Explicit = 0, nil
	return out
}

// RepeatInputs are the inputs of the recorded run rec that a repeat reads
// where the caller gives none of its own (given: the keys the caller gave,
// as Config.Explicit), by setting key: its base model
// (network.base_model), unless the caller gives one or resumes, and its
// data (data, format and split, or the four folders and the val split),
// unless the caller gives any. With them the caller's settings make a
// complete configuration, which Repeat then turns into the recorded run.
// A recorded path that names nothing is refused (CheckPaths): runs record
// them absolute, and a relative one (a hand-edited config.json, one of an
// older segtune) is read against the working directory.
func (rec Config) RepeatInputs(given []string, resume bool) (map[string]string, error) {
	in := map[string]string{}
	if slices.Contains(given, "network.base_model") || resume {
		rec.Network.BaseModel = ""
	}
	in["network.base_model"] = rec.Network.BaseModel
	if slices.ContainsFunc([]string{"data", "train_images", "train_masks", "val_images", "val_masks"}, func(k string) bool { return slices.Contains(given, k) }) {
		rec.Train, rec.Val = DataSpec{}, DataSpec{}
	}
	if err := rec.CheckPaths(); err != nil {
		return nil, err
	}
	t, v := rec.Train, rec.Val
	if v.HeldOut { // the val split's, below
		v = DataSpec{}
	}
	maps.Copy(in, map[string]string{"train_images": t.Images, "train_masks": t.Masks, "val_images": v.Images, "val_masks": v.Masks})
	if vs := t.ValSplit; vs != nil { // the same held-out validation images
		maps.Copy(in, map[string]string{"val_split": strconv.FormatFloat(vs.Fraction, 'g', -1, 64),
			"split_seed": strconv.FormatUint(vs.Seed, 10), "split_by": vs.By})
	}
	if t.Images == "" { // a data folder in a layout
		maps.Copy(in, map[string]string{"data": t.Data, "format": t.Format, "split": t.Split})
	}
	maps.DeleteFunc(in, func(_, v string) bool { return v == "" })
	return in, nil
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
// the run recorded: its key (as Config.Explicit names it), the value
// given and the run's, as text.
type SettingChange struct{ Setting, Value, Was string }

// sortedByName is changes in the order of their settings' names: a list
// reads in the order of the names the caller calls them by.
func sortedByName(changes []SettingChange, name func(key string) string) []SettingChange {
	return slices.SortedStableFunc(slices.Values(changes), func(a, b SettingChange) int {
		return strings.Compare(name(a.Setting), name(b.Setting))
	})
}

// ResumeConflictError refuses to resume a run with settings that differ
// from those it recorded (besides the ones that may change on resume).
type ResumeConflictError struct {
	Refused []SettingChange // sorted by key
}

func (e *ResumeConflictError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *ResumeConflictError) Named(name func(key string) string) string {
	var refused []string
	for _, c := range sortedByName(e.Refused, name) {
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
		explicit = []string{"epochs", "max_steps", "device", "threads"}
	}
	// The run recorded the input layout its model's graph gave; flags that
	// leave the layout to the graph (no --nhwc) ask for that same layout.
	if cfg.Preprocess.Layout == "" {
		cfg.Preprocess.Layout = old.Preprocess.Layout
	}
	var changes []resumeChange
	var refused []SettingChange
	for _, key := range explicit {
		s, ok := runSettings[key]
		if !ok {
			continue // not a setting of the run
		}
		o, n := s.values(&old), s.values(&cfg)
		if reflect.DeepEqual(o, n) {
			continue
		}
		if s.resume {
			s.copy(&merged, &cfg)
			changes = append(changes, resumeChange{Setting: key, Old: o, New: n})
			continue
		}
		refused = append(refused, SettingChange{Setting: key, Value: show(n), Was: show(o)})
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

// recordNames name the changes of resumeRecord whose key is not their
// name there: "lr" is a core field of the record, a device is recorded as
// whether it is cuda, and a step count as "steps", as before runs named
// settings by key.
var recordNames = map[string]string{"lr": "new_lr", "device": "device_cuda", "max_steps": "steps"}

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
		name := c.Setting
		if n, ok := recordNames[name]; ok {
			name = n
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
