package finetune

import "github.com/segtune/segtune/finetune/data"

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
