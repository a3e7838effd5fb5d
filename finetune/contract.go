package finetune

import (
	"fmt"
	"strings"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
)

// The graph side reads the loss and the modes; Config's checks call its
// readers by these names.
var (
	lossTerms      = trainer.LossTerms
	parsePrecision = trainer.ParsePrecision
	checkResident  = trainer.CheckResident
)

// ContractOverrides is what the settings (a sidecar, a run's config,
// flags) say where a model's graph cannot: its input layout, its output
// layout and a sigmoid head's threshold.
func ContractOverrides(pre imageio.Preprocess, out imageio.OutputSpec) contract.Overrides {
	return contract.Overrides{
		InputLayout:  contract.Layout(strings.ToUpper(string(pre.Layout))),
		OutputLayout: contract.Layout(strings.ToUpper(string(out.Layout))),
		Threshold:    out.Threshold,
	}
}

// fitFixedSize makes a fixed-size model train at its size.
func fitFixedSize(cfg *Config, ct *contract.Contract) (changed bool) {
	if ct.Height > 0 && ct.Width > 0 && (int64(cfg.Height) != ct.Height || int64(cfg.Width) != ct.Width) {
		cfg.Height, cfg.Width = int(ct.Height), int(ct.Width)
		return true
	}
	return false
}

// validationPreprocess validates a fixed-size model at its size, as
// segment runs it.
func validationPreprocess(pre imageio.Preprocess, ct *contract.Contract) imageio.Preprocess {
	if ct.Height > 0 && ct.Width > 0 {
		pre.Height, pre.Width, pre.Resize = int(ct.Height), int(ct.Width), imageio.ResizeStretch
		pre.ScaleFactor, pre.MultipleOf, pre.PlusOne = 0, 0, false
	}
	if pre.Layout == "" {
		pre.Layout = imageio.Layout(ct.InputLayout)
	}
	return pre
}

// maxTrainingScale bounds the training rescale as the loader does
// (data.Augment's maxScale).
const maxTrainingScale = 16

// trainingAugment is the run's augmentation at its crop size. A model
// run at a scale (the person model's ×2) sees objects that much larger
// than the images hold them, so its random rescale is taken about that
// scale (0.5–2 becomes 1–4 at ×2): training sees what validation and the
// exported model see. Crops cost the same at any scale.
func trainingAugment(cfg Config) (data.Augment, error) {
	aug := cfg.Augment
	aug.Height, aug.Width = cfg.Height, cfg.Width
	f := trainingScale(cfg.Preprocess)
	if f == 1 || aug.WholeFrame {
		return aug, nil
	}
	lo, hi := aug.ScaleMin, aug.ScaleMax
	if lo == 0 {
		lo = 1
	}
	if hi == 0 {
		hi = max(lo, 1)
	}
	aug.ScaleMin, aug.ScaleMax = lo*f, hi*f
	if aug.ScaleMax > maxTrainingScale {
		return aug, &setting.Error{Setting: "scale_max", Value: fmt.Sprintf("%g..%g", lo, hi),
			Err: fmt.Errorf("at the model's scale factor %g the training rescale reaches %g, more than %d: lower the largest rescale or the scale factor", f, aug.ScaleMax, maxTrainingScale)}
	}
	return aug, nil
}

// trainingScale is the factor the preprocessing scales images by (1 for
// the other size rules).
func trainingScale(pre imageio.Preprocess) float64 {
	if pre.Resize == imageio.ResizeScale && pre.ScaleFactor > 0 {
		return pre.ScaleFactor
	}
	return 1
}

// OperatingPoint says, in a phrase, the geometry the run trains,
// validates and exports at: the model's scale, its fixed size or each
// image's own size, and the value mapping.
func (c *Config) OperatingPoint() string {
	p := c.Preprocess
	var geo string
	switch {
	case trainingScale(p) != 1:
		lo, hi := c.Augment.ScaleMin, c.Augment.ScaleMax
		if lo == 0 {
			lo = 1
		}
		if hi == 0 {
			hi = max(lo, 1)
		}
		f := trainingScale(p)
		geo = fmt.Sprintf("images scaled ×%g: training crops from images rescaled %g–%g×, validation and the exported model at ×%g", f, lo*f, hi*f, f)
	case (p.Resize == imageio.ResizeStretch || p.Resize == imageio.ResizeLetterbox || p.Resize == "") && p.Height > 0 && p.Width > 0:
		geo = fmt.Sprintf("images brought to %dx%d (%s) for validation and the exported model", p.Height, p.Width, orDefault(string(p.Resize), "stretch"))
	default:
		geo = "each image's own size"
	}
	return geo + "; values " + valueMapping(p)
}

// valueMapping describes how pixel values become tensor values.
func valueMapping(p imageio.Preprocess) string {
	order := orDefault(string(p.ChannelOrder), "RGB")
	if len(p.Mean) > 0 || len(p.Std) > 0 {
		return fmt.Sprintf("%s, mean %v std %v on %s", order, p.Mean, p.Std, orDefault(p.MeanStdRange, imageio.RangeUnit))
	}
	s := p.ValueScale
	if s == 0 {
		s = 1
	}
	return fmt.Sprintf("%s, %.4g·x%+.4g on 0..255 (%.4g..%.4g)", order, s, p.ValueOffset, p.ValueOffset, 255*s+p.ValueOffset)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
