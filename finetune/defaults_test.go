package finetune

import (
	"testing"

	"github.com/segtune/segtune/finetune/schedule"
	"github.com/segtune/segtune/imageio"
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

// A base model's scale factor is set aside unless kept; its classes,
// names and palette come with it only while the run keeps its classes.
func TestApplyModelSettings(t *testing.T) {
	lm, err := imageio.ParseLabelMap("11:255")
	if err != nil {
		t.Fatal(err)
	}
	s := imageio.Sidecar{
		Preprocess: &imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2},
		Classes:    []string{"bg", "person"}, Palette: imageio.Palette{{0, 0, 0, 255}, {255, 0, 0, 255}}, LabelMap: lm,
	}
	cfg := DefaultConfig()
	if f, dropped := cfg.ApplyModelSettings(s, false); !dropped || f != 2 || cfg.Preprocess.ScaleFactor != 1 {
		t.Errorf("scale factor: dropped %v %v, kept %v", f, dropped, cfg.Preprocess.ScaleFactor)
	}
	if cfg.LabelMap != "11:255" || len(cfg.ClassNames) != 2 || len(cfg.Palette) != 2 || s.Preprocess.ScaleFactor != 2 {
		t.Errorf("settings not taken: %q %v %v (model's scale %v)", cfg.LabelMap, cfg.ClassNames, cfg.Palette, s.Preprocess.ScaleFactor)
	}
	cfg = DefaultConfig()
	cfg.Network.Classes, cfg.LabelMap = 3, "*:0"
	if _, dropped := cfg.ApplyModelSettings(s, true); dropped || cfg.Preprocess.ScaleFactor != 2 {
		t.Errorf("kept scale: dropped %v, factor %v", dropped, cfg.Preprocess.ScaleFactor)
	}
	if cfg.LabelMap != "*:0" || cfg.ClassNames != nil || cfg.Palette != nil {
		t.Errorf("a new head took the model's classes: %q %v %v", cfg.LabelMap, cfg.ClassNames, cfg.Palette)
	}
}
