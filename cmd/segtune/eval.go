package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// confusionFlag is --confusion, of eval and eval merge.
func confusionFlag(dir *string) cli.Flag {
	return &cli.StringFlag{Name: "confusion", Usage: "write the confusion matrix into `DIR` as confusion.csv (pixel counts) and confusion.png (a heat map of normalised rows)", Destination: dir}
}

// evalOptions are eval's settings: evaluate's, the data's layout and
// masks, the shard, the model's preprocessing, dense inference and
// session, and how it reports.
type evalOptions struct {
	evaluate.Settings
	Layout                dataLayout
	LabelMap, MaskPalette string
	Shard                 shardOptions
	Pre                   preprocessOptions
	Dense                 denseOptions
	Session               runtime.Options
	JSON                  bool
}

func evalCommand() *cli.Command {
	o := &evalOptions{}
	return &cli.Command{
		Name:  "eval",
		Usage: "score a model on labelled images: IoU, Dice, precision, recall per class and their means; the confusion matrix",
		Description: "Pairs the images in --images with the masks in --masks by file name (or reads a split of\n" +
			"--data in any known layout), runs the model, maps its prediction back to each image's own\n" +
			"size and compares it with the mask.",
		Flags: slices.Concat(evalFlags(o), dataLayoutFlags(&o.Layout, "--data"), shardFlags(&o.Shard)[:2],
			preprocessFlags(&o.Pre), denseFlags(&o.Dense, "")),
		Action:      func(c *cli.Context) error { return runEval(c, o) },
		Subcommands: []*cli.Command{evalMergeCommand()},
	}
}

// evalFlags bind eval's own flags into o.
func evalFlags(o *evalOptions) []cli.Flag {
	def := evaluate.DefaultSettings()
	o.Settings = def
	s := &o.Settings
	return slices.Concat([]cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "ONNX model or segtune checkpoint (its run's settings apply)", Destination: &s.Model},
		&cli.StringFlag{Name: "images", Usage: "folder of images (a path, or an s3://, gs:// or azblob:// URL)", Destination: &s.Images},
		&cli.StringFlag{Name: "masks", Usage: "folder of masks with the same base names (a path or a URL)", Destination: &s.Masks},
		dataFlag(&s.Data),
		labelMapFlag(&o.LabelMap, `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`),
		maskPaletteFlag(&o.MaskPalette),
		&cli.IntFlag{Name: "ignore", Value: def.Ignore, Usage: "mask label left out of scoring", Destination: &s.Ignore},
		classNamesFlag(&s.ClassNames, "comma-separated class names for the report"),
		&cli.IntFlag{Name: "batch", Value: def.Batch, Usage: "images per model run", Destination: &s.Batch},
		&cli.StringFlag{Name: "size-classes", Usage: "report small and large objects separately: classes whose pixel fraction is the size (e.g. 1)", Destination: &s.SizeClasses},
		&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an image's object is large (default: a checkpoint's, else the mean over these images)", Destination: &s.SizeThreshold},
		confusionFlag(&s.Confusion),
		&cli.StringFlag{Name: "partial", Usage: "write this shard's confusion matrices and size statistics to `FILE` (a path or a URL) for segtune eval merge", Destination: &s.Partial},
	}, sessionFlags(&o.Session), []cli.Flag{jsonFlag(&o.JSON)})
}

func runEval(c *cli.Context, o *evalOptions) error {
	s := &o.Settings
	s.Given = given(c)
	if err := requireEvalData(c, s); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	l, err := openLabelled(c, s.Data, o.Layout, o.LabelMap, &s.Images, &s.Masks)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := s.CheckConfusion(l.set); l.set != nil && err != nil { // the data set's folders
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	spec, err := o.Shard.resolve(c)
	if err != nil {
		return err
	}
	plan, err := evalPlan(c, o, spec, l)
	if err != nil {
		return err
	}
	defer plan.Segmenter.Close()
	return evalRun(c, o, spec, plan)
}

// evalRun scores plan and reports, writing the shard's partial file.
func evalRun(c *cli.Context, o *evalOptions, spec shard.Spec, plan evaluate.Plan) error {
	partial := o.Partial
	if partial != "" {
		if done, err := partialDone(c, o, evaluate.NewPartial(spec, plan.Setup)); err != nil || done {
			return err
		}
	}
	bar := progress(c, plan.Total, "eval")
	plan.Progress = func(done, _ int) { bar.Set(done) }
	plan.Name = flagOf
	acc, err := evaluate.Run(c.Context, plan)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", o.Model, err)
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
	return printEvalSummary(c, o.Confusion, o.JSON, acc.Summary())
}

// requireEvalData demands eval's model and its data (--data, or --images
// and --masks); not the flags' Required, which urfave/cli would also
// demand of `eval merge`.
func requireEvalData(c *cli.Context, s *evaluate.Settings) error {
	if s.Data != "" {
		return cliflag.Require(c, "model")
	}
	return cliflag.Require(c, "model", "images", "masks")
}

// labelledPair are the labelled images eval and info --find-preprocessing
// score: a split of --data, or the --images and --masks folders.
type labelledPair struct {
	set           *datalayout.Set
	images, masks *storage.Folder
}

// openLabelled opens the split of the data set data (read with layout
// and labelMap; its folder becomes *images and *masks) or, without data,
// the folders *images and *masks; the caller closes them.
func openLabelled(c *cli.Context, data string, layout dataLayout, labelMap string, images, masks *string) (*labelledPair, error) {
	l := &labelledPair{}
	if data != "" {
		opt, err := layout.options()
		if err != nil {
			return nil, err
		}
		if l.set, err = openData(c, data, opt, "val", labelMap); err != nil {
			return nil, err
		}
		if err := l.set.Err(); err != nil {
			return nil, dataExit(err)
		}
		*images, *masks = l.set.Root, l.set.Root
	}
	var err error
	if l.images, err = openFolder(c, "images", *images, true); err != nil {
		return nil, err
	}
	if l.masks, err = openFolder(c, "masks", *masks, true); err != nil {
		l.images.Close()
		return nil, err
	}
	return l, nil
}

func (l *labelledPair) Close() {
	l.images.Close()
	l.masks.Close()
}

// pairsExit is the exit for an error pairing labelled images: 1 when
// there are none, 2 naming the folder that cannot be read.
func pairsExit(err error) error {
	var fe *evaluate.FolderError
	switch {
	case errors.Is(err, evaluate.ErrNoPairs):
		return cli.Exit(err.Error(), 1)
	case errors.As(err, &fe):
		return flagError(fe.Side, fe.Folder, fe.Err)
	}
	return err
}

// evalPlan is the evaluation s describes: this shard's pairs, the opened
// model (the caller closes plan.Segmenter) and how it is scored.
func evalPlan(c *cli.Context, o *evalOptions, spec shard.Spec, l *labelledPair) (evaluate.Plan, error) {
	s := &o.Settings
	settings, err := o.Pre.modelSettings(c, s.Model)
	if err != nil {
		return evaluate.Plan{}, err
	}
	dense, err := o.Dense.dense()
	if err != nil {
		return evaluate.Plan{}, err
	}
	masks, _, err := readMasks(o.LabelMap, o.MaskPalette)
	if err != nil {
		return evaluate.Plan{}, err
	}
	req, err := s.Request(settings.Sidecar, masks)
	if err != nil {
		return evaluate.Plan{}, err
	}
	session := resolve.SegmenterOptions{Session: sessionFor(c, o.Session), Dense: dense}
	req.Images, req.Masks, req.Set, req.Shard = l.images, l.masks, l.set, spec
	req.Open = func(m string, s imageio.Sidecar) (*inference.Segmenter, error) { return openModel(c, m, s, session) }
	plan, err := req.Plan(c.Context)
	if err != nil {
		return plan, pairsExit(err)
	}
	plan.Batch = clampBatch(c, plan.Segmenter, req.Batch) // with its notice
	return plan, nil
}

// partialDone looks at an existing --partial file before the work: this
// shard of this evaluation, complete, means the work is done (a retried
// worker stops there); anything else there is refused, not overwritten.
func partialDone(c *cli.Context, o *evalOptions, acc *evaluate.Partial) (bool, error) {
	old, err := evaluate.ExistingPartial(c.Context, o.Partial, acc)
	if err != nil || old == nil {
		if err != nil {
			err = cli.Exit("--partial "+err.Error(), 2)
		}
		return false, err
	}
	notef(c, "segtune: %s already holds shard %s of this evaluation: nothing to do", o.Partial, acc.Shard)
	if o.JSON {
		return true, printJSON(os.Stdout, old.Summary())
	}
	return true, nil
}

// printEvalSummary prints the report (text or asJSON), writes the
// confusion files into confusion and returns the exit error when images
// failed.
func printEvalSummary(c *cli.Context, confusion string, asJSON bool, sum evaluate.Summary) error {
	if confusion != "" {
		if err := metrics.WriteConfusionFiles(confusion, sum.Matrix, sum.ClassNames); err != nil {
			return fmt.Errorf("--confusion: %w", err)
		}
		notef(c, "segtune: wrote the confusion matrix to %s", confusion)
	}
	return sum.Print(printer(asJSON))
}

func evalMergeCommand() *cli.Command {
	var (
		s      evaluate.Settings
		asJSON bool
	)
	return &cli.Command{
		Name:      "merge",
		Usage:     "combine the --partial files of every eval shard into the report of the whole set",
		ArgsUsage: "PARTIAL...",
		Description: "Reads the partial files that `segtune eval --shard K/N --partial FILE` wrote (paths or URLs),\n" +
			"checks each (counts, images, shards; the matrix the sum of its images' cells) and that they are\n" +
			"the N shards of one evaluation (same model, data, settings; each shard once),\n" +
			"and prints exactly the report one run over every image gives (seconds: the shards' total).",
		Flags: []cli.Flag{jsonFlag(&asJSON), confusionFlag(&s.Confusion)},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("eval merge: give the partial files of every shard", 2)
			}
			if err := s.CheckConfusion(nil); err != nil {
				return cli.Exit(withFlagNames(err).Error(), 2)
			}
			merged, err := evaluate.Merge(c.Context, c.Args().Slice())
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return printEvalSummary(c, s.Confusion, asJSON, merged.Summary())
		},
	}
}
