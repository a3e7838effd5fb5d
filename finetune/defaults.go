package finetune

import (
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
)

// DefaultConfig is the run `segtune finetune` makes when no setting is
// given: AdamW at lr 1e-4 with a poly decay after a 10 % warm-up (which
// fine-tunes a pretrained network without wrecking it), 10 epochs of
// batches of 4 random 320×320 crops rescaled by 0.5 to 2 and flipped,
// cross entropy ignoring label 255, every parameter trained, no size
// regularizer. The caller adds the model (Network), the data (Train, Val)
// and the model's preprocessing; DefaultRegularizer adds the regularizer
// and AlphaDefaults the data settings that go with it.
func DefaultConfig() Config {
	return Config{
		Ignore: data.DefaultIgnore, Trainable: "all", Batch: 4, Height: 320, Width: 320, Epochs: 10,
		Optimizer: "adamw", LR: 1e-4, Schedule: "poly:0.9,warmup=10%", Seed: 1,
		Augment: data.Augment{ScaleMin: 0.5, ScaleMax: 2, Flip: true},
		Monitor: MonitorMIoU, Device: "cpu", Resident: "auto", Precision: "tf32", Loss: "ce", FocalGamma: 2,
	}
}

// ApplyModelSettings takes into c the settings the base model brings
// (registry, metadata_props, sidecar; s.Preprocess must be set):
// preprocessing, output reading, and, where c leaves them unset, the
// label map and, while the model keeps its classes, class names and
// palette. A model's own scale factor (the person model's 2×) is how it
// was used before fine-tuning; the run trains on crops at the images'
// scale, so it validates and exports at that scale too unless keepScale.
// It returns the scale factor it set aside, if it did.
func (c *Config) ApplyModelSettings(s imageio.Sidecar, keepScale bool) (droppedScale float64, dropped bool) {
	c.Preprocess = *s.Preprocess
	if p := &c.Preprocess; p.Resize == imageio.ResizeScale && p.ScaleFactor != 1 && !keepScale {
		// Validated at 2×, a CamVid person run trained at 1× scored 0.39
		// person IoU where it scores 0.6 at 1×.
		droppedScale, dropped, p.ScaleFactor = p.ScaleFactor, true, 1
	}
	if s.Output != nil {
		c.Output = *s.Output
	}
	if c.LabelMap == "" && s.LabelMap != nil {
		c.LabelMap = s.LabelMap.String()
	}
	if c.Network.Classes == 0 { // the base model's classes stay
		if c.ClassNames == nil {
			c.ClassNames = s.Classes
		}
		c.Palette = s.Palette
	}
	return droppedScale, dropped
}
