package main

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
)

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
			dataFlag,
			&cli.StringFlag{Name: "label-map", Usage: `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`},
			maskPaletteFlag,
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "mask label left out of scoring"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.StringFlag{Name: "size-classes", Usage: "report small and large objects separately: classes whose pixel fraction is the size (e.g. 1)"},
			&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an image's object is large (default: a checkpoint's, else the mean over these images)"},
			confusionFlag,
			&cli.StringFlag{Name: "partial", Usage: "write this shard's confusion matrices and size statistics to `FILE` (a path or a URL) for segtune eval merge"},
			deviceFlag, threadsFlag, jsonFlag,
		}, append(append(append(dataLayoutFlags("--data"), shardFlags()[:2]...), preprocessFlags()...), denseFlags("")...)...),
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
	partialPath := c.String("partial")
	if partialPath != "" {
		if _, err := storage.Parse(partialPath); err != nil {
			return cli.Exit(fmt.Sprintf("--partial %s: %v", partialPath, err), 2)
		}
	}
	imgs, err := openFolderFlag(c, "images")
	if err != nil {
		return err
	}
	defer imgs.Close()
	masks, err := openFolderFlag(c, "masks")
	if err != nil {
		return err
	}
	defer masks.Close()
	plan, closeModel, err := evalPlan(c, set, spec, imgs, masks)
	if err != nil {
		return err
	}
	defer closeModel()
	if partialPath != "" {
		done, err := partialDone(c, partialPath, evaluate.NewPartial(spec, plan.Setup))
		if err != nil || done {
			return err
		}
	}
	bar := progress(c, plan.Total, "eval")
	plan.Progress = func(done, _ int) { bar.Set(done) }
	acc, err := evaluate.Run(c.Context, plan)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", c.String("model"), err)
	}
	if partialPath != "" {
		if err := writePartial(c, partialPath, acc); err != nil {
			return err
		}
	}
	if spec.Sharded() {
		notef(c, "segtune: the scores below are shard %s's alone; `segtune eval merge` combines the shards' --partial files", spec)
	}
	return printEvalSummary(c, acc.Summary())
}

// evalDataFlags checks that eval's data is given one way (--data, or
// --images and --masks) and opens --data's set (nil without it). Checked
// here rather than by the flags' Required, which urfave/cli would also
// demand of `eval merge`.
func evalDataFlags(c *cli.Context) (*datalayout.Set, error) {
	if !c.IsSet("data") {
		return nil, requireFlags(c, "model", "images", "masks")
	}
	if c.IsSet("images") || c.IsSet("masks") {
		return nil, cli.Exit("give --data, or --images and --masks, not both", 2)
	}
	if err := requireFlags(c, "model"); err != nil {
		return nil, err
	}
	set, err := openDataFlag(c, "val")
	if err != nil {
		return nil, err
	}
	if err := set.Err(); err != nil {
		return nil, unmatchedExit(set)
	}
	if err := setFlags(c, map[string]string{"images": set.Root, "masks": set.Root}); err != nil {
		return nil, err
	}
	return set, nil
}

// evalPlan is the evaluation the flags describe: the pairs of this shard,
// the opened model (closeModel closes it) and the run's settings.
func evalPlan(c *cli.Context, set *datalayout.Set, spec shard.Spec, imgs, masks *storage.Folder) (plan evaluate.Plan, closeModel func(), err error) {
	modelPath := c.String("model")
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return plan, nil, err
	}
	if v := c.String("label-map"); v != "" {
		if settings.LabelMap, err = imageio.ParseLabelMap(v); err != nil {
			return plan, nil, fmt.Errorf("--label-map: %w", err)
		}
	}
	if plan.MaskPalette, _, err = maskPalette(c); err != nil {
		return plan, nil, err
	}
	if plan.Pairs, plan.Total, err = evalPairs(c, set, spec, imgs, masks); err != nil {
		return plan, nil, err
	}
	seg, err := openSegmenter(c, modelPath, settings)
	if err != nil {
		return plan, nil, err
	}
	if plan.Setup, err = evalSetup(c, set, seg, settings, imgs, masks, plan.MaskPalette); err != nil {
		seg.Close()
		return plan, nil, err
	}
	plan.Segmenter, plan.Shard, plan.LabelMap = seg, spec, settings.LabelMap
	plan.Batch = clampBatch(c, seg, c.Int("batch"))
	plan.PrepareWorkers = pipeline.IOWorkers(!imgs.IsLocal() || !masks.IsLocal())
	plan.ReadFolders(c.Context, imgs, masks)
	return plan, func() { seg.Close() }, nil
}

// evalSetup reads the flags that say how the evaluation is scored.
func evalSetup(c *cli.Context, set *datalayout.Set, seg *inference.Segmenter, settings imageio.Sidecar, imgs, masks *storage.Folder, palette imageio.Palette) (evaluate.Setup, error) {
	modelPath := c.String("model")
	o := evaluate.SetupOptions{Model: modelPath, Images: imgs.String(), Masks: masks.String(),
		ClassNames: settings.Classes, MaskPalette: palette}
	if set != nil {
		o.Images, o.Masks = set.Description(), set.Description()
	}
	if c.IsSet("ignore") {
		ignore := c.Int("ignore")
		o.Ignore = &ignore
	}
	if v := c.String("class-names"); v != "" {
		o.ClassNames = strings.Split(v, ",")
	}
	if len(o.ClassNames) > 0 {
		if err := seg.Contract.CheckClasses(len(o.ClassNames), "--class-names names"); err != nil {
			return evaluate.Setup{}, fmt.Errorf("%s: %w", modelPath, err)
		}
	}
	var err error
	if o.SizeClasses, err = parseInts(c.String("size-classes")); err != nil {
		return evaluate.Setup{}, fmt.Errorf("--size-classes: %w", err)
	}
	o.SizeThreshold = c.Float64("size-threshold")
	if o.SizeThreshold == 0 && len(o.SizeClasses) > 0 && resolve.IsCheckpoint(modelPath) {
		o.SizeThreshold = resolve.CheckpointSizeThreshold(modelPath)
	}
	return evaluate.NewSetup(seg, settings, o)
}

// evalPairs pairs the images with their masks and keeps this shard's:
// two local folders (or --data's set) are paired from their whole
// listings, bucket folders streamed (evaluate.FolderPairs).
func evalPairs(c *cli.Context, set *datalayout.Set, spec shard.Spec, imgs, masks *storage.Folder) (iter.Seq2[datalayout.Sample, error], int, error) {
	var pairs iter.Seq2[datalayout.Sample, error]
	var total int
	var err error
	if imgs.IsLocal() && masks.IsLocal() {
		samples, lerr := localSamples(c, set)
		if lerr != nil {
			return nil, 0, lerr
		}
		pairs, total, err = evaluate.SamplePairs(samples, spec)
	} else {
		pairs, total, err = evaluate.FolderPairs(c.Context, imgs, masks, spec)
	}
	var fe *evaluate.FolderError
	switch {
	case errors.Is(err, evaluate.ErrNoPairs):
		return nil, 0, cli.Exit(err.Error(), 1)
	case errors.As(err, &fe):
		return nil, 0, flagError(fe.Side, fe.Folder, fe.Err)
	}
	return pairs, total, err
}

// requireFlags is urfave/cli's check of required flags, with its message.
func requireFlags(c *cli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("Required flag %q not set", missing[0])
	}
	return fmt.Errorf("Required flags %q not set", strings.Join(missing, ", "))
}

// partialDone looks at an existing --partial file before the work: the
// same shard of the same evaluation, complete, means the work is done (a
// retried worker stops there); anything else there is refused rather than
// overwritten.
func partialDone(c *cli.Context, v string, acc *evaluate.Partial) (bool, error) {
	old, err := evaluate.ExistingPartial(c.Context, v, acc)
	if err != nil {
		return false, cli.Exit("--partial "+err.Error(), 2)
	}
	if old == nil {
		return false, nil
	}
	notef(c, "segtune: %s already holds shard %s of this evaluation: nothing to do", v, acc.Shard)
	if c.Bool("json") {
		return true, printJSON(os.Stdout, old.Summary())
	}
	return true, nil
}

// writePartial writes the accumulator to v (a path or a URL), atomically.
func writePartial(c *cli.Context, v string, acc *evaluate.Partial) error {
	if err := evaluate.WritePartial(c.Context, v, acc); err != nil {
		return fmt.Errorf("--partial: %w", err)
	}
	notef(c, "segtune: wrote shard %s's scores to %s", acc.Shard, v)
	return nil
}
