package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/internal/stats"
)

// demoAlpha is the demo's regularizer weight (finetune's --alpha): the
// one the CamVid study selected (docs/study.md), with c_λ at its default.
const demoAlpha = 3.0

// pairedIoU scores models a and b image by image on cfg's validation set
// (evaluate.PairedMeanIoU): each image's mean IoU under b minus under a,
// with the 95 % t interval over the images.
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
	images := func(yield func(evaluate.PairedPrediction, error) bool) {
		for id, path := range paths {
			s, err := ds.Load(id)
			if err != nil {
				yield(evaluate.PairedPrediction{}, err)
				return
			}
			if !yield(evaluate.PairedPrediction{Name: path, A: pa[path], B: pb[path], Target: s.Labels}, nil) {
				return
			}
		}
	}
	return evaluate.PairedMeanIoU(images, ds.NumClasses(), ds.Ignore())
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
