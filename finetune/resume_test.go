package finetune

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// A resumed run refuses a changed setting of every kind the table knows,
// including those whose fields come from several flags, and applies the
// ones that may change.
func TestMergeResumeRefusesChangedSettings(t *testing.T) {
	old := Config{LR: 1e-3, Epochs: 2, Loss: "ce", FocalGamma: 2, Height: 32, Width: 32}
	for _, tc := range []struct {
		setting string
		edit    func(*Config)
	}{
		{"loss", func(c *Config) { c.Loss = "dice" }},
		{"focal_gamma", func(c *Config) { c.FocalGamma = 3 }},
		{"crop", func(c *Config) { c.Width = 64 }},
		{"brightness", func(c *Config) { c.Augment.Photometric.Brightness = 0.2 }},
		{"threshold", func(c *Config) { c.Output.Threshold = 0.7 }},
	} {
		cfg := old
		tc.edit(&cfg)
		cfg.Explicit = []string{tc.setting}
		_, _, err := mergeResume(old, cfg)
		var rc *ResumeConflictError
		if !errors.As(err, &rc) || len(rc.Refused) != 1 || rc.Refused[0].Setting != tc.setting || !strings.Contains(err.Error(), ": "+tc.setting+" (the run has") {
			t.Errorf("%s changed on resume: error %v, want it refused", tc.setting, err)
		}
	}
	cfg := old
	cfg.LR, cfg.Epochs, cfg.Loss = 5e-4, 4, "dice" // --loss not given: the run's stays
	cfg.Explicit = []string{"lr", "epochs", "out"}
	merged, changes, err := mergeResume(old, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if merged.LR != 5e-4 || merged.Epochs != 4 || merged.Loss != "ce" || len(changes) != 2 {
		t.Errorf("merged lr %v epochs %d loss %q, %d changes; want 5e-4, 4, ce, 2", merged.LR, merged.Epochs, merged.Loss, len(changes))
	}
}

// The run records the input layout it read from the model's graph; the
// same preprocessing flags given again on resume (no --nhwc, so no layout)
// are the same settings, while another mean is still refused.
func TestMergeResumeAcceptsTheRecordedLayout(t *testing.T) {
	mean, std := []float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225}
	old := Config{Epochs: 2, Preprocess: imageio.Preprocess{Layout: imageio.NCHW, Mean: mean, Std: std}}
	cfg := Config{Epochs: 4, Preprocess: imageio.Preprocess{Mean: mean, Std: std}, Explicit: []string{"mean", "std", "epochs"}}
	merged, _, err := mergeResume(old, cfg)
	if err != nil {
		t.Fatalf("the run's own --mean and --std on resume: %v", err)
	}
	if merged.Epochs != 4 || merged.Preprocess.Layout != imageio.NCHW {
		t.Errorf("merged epochs %d layout %q; want 4, NCHW", merged.Epochs, merged.Preprocess.Layout)
	}
	cfg.Preprocess.Mean = []float64{0.5, 0.5, 0.5}
	want := `mean (the run has [{"layout":"NCHW","mean":[0.485,0.456,0.406],"std":[0.229,0.224,0.225]},{}])`
	if _, _, err := mergeResume(old, cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another --mean on resume: %v; want it refused, saying %s", err, want)
	}
}

// Repeat keeps the recorded settings and takes those of the given flags.
func TestRepeatTakesGivenFlags(t *testing.T) {
	rec := Config{LR: 1e-3, Seed: 7, Height: 32, Width: 48, Ranks: 4, Train: DataSpec{Images: "a", Masks: "b"}}
	cfg := Config{LR: 1e-4, Seed: 1, Height: 64, Width: 64, Train: DataSpec{Images: "c", Masks: "d"},
		Explicit: []string{"crop", "out", "config"}}
	got := Repeat(rec, cfg)
	want := rec
	want.Height, want.Width, want.Ranks = 64, 64, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Repeat = %+v, want %+v", got, want)
	}
}

// Config's tags name the settings a resumed run may change, and a setting
// made of several fields (crop, classes) compares all of them.
func TestRunSettingsFromTags(t *testing.T) {
	var resumable []string
	for _, k := range RunSettings() {
		if runSettings[k].resume {
			resumable = append(resumable, k)
		}
	}
	want := []string{"conv_grad", "cuda_graph", "cuda_options", "device", "epochs", "lr", "max_steps", "resident", "threads"}
	if !reflect.DeepEqual(resumable, want) {
		t.Errorf("settings that may change on resume %v, want %v", resumable, want)
	}
	c := Config{Height: 2, Width: 3, Network: NetworkSpec{BaseModel: "m.onnx", Classes: 4, HeadSeed: 5}}
	for key, want := range map[string]any{"crop": []any{2, 3}, "classes": []any{4, uint64(5)}, "network.base_model": "m.onnx"} {
		if got := runSettings[key].values(&c); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: values %v, want %v", key, got, want)
		}
	}
}

// A refused list reads in the order of the names the caller gives the keys.
func TestResumeConflictSortsByName(t *testing.T) {
	e := &ResumeConflictError{Refused: []SettingChange{{Setting: "max_steps", Was: "1"}, {Setting: "resident", Was: "on"}}}
	flag := func(k string) string { return map[string]string{"max_steps": "steps"}[k] + k }
	if got := e.Named(flag); !strings.Contains(got, "resident (the run has on), stepsmax_steps (the run has 1)") {
		t.Errorf("got %q", got)
	}
}

// A repeat takes the recorded run's model and data where the caller gives
// none, by key: a held-out val split as its split, a given data key or
// model (or resuming) keeps the recorded one out, a path naming nothing is
// refused.
func TestRepeatInputs(t *testing.T) {
	dir := t.TempDir()
	vs := &datalayout.ValSplit{Fraction: 0.25, Seed: 7, By: "folder"}
	rec := Config{Network: NetworkSpec{BaseModel: dir}, Train: DataSpec{Images: dir, Masks: dir, ValSplit: vs}}
	rec.Val, rec.Val.HeldOut = rec.Train, true
	got, err := rec.RepeatInputs(nil, false)
	want := map[string]string{"network.base_model": dir, "train_images": dir, "train_masks": dir, "val_split": "0.25", "split_seed": "7", "split_by": "folder"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("inputs %v, %v; want %v", got, err, want)
	}
	if got, _ := rec.RepeatInputs([]string{"val_masks"}, true); len(got) != 0 {
		t.Errorf("a given data key and --resume: inputs %v, want none", got)
	}
	rec.Train.Masks = dir + "/nosuch"
	var se *setting.Error
	if _, err := rec.RepeatInputs(nil, false); !errors.As(err, &se) || se.Setting != "train.masks" {
		t.Errorf("a recorded path naming nothing: %v", err)
	}
}
