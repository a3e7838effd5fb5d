package finetune

import (
	"testing"

	"github.com/segtune/segtune/finetune/schedule"
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
