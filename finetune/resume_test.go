package finetune

import (
	"errors"
	"reflect"
	"strings"
	"testing"
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
		{"focal-gamma", func(c *Config) { c.FocalGamma = 3 }},
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
