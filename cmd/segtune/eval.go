package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/resolve"
)

var confusionFlag = &cli.StringFlag{Name: "confusion", Usage: "write the confusion matrix into `DIR` as confusion.csv (pixel counts) and confusion.png (a heat map of normalised rows)"}

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "score a model on labelled images: IoU, Dice, precision, recall per class and their means; the confusion matrix",
		Description: "Pairs the images in --images with the masks in --masks by file name (or reads a split of\n" +
			"--data in any known layout), runs the model, maps its prediction back to each image's own\n" +
			"size and compares it with the mask.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "ONNX model or segtune checkpoint (its run's settings apply)"},
			&cli.StringFlag{Name: "images", Usage: "folder of images (a path, or an s3://, gs:// or azblob:// URL)"},
			&cli.StringFlag{Name: "masks", Usage: "folder of masks with the same base names (a path or a URL)"},
			dataFlag(new(string)),
			&cli.StringFlag{Name: "label-map", Usage: `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`},
			maskPaletteFlag(new(string)),
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "mask label left out of scoring"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.StringFlag{Name: "size-classes", Usage: "report small and large objects separately: classes whose pixel fraction is the size (e.g. 1)"},
			&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an image's object is large (default: a checkpoint's, else the mean over these images)"},
			confusionFlag,
			&cli.StringFlag{Name: "partial", Usage: "write this shard's confusion matrices and size statistics to `FILE` (a path or a URL) for segtune eval merge"},
			deviceFlag(new(string)), threadsFlag(new(int)), jsonFlag(new(bool)),
		}, append(append(append(dataLayoutFlags(new(dataLayout), "--data"), shardFlags(new(shardOptions))[:2]...), preprocessFlags(new(preprocessOptions))...), denseFlags(new(denseOptions), "")...)...),
		Action:      runEval,
		Subcommands: []*cli.Command{evalMergeCommand()},
	}
}

func runEval(c *cli.Context) error {
	set, err := evalDataFlags(c)
	if err != nil {
		return err
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	spec, err := resolveShard(c)
	if err != nil {
		return err
	}
	if err := checkConfusionDir(c, "images", "masks"); err != nil {
		return err
	}
	if err := checkConfusionDirHoldsNoData(c, set); err != nil {
		return err
	}
	partial := c.String("partial")
	if _, err := storage.Parse(partial); partial != "" && err != nil {
		return cli.Exit(fmt.Sprintf("--partial %s: %v", partial, err), 2)
	}
	imgs, err := openFolderFlag(c, "images", true)
	if err != nil {
		return err
	}
	defer imgs.Close()
	masks, err := openFolderFlag(c, "masks", true)
	if err != nil {
		return err
	}
	defer masks.Close()
	plan, err := evalPlan(c, set, spec, imgs, masks)
	if err != nil {
		return err
	}
	defer plan.Segmenter.Close()
	if partial != "" {
		if done, err := partialDone(c, partial, evaluate.NewPartial(spec, plan.Setup)); err != nil || done {
			return err
		}
	}
	bar := progress(c, plan.Total, "eval")
	plan.Progress = func(done, _ int) { bar.Set(done) }
	plan.Name = flagOf
	acc, err := evaluate.Run(c.Context, plan)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", c.String("model"), err)
	}
	if partial != "" {
		if err := evaluate.WritePartial(c.Context, partial, acc); err != nil {
			return fmt.Errorf("--partial: %w", err)
		}
		notef(c, "segtune: wrote shard %s's scores to %s", acc.Shard, partial)
	}
	if spec.Sharded() {
		notef(c, "segtune: the scores below are shard %s's alone; `segtune eval merge` combines the shards' --partial files", spec)
	}
	return printEvalSummary(c, acc.Summary())
}

// evalDataFlags checks that eval's data is given one way (--data, or
// --images and --masks) and opens --data's set (nil without it); not the
// flags' Required, which urfave/cli would also demand of `eval merge`.
func evalDataFlags(c *cli.Context) (*datalayout.Set, error) {
	if !c.IsSet("data") {
		return nil, cliflag.Require(c, "model", "images", "masks")
	}
	if c.IsSet("images") || c.IsSet("masks") {
		return nil, cli.Exit("give --data, or --images and --masks, not both", 2)
	}
	if err := cliflag.Require(c, "model"); err != nil {
		return nil, err
	}
	set, err := openDataFlag(c, "val")
	if err != nil {
		return nil, err
	}
	if err := set.Err(); err != nil {
		return nil, dataExit(err)
	}
	return set, setFlags(c, map[string]string{"images": set.Root, "masks": set.Root})
}

// evalPlan is the evaluation the flags describe: this shard's pairs, the
// opened model (the caller closes plan.Segmenter) and how it is scored.
func evalPlan(c *cli.Context, set *datalayout.Set, spec shard.Spec, imgs, masks *storage.Folder) (evaluate.Plan, error) {
	model := c.String("model")
	settings, err := modelSettings(c, model)
	if err != nil {
		return evaluate.Plan{}, err
	}
	req := evaluate.Request{Model: model, Settings: settings, Images: imgs, Masks: masks, Set: set, Shard: spec, Batch: c.Int("batch"), Partial: c.String("partial") != "",
		Options: evaluate.SetupOptions{SizeThreshold: c.Float64("size-threshold")},
		Open:    func(m string, s imageio.Sidecar) (*inference.Segmenter, error) { return openSegmenter(c, m, s) }}
	read, _, err := maskFlags(c)
	if err != nil {
		return evaluate.Plan{}, err
	}
	if read.Map != nil {
		req.Settings.LabelMap = read.Map
	}
	o := &req.Options
	o.MaskPalette, o.Ignore, o.ClassNames = read.Palette, ifSet(c, "ignore", c.Int), classNames(c)
	if o.SizeClasses, err = listflag.Ints(c.String("size-classes")); err != nil {
		return evaluate.Plan{}, fmt.Errorf("--size-classes: %w", err)
	}
	if o.SizeThreshold == 0 && len(o.SizeClasses) > 0 && resolve.IsCheckpoint(model) {
		o.SizeThreshold = resolve.CheckpointSizeThreshold(model)
	}
	plan, err := req.Plan(c.Context)
	var fe *evaluate.FolderError
	var ce *evaluate.ClassNamesError
	switch {
	case errors.Is(err, evaluate.ErrNoPairs):
		return plan, cli.Exit(err.Error(), 1)
	case errors.As(err, &fe):
		return plan, flagError(fe.Side, fe.Folder, fe.Err)
	case errors.As(err, &ce):
		return plan, withFlagNames(err)
	case err != nil:
		return plan, err
	}
	plan.Batch = clampBatch(c, plan.Segmenter, req.Batch) // with its notice
	return plan, nil
}

// partialDone looks at an existing --partial file before the work: this
// shard of this evaluation, complete, means the work is done (a retried
// worker stops there); anything else there is refused, not overwritten.
func partialDone(c *cli.Context, v string, acc *evaluate.Partial) (bool, error) {
	old, err := evaluate.ExistingPartial(c.Context, v, acc)
	if err != nil || old == nil {
		if err != nil {
			err = cli.Exit("--partial "+err.Error(), 2)
		}
		return false, err
	}
	notef(c, "segtune: %s already holds shard %s of this evaluation: nothing to do", v, acc.Shard)
	if c.Bool("json") {
		return true, printJSON(os.Stdout, old.Summary())
	}
	return true, nil
}

// checkConfusionDir refuses, before the work, a --confusion folder that is
// a file or the folder of one of the flags inputs.
func checkConfusionDir(c *cli.Context, inputs ...string) error {
	dir := c.String("confusion")
	if dir == "" {
		return nil
	}
	paths := make([]string, len(inputs))
	for i, in := range inputs {
		paths[i] = c.String(in)
	}
	var ce *evaluate.ConfusionDirError
	if err := evaluate.CheckConfusionDir(dir, paths...); errors.As(err, &ce) && ce.Input >= 0 {
		return cli.Exit(fmt.Sprintf("--confusion %s is the --%s folder; choose a folder of its own", dir, inputs[ce.Input]), 2)
	} else if err != nil {
		return cli.Exit("--confusion "+err.Error(), 2)
	}
	return nil
}

// checkConfusionDirHoldsNoData refuses a --confusion folder that holds
// --data's images or masks (data/images/val, say), which the folder check
// of the flags' own values does not see.
func checkConfusionDirHoldsNoData(c *cli.Context, set *datalayout.Set) error {
	dir := c.String("confusion")
	if dir == "" || set == nil {
		return nil
	}
	var folders []string
	seen := map[string]bool{}
	for _, s := range set.Samples {
		for _, f := range []string{filepath.Dir(s.Image), filepath.Dir(s.Mask)} {
			if !seen[f] {
				seen[f] = true
				folders = append(folders, f)
			}
		}
	}
	var ce *evaluate.ConfusionDirError
	if err := evaluate.CheckConfusionDir(dir, folders...); errors.As(err, &ce) && ce.Input >= 0 {
		return cli.Exit(fmt.Sprintf("--confusion %s holds --data's files; choose a folder of its own", dir), 2)
	}
	return nil
}

// printEvalSummary prints the report (text or --json), writes
// --confusion's files and returns the exit error when images failed.
func printEvalSummary(c *cli.Context, sum evaluate.Summary) error {
	if dir := c.String("confusion"); dir != "" {
		if err := metrics.WriteConfusionFiles(dir, sum.Matrix, sum.ClassNames); err != nil {
			return fmt.Errorf("--confusion: %w", err)
		}
		notef(c, "segtune: wrote the confusion matrix to %s", dir)
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, sum); err != nil {
			return err
		}
	} else {
		printSkipped(sum.Failures)
		sum.WriteText(os.Stdout)
	}
	if sum.Failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", sum.Failed, sum.Images), 1)
	}
	return nil
}

func evalMergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "combine the --partial files of every eval shard into the report of the whole set",
		ArgsUsage: "PARTIAL...",
		Description: "Reads the partial files that `segtune eval --shard K/N --partial FILE` wrote (paths or URLs),\n" +
			"checks each (counts, images, shards; the matrix the sum of its images' cells) and that they are\n" +
			"the N shards of one evaluation (same model, data, settings; each shard once),\n" +
			"and prints exactly the report one run over every image gives (seconds: the shards' total).",
		Flags: []cli.Flag{jsonFlag(new(bool)), confusionFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("eval merge: give the partial files of every shard", 2)
			}
			if err := checkConfusionDir(c); err != nil {
				return err
			}
			merged, err := evaluate.Merge(c.Context, c.Args().Slice())
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return printEvalSummary(c, merged.Summary())
		},
	}
}
