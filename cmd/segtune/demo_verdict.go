package main

import (
	"context"
	"fmt"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/internal/stats"
	"github.com/segtune/segtune/metrics"
)

// demoAlpha is the demo's regularizer weight (finetune's --alpha): the
// one the CamVid study selected (docs/study.md), with c_λ at its default.
const demoAlpha = 3.0

// pairedIoU scores models a and b image by image on cfg's validation set:
// each image's mean IoU under b minus under a, with the 95 % t interval
// over the images.
func pairedIoU(c *cli.Context, cfg finetune.Config, a, b string) (stats.Interval, error) {
	dc := cfg.Val.DataConfig()
	dc.Ignore, dc.CacheBytes = cfg.Ignore, -1
	ds, _, err := data.Open(context.Background(), dc)
	if err != nil {
		return stats.Interval{}, err
	}
	paths := make([]string, ds.Len())
	for id := range paths {
		e, _ := ds.Example(id)
		paths[id] = e.Image
	}
	pa, err := predict(c, a, cfg.Preprocess, paths)
	if err != nil {
		return stats.Interval{}, fmt.Errorf("%s: %w", a, err)
	}
	pb, err := predict(c, b, cfg.Preprocess, paths)
	if err != nil {
		return stats.Interval{}, fmt.Errorf("%s: %w", b, err)
	}
	diffs := make([]float64, 0, len(paths))
	for id, path := range paths {
		s, err := ds.Load(id)
		if err != nil {
			return stats.Interval{}, err
		}
		ia, err := imageIoU(pa[path], s.Labels, ds.NumClasses(), ds.Ignore())
		if err != nil {
			return stats.Interval{}, fmt.Errorf("%s: %w", path, err)
		}
		ib, err := imageIoU(pb[path], s.Labels, ds.NumClasses(), ds.Ignore())
		if err != nil {
			return stats.Interval{}, fmt.Errorf("%s: %w", path, err)
		}
		if !math.IsNaN(ia) && !math.IsNaN(ib) { // NaN: every pixel ignored
			diffs = append(diffs, ib-ia)
		}
	}
	return stats.TInterval(diffs), nil
}

// imageIoU is one image's mean IoU over the classes in its mask or its
// prediction.
func imageIoU(pred, target []uint8, classes, ignore int) (float64, error) {
	m, err := metrics.ScoreImage(pred, target, classes, ignore)
	if err != nil {
		return 0, err
	}
	return m.MeanIoU(), nil
}

// demoVerdict is the demo's last word on the regularizer: what it changed
// on the validation images, and whether that is more than the images'
// spread (one training seed each, so not a claim about seeds; that is
// docs/study.md's job).
func demoVerdict(d stats.Interval) string {
	what := map[string]string{
		"gain":                     "the regularized model segments these images better",
		"loss":                     "the regularized model segments these images worse",
		"no detectable difference": "the regularizer changed nothing detectable on these images",
		"too few pairs":            "too few validation images to tell",
	}[d.Verdict()]
	return fmt.Sprintf("verdict: %s: per-image mean IoU, F1 run − baseline, %s (95 %% interval over the %d validation images; one training seed each, so it speaks for this seed only)",
		what, d, d.N)
}
