package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/regsettings"
)

// regularizerFlags configure the size regularizer and the size groups;
// their defaults are finetune.DefaultRegularizer's.
func regularizerFlags(r *regsettings.Settings) []cli.Flag {
	const cat = "Size regularizer"
	d := *finetune.DefaultRegularizer(0)
	r.Reg = d
	reg := &r.Reg
	return []cli.Flag{
		&cli.Float64Flag{Name: "alpha", Usage: "weight of the size regularizer relative to the cross entropy (0: baseline, none). With --normalization mean each training image's F1 term counts alpha times as much as its mean cross entropy: 1 weighs them equally, 0.1 gives the F1 term a tenth", Category: cat, Destination: &reg.Alpha},
		&cli.StringFlag{Name: "objective", Value: d.Dual.Objective, Usage: "fbeta (F1 with --beta 1), p@r, r@p, auc-roc or auc-pr", Category: cat, Destination: &reg.Dual.Objective},
		&cli.Float64Flag{Name: "beta", Value: d.Dual.Beta, Usage: "β of F-beta, in (0, 1]", Category: cat, Destination: &reg.Dual.Beta},
		&cli.Float64Flag{Name: "level", Usage: "recall target of p@r, precision target of r@p", Category: cat, Destination: &reg.Dual.Level},
		&cli.StringFlag{Name: "grid", Usage: "comma-separated levels for auc-roc (FPRs) or auc-pr (precisions)", Category: cat, Destination: &r.Grid},
		&cli.StringFlag{Name: "normalization", Value: string(d.Dual.Normalization), Usage: "what --alpha multiplies: mean, the Lagrangian L divided by the N training images, a per-image mean like the cross entropy, so that --alpha is the F1 term's weight relative to it (the default here and in package dual); or sum, L itself, the paper's convention (alpha_sum = alpha_mean/N)", Category: cat, Destination: &r.Normalization},
		&cli.StringFlag{Name: "projection", Value: d.Projection, Usage: "epoch (Algorithm 1: one projection per epoch), step (after every step) or graph (train through the projection, docs/method.md §8: two in-graph projections per step)", Category: cat, Destination: &reg.Projection},
		&cli.StringFlag{Name: "feasibility", Value: string(d.Dual.Feasibility), Usage: "how τ and ε are kept feasible between projections, after every step: batch (ε ≥ 0 and the step's τ projected with ε; the paper's pair rule for a batch with one large image), clip (ε ≥ 0 only) or none (the paper's Algorithm 1: ε drifts below 0 and switches the hinges off)", Category: cat, Destination: &r.Feasibility},
		&cli.IntFlag{Name: "dual-every", Value: d.Dual.DualEvery, Usage: "dual step every K steps as well as at the end of each epoch, each with its share of the epoch's step c/epoch (0: four an epoch; -1: only at epoch ends, the paper's)", Category: cat, Destination: &reg.Dual.DualEvery},
		&cli.Float64Flag{Name: "lambda-init", Value: d.Dual.LambdaInit, Usage: "initial λ of every large image, so that large images pull from the first step (0: the paper's)", Category: cat, Destination: &reg.Dual.LambdaInit},
		&cli.Float64Flag{Name: "score-bound", Value: d.ScoreBound, Usage: "bound R of the size score, |s| ≤ 2R: pooled features scaled to mean absolute value 1, head weights boxed; keeps the λ-weighted pull finite (0: unbounded)", Category: cat, Destination: &reg.ScoreBound},
		&cli.StringFlag{Name: "train-view", Value: "auto", Usage: "what training images show: whole (the whole frame resized into --crop, so that an image's size label, measured on its whole mask, is what the network sees), crop (random rescaled crops) or auto (whole with --alpha, crop without)", Category: cat, Destination: &r.View},
		&cli.StringFlag{Name: "feature", Usage: "tensor pooled for the size head (default: the classifier's input)", Category: cat, Destination: &reg.Feature},
		&cli.Float64Flag{Name: "dual-lr", Value: d.Dual.LR, Usage: "Adam step size for τ and ε (0: 0.03/n for n large images, the scale of τ)", Category: cat, Destination: &reg.Dual.LR},
		&cli.Float64Flag{Name: "c-lambda", Value: d.Dual.CLambda, Usage: "dual step constant for λ: its dual steps move λ by c/epoch times the violation an epoch (the paper's 1e-3 leaves λ near its start)", Category: cat, Destination: &reg.Dual.CLambda},
		&cli.Float64Flag{Name: "c-mu", Value: d.Dual.CMu, Usage: "dual step constant for μ (the paper's 1e-5 lets Σ τ drift away from 1)", Category: cat, Destination: &reg.Dual.CMu},
		&cli.BoolFlag{Name: "no-balance", Usage: "with --alpha: plain shuffled batches instead of half small, half large", Category: cat, Destination: &r.NoBalance},
		&cli.BoolFlag{Name: "balance", Usage: "half small, half large batches also without --alpha (a like-for-like baseline)", Category: cat, Destination: &r.Balance},
		&cli.StringFlag{Name: "size-classes", Usage: "classes whose pixel fraction is the object size (default: all but 0)", Category: cat, Destination: &r.SizeClasses},
		&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an object is large (default: the training-set mean)", Category: cat, Destination: &r.Size.Threshold},
		&cli.BoolFlag{Name: "size-vote", Usage: "label images by majority vote of per-class thresholds (several size classes)", Category: cat, Destination: &r.Size.Vote},
		&cli.StringFlag{Name: "size-bins", Usage: "increasing thresholds for more than two size values (one head each)", Category: cat, Destination: &r.SizeBins},
	}
}
