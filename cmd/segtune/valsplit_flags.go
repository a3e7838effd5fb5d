package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio/datalayout"
)

// valSplitUsage is finetune's --val-split.
const valSplitUsage = "hold out fraction `F` of the training data for validation, for data without a val split (CVAT, Label Studio, LabelMe exports; refused where the data has one): the same images every run and on --resume, listed in OUT/" + finetune.SplitFile

// valSplitFlags hold out part of one split for validation, set in vs:
// --val-split (named fraction by the command, --val for data split),
// --split-seed and --split-by.
func valSplitFlags(vs *datalayout.ValSplit, fraction, usage string) []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: fraction, Usage: usage, Destination: &vs.Fraction},
		&cli.Uint64Flag{Name: "split-seed", Usage: "seed that picks the held-out images of --" + fraction + " (the same data, seed and --split-by always split the same way)", Destination: &vs.Seed},
		&cli.StringFlag{Name: "split-by", Value: "image", Usage: "what --" + fraction + " keeps together on one side: " + strings.Join(datalayout.ValSplitGroupings, ", ") +
			" (folder: the images of one sub-folder, e.g. a video sequence; prefix: names that differ only in a trailing frame number, e.g. seq01_000120 and seq01_000121)", Destination: &vs.By},
	}
}

// valSplitSetting is the split valSplitFlags set in bound: nil without the
// fraction flag; its companions without it are refused
// (datalayout.ValSplit.Given).
func valSplitSetting(c *cli.Context, bound datalayout.ValSplit, fraction string) (*datalayout.ValSplit, error) {
	return bound.Given(c.IsSet(fraction), c.IsSet("split-seed"), c.IsSet("split-by"))
}
