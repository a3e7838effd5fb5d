package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/evalpartial"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
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
		}, append(append(append(dataLayoutFlags("--data"), shardFlags()[:2]...), preprocessFlags()...), denseFlags()...)...),
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
		done, err := partialDone(c, partialPath, evalpartial.New(spec, plan.Run))
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
	if plan.Run, err = evalRun(c, set, seg, settings, imgs, masks); err != nil {
		seg.Close()
		return plan, nil, err
	}
	if plan.MaskPalette != nil {
		// Shards that read colours differently do not merge.
		if plan.Run.MaskPalette, err = json.Marshal(plan.MaskPalette); err != nil {
			seg.Close()
			return plan, nil, err
		}
	}
	plan.Segmenter, plan.Shard, plan.LabelMap = seg, spec, settings.LabelMap
	plan.Batch = clampBatch(c, seg, c.Int("batch"))
	plan.PrepareWorkers = ioWorkers(!imgs.IsLocal() || !masks.IsLocal())
	if !imgs.IsLocal() {
		dec := imageio.Decoder{}
		plan.ReadImage = func(p string) (image.Image, error) {
			r, err := imgs.Open(c.Context, baseName(p))
			if err != nil {
				return nil, fmt.Errorf("read image: %w", err)
			}
			defer r.Close()
			return dec.Decode(r, p)
		}
	}
	plan.ReadMask = func(s datalayout.Sample, opt imageio.MaskOptions) (*imageio.Mask, error) {
		return readMask(c.Context, masks, s, opt)
	}
	return plan, func() { seg.Close() }, nil
}

// evalRun is what identifies the evaluation in its partial: the model and
// its digest, the data, the classes, labels and settings it is scored with.
func evalRun(c *cli.Context, set *datalayout.Set, seg *inference.Segmenter, settings imageio.Sidecar, imgs, masks *storage.Folder) (evalpartial.Run, error) {
	modelPath := c.String("model")
	ignore := c.Int("ignore")
	if settings.IgnoreLabel != nil && !c.IsSet("ignore") {
		ignore = *settings.IgnoreLabel
	}
	names := settings.Classes
	if v := c.String("class-names"); v != "" {
		names = strings.Split(v, ",")
	}
	classes := seg.Contract.Classes
	if classes == 0 {
		classes = max(len(names), 2)
	}
	if len(names) > 0 {
		if err := seg.Contract.CheckClasses(len(names), "--class-names names"); err != nil {
			return evalpartial.Run{}, fmt.Errorf("%s: %w", modelPath, err)
		}
	}
	sizeClasses, err := parseInts(c.String("size-classes"))
	if err != nil {
		return evalpartial.Run{}, fmt.Errorf("--size-classes: %w", err)
	}
	threshold := c.Float64("size-threshold")
	if threshold == 0 && len(sizeClasses) > 0 && isCheckpoint(modelPath) {
		threshold = checkpointSizeThreshold(modelPath)
	}
	digest, err := regfile.SHA256(modelPath)
	if err != nil {
		return evalpartial.Run{}, err
	}
	pre, err := canonicalJSON(settings.Preprocess)
	if err != nil {
		return evalpartial.Run{}, err
	}
	run := evalpartial.Run{Model: modelPath, ModelSHA256: digest, Images: imgs.String(), Masks: masks.String(),
		Classes: classes, Ignore: ignore, ClassNames: names, Preprocess: pre,
		SizeClasses: sizeClasses, SizeThreshold: threshold}
	if set != nil {
		run.Images, run.Masks = set.Description(), set.Description()
	}
	if settings.LabelMap != nil {
		run.LabelMap = settings.LabelMap.String()
	}
	if run.ClassNames == nil {
		run.ClassNames = []string{}
	}
	if run.SizeClasses == nil {
		run.SizeClasses = []int{}
	}
	return run, nil
}

// evalPairs pairs the images with their masks and keeps this shard's:
// two local folders (or --data's set) are paired from their whole
// listings; otherwise both listings are streamed side by side, once here
// to check the pairing and count, once as the pairs are consumed.
func evalPairs(c *cli.Context, set *datalayout.Set, spec shard.Spec, imgs, masks *storage.Folder) (iter.Seq2[datalayout.Sample, error], int, error) {
	if imgs.IsLocal() && masks.IsLocal() {
		samples, err := localSamples(c, set)
		if err != nil {
			return nil, 0, err
		}
		if len(samples) == 0 {
			return nil, 0, cli.Exit("no image/mask pairs found", 1)
		}
		var mine []datalayout.Sample
		for _, p := range samples {
			if spec.Owns(filepath.Base(p.Image)) {
				mine = append(mine, p)
			}
		}
		return func(yield func(datalayout.Sample, error) bool) {
			for _, p := range mine {
				if !yield(p, nil) {
					return
				}
			}
		}, len(mine), nil
	}
	ctx := c.Context
	if err := imgs.CheckList(ctx); err != nil {
		return nil, 0, flagError("images", imgs, err)
	}
	if err := masks.CheckList(ctx); err != nil {
		return nil, 0, flagError("masks", masks, err)
	}
	total := 0
	res, err := joinFolders(ctx, imgs, masks, func(img, _ string) bool {
		if spec.Owns(img) {
			total++
		}
		return true
	})
	if err == nil {
		err = res.err()
	}
	if err != nil {
		return nil, 0, err
	}
	if res.pairs == 0 {
		return nil, 0, cli.Exit("no image/mask pairs found", 1)
	}
	return func(yield func(datalayout.Sample, error) bool) {
		stopped := false
		res, err := joinFolders(ctx, imgs, masks, func(img, mask string) bool {
			if !spec.Owns(img) {
				return true
			}
			stopped = !yield(datalayout.Sample{Image: imgs.Path(img), Mask: masks.Path(mask)}, nil)
			return !stopped
		})
		if err == nil {
			err = res.err() // the folders changed since the check
		}
		if err != nil && !stopped {
			yield(datalayout.Sample{}, err)
		}
	}, total, nil
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

// readMask reads the labels of s (its mask an item of masks).
func readMask(ctx context.Context, masks *storage.Folder, s datalayout.Sample, opt imageio.MaskOptions) (*imageio.Mask, error) {
	if masks.IsLocal() {
		return s.ReadMask(opt)
	}
	path := s.Mask
	r, err := masks.Open(ctx, baseName(path))
	if err != nil {
		return nil, fmt.Errorf("read mask: %w", err)
	}
	defer r.Close()
	return imageio.DecodeMask(r, path, opt)
}

// partialDone looks at an existing --partial file before the work: the
// same shard of the same evaluation, complete, means the work is done (a
// retried worker stops there); anything else there is refused rather than
// overwritten.
func partialDone(c *cli.Context, v string, acc *evalpartial.Partial) (bool, error) {
	f, name, err := storage.OpenFile(c.Context, v)
	if err != nil {
		return false, cli.Exit(fmt.Sprintf("--partial %s: %v", v, err), 2)
	}
	defer f.Close()
	if err := f.CheckAccess(c.Context); err != nil {
		return false, flagError("partial", f, err)
	}
	data, err := f.ReadAll(c.Context, name, evalpartial.MaxBytes)
	if storage.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, cli.Exit(fmt.Sprintf("--partial %s: %v", v, err), 2)
	}
	old, err := evalpartial.Parse(data, v)
	if err != nil {
		return false, cli.Exit(fmt.Sprintf("--partial %s exists and is not this evaluation's partial file (%v); not overwriting it: remove it or choose another file", v, err), 2)
	}
	if d := old.Run.Diff(acc.Run); d != "" {
		return false, cli.Exit(fmt.Sprintf("--partial %s holds another evaluation's scores (it differs in %s); not overwriting it: remove it or choose another file", v, d), 2)
	}
	if old.Shard != acc.Shard {
		return false, cli.Exit(fmt.Sprintf("--partial %s holds shard %s, and this is shard %s: give each shard its own file (e.g. part-$JOB_COMPLETION_INDEX.json)", v, old.Shard, acc.Shard), 2)
	}
	notef(c, "segtune: %s already holds shard %s of this evaluation: nothing to do", v, acc.Shard)
	if c.Bool("json") {
		return true, printJSON(os.Stdout, old.Summary())
	}
	return true, nil
}

// writePartial writes the accumulator to v (a path or a URL), atomically.
func writePartial(c *cli.Context, v string, acc *evalpartial.Partial) error {
	if err := evaluate.WritePartial(c.Context, v, acc); err != nil {
		return fmt.Errorf("--partial: %w", err)
	}
	notef(c, "segtune: wrote shard %s's scores to %s", acc.Shard, v)
	return nil
}
