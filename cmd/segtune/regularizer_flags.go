package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune"
)

// regularizerFlags configure the size regularizer and the size groups.
func regularizerFlags() []cli.Flag {
	const cat = "Size regularizer"
	return []cli.Flag{
		&cli.Float64Flag{Name: "alpha", Usage: "weight of the size regularizer (0: baseline, none)", Category: cat},
		&cli.StringFlag{Name: "objective", Value: "fbeta", Usage: "fbeta (F1 with --beta 1), p@r, r@p, auc-roc or auc-pr", Category: cat},
		&cli.Float64Flag{Name: "beta", Value: 1, Usage: "β of F-beta, in (0, 1]", Category: cat},
		&cli.Float64Flag{Name: "level", Usage: "recall target of p@r, precision target of r@p", Category: cat},
		&cli.StringFlag{Name: "grid", Usage: "comma-separated levels for auc-roc (FPRs) or auc-pr (precisions)", Category: cat},
		&cli.StringFlag{Name: "normalization", Value: "mean", Usage: "what --alpha multiplies: sum (the paper's Lagrangian) or mean (divided by N)", Category: cat},
		&cli.StringFlag{Name: "projection", Value: "epoch", Usage: "epoch (Algorithm 1: one projection per epoch), step (after every step) or graph (train through the projection, docs/method.md §8: two in-graph projections per step)", Category: cat},
		&cli.StringFlag{Name: "feature", Usage: "tensor pooled for the size head (default: the classifier's input)", Category: cat},
		&cli.Float64Flag{Name: "dual-lr", Value: 1e-2, Usage: "Adam step size for τ and ε", Category: cat},
		&cli.Float64Flag{Name: "c-lambda", Value: 1e-3, Usage: "dual step constant for λ (η = c/epoch)", Category: cat},
		&cli.Float64Flag{Name: "c-mu", Value: 1e-5, Usage: "dual step constant for μ", Category: cat},
		&cli.BoolFlag{Name: "no-balance", Usage: "with --alpha: plain shuffled batches instead of half small, half large", Category: cat},
		&cli.BoolFlag{Name: "balance", Usage: "half small, half large batches also without --alpha (a like-for-like baseline)", Category: cat},
		&cli.StringFlag{Name: "size-classes", Usage: "classes whose pixel fraction is the object size (default: all but 0)", Category: cat},
		&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an object is large (default: the training-set mean)", Category: cat},
		&cli.BoolFlag{Name: "size-vote", Usage: "label images by majority vote of per-class thresholds (several size classes)", Category: cat},
		&cli.StringFlag{Name: "size-bins", Usage: "increasing thresholds for more than two size values (one head each)", Category: cat},
	}
}

func regularizerConfig(c *cli.Context, cfg *finetune.Config) error {
	var err error
	if cfg.Size.Classes, err = parseInts(c.String("size-classes")); err != nil {
		return fmt.Errorf("--size-classes: %w", err)
	}
	cfg.Size.Threshold = c.Float64("size-threshold")
	cfg.Size.Vote = c.Bool("size-vote")
	if cfg.Size.Bins, err = parseFloats(c.String("size-bins")); err != nil {
		return fmt.Errorf("--size-bins: %w", err)
	}
	alpha := c.Float64("alpha")
	if alpha < 0 {
		return fmt.Errorf("--alpha %v must not be negative", alpha)
	}
	cfg.Balanced = c.Bool("balance") || (alpha > 0 && !c.Bool("no-balance"))
	if alpha == 0 {
		return nil
	}
	grid, err := parseFloats(c.String("grid"))
	if err != nil {
		return fmt.Errorf("--grid: %w", err)
	}
	cfg.Regularizer = &finetune.RegularizerConfig{
		Alpha: alpha, Feature: c.String("feature"), Projection: c.String("projection"),
		Dual: dual.Config{
			Objective: c.String("objective"), Beta: c.Float64("beta"), Level: c.Float64("level"), Grid: grid,
			Normalization: dual.Normalization(c.String("normalization")),
			LR:            c.Float64("dual-lr"), CLambda: c.Float64("c-lambda"), CMu: c.Float64("c-mu"),
		},
	}
	return nil
}

func parseInts(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, x)
	}
	return out, nil
}
