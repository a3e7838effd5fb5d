package finetune

import (
	"errors"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/schedule"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// The defaults, with a model and data added, are a configuration the run
// accepts, and the schedule and loss they name parse.
func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Network.BaseModel = "model.onnx"
	cfg.Train = DataSpec{Images: "images", Masks: "masks"}
	if err := cfg.validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	if err := CheckModes(cfg.Precision, cfg.Resident); err != nil {
		t.Errorf("precision and residency: %v", err)
	}
	if _, err := schedule.Parse(cfg.Schedule, cfg.LR, 100); err != nil {
		t.Errorf("schedule: %v", err)
	}
	if err := CheckLoss(cfg.Loss, cfg.FocalGamma); err != nil {
		t.Errorf("loss: %v", err)
	}
	if cfg.Regularizer != nil || cfg.Balanced || cfg.Augment.WholeFrame {
		t.Error("the defaults train with the size regularizer's settings")
	}
}

// A base model's scale factor is kept, as the rest of its contract; its
// classes, names and palette come with it only while the run keeps its
// classes.
func TestApplyModelSettings(t *testing.T) {
	lm, err := imageio.ParseLabelMap("11:255")
	if err != nil {
		t.Fatal(err)
	}
	s := imageio.Sidecar{
		Preprocess: &imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2, ValueScale: 1.0 / 127.5, ValueOffset: -1},
		Classes:    []string{"bg", "person"}, Palette: imageio.Palette{{0, 0, 0, 255}, {255, 0, 0, 255}}, LabelMap: lm,
	}
	cfg := DefaultConfig()
	cfg.ApplyModelSettings(s)
	if cfg.Preprocess.Resize != imageio.ResizeScale || cfg.Preprocess.ScaleFactor != 2 || cfg.Preprocess.ValueOffset != -1 {
		t.Errorf("the model's contract was not kept: %+v", cfg.Preprocess)
	}
	if cfg.LabelMap != "11:255" || len(cfg.ClassNames) != 2 || len(cfg.Palette) != 2 {
		t.Errorf("settings not taken: %q %v %v", cfg.LabelMap, cfg.ClassNames, cfg.Palette)
	}
	cfg = DefaultConfig()
	cfg.Network.Classes, cfg.LabelMap = 3, "*:0"
	cfg.ApplyModelSettings(s)
	if cfg.LabelMap != "*:0" || cfg.ClassNames != nil || cfg.Palette != nil {
		t.Errorf("a new head took the model's classes: %q %v %v", cfg.LabelMap, cfg.ClassNames, cfg.Palette)
	}
}

// Training rescales images about the model's scale factor, so crops show
// objects at the size validation and the exported model see them; a
// whole-frame run and a model at its images' own scale keep the range.
func TestTrainingAugmentAtModelScale(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Preprocess = imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2}
	aug, err := trainingAugment(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if aug.ScaleMin != 1 || aug.ScaleMax != 4 || aug.Height != cfg.Height || aug.Width != cfg.Width {
		t.Errorf("at ×2: rescale %v..%v, crop %dx%d; want 1..4 at %dx%d", aug.ScaleMin, aug.ScaleMax, aug.Height, aug.Width, cfg.Height, cfg.Width)
	}
	if op := cfg.OperatingPoint(); !strings.Contains(op, "×2") || !strings.Contains(op, "1–4×") {
		t.Errorf("operating point %q does not say ×2 and 1–4×", op)
	}
	cfg.Preprocess.ScaleFactor = 1
	if aug, _ := trainingAugment(cfg); aug.ScaleMin != 0.5 || aug.ScaleMax != 2 {
		t.Errorf("at ×1: rescale %v..%v; want 0.5..2", aug.ScaleMin, aug.ScaleMax)
	}
	cfg.Preprocess.ScaleFactor, cfg.Augment.WholeFrame = 2, true
	if aug, _ := trainingAugment(cfg); aug.ScaleMin != 0.5 || aug.ScaleMax != 2 {
		t.Errorf("whole frame: rescale %v..%v; want 0.5..2", aug.ScaleMin, aug.ScaleMax)
	}
	cfg.Preprocess.ScaleFactor, cfg.Augment.WholeFrame = 10, false
	if _, err := trainingAugment(cfg); err == nil || !strings.Contains(err.Error(), "scale factor 10") {
		t.Errorf("×10 with rescales up to 2: %v; want a refusal naming the scale factor", err)
	}
}

// A positive alpha brings the regularizer, balanced batches and whole
// frames, each unless asked otherwise; a bad view is refused by its key.
func TestApplyRegularizer(t *testing.T) {
	for _, c := range []struct {
		alpha              float64
		balance, noBalance bool
		view               string
		reg, bal, whole    bool
	}{
		{0, false, false, "auto", false, false, false},
		{1, false, false, "auto", true, true, true},
		{1, false, true, "crop", true, false, false},
		{0, true, false, "whole", false, true, true},
	} {
		cfg := DefaultConfig()
		if err := cfg.ApplyRegularizer(*DefaultRegularizer(c.alpha), c.balance, c.noBalance, c.view); err != nil {
			t.Fatal(err)
		}
		if (cfg.Regularizer != nil) != c.reg || cfg.Balanced != c.bal || cfg.Augment.WholeFrame != c.whole {
			t.Errorf("%+v: regularizer %v, balanced %v, whole %v", c, cfg.Regularizer != nil, cfg.Balanced, cfg.Augment.WholeFrame)
		}
	}
	cfg := DefaultConfig()
	var se *setting.Error
	if err := cfg.ApplyRegularizer(*DefaultRegularizer(0), false, false, "x"); !errors.As(err, &se) || se.Setting != "train_view" {
		t.Errorf("view x: %v", err)
	}
}
