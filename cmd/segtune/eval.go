package main

import (
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
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
	if err := cliflag.Require(c, s.Required()...); err != nil { // eval's keys are its flags' names
		return err
	}
	data, err := s.Open(labelledOpeners(c, o.Layout, o.LabelMap))
	if err != nil {
		return err
	}
	defer data.Close()
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	spec, err := o.Shard.resolve(c)
	if err != nil {
		return err
	}
	model, err := o.Pre.modelSettings(c, s.Model)
	if err != nil {
		return err
	}
	dense, err := o.Dense.dense()
	if err != nil {
		return err
	}
	masks, _, err := readMasks(o.LabelMap, o.MaskPalette)
	if err != nil {
		return err
	}
	session := resolve.SegmenterOptions{Session: sessionFor(c, o.Session), Dense: dense}
	return evaluate.Job{Settings: *s, Data: data, Shard: spec, ModelSettings: model.Sidecar, Masks: masks,
		Open:  func(m string, sc imageio.Sidecar) (*inference.Segmenter, error) { return openModel(c, m, sc, session) },
		Batch: func(seg *inference.Segmenter, batch int) int { return clampBatch(c, seg, batch) },
		Print: printer(o.JSON), Notes: noticeWriter(c), Quiet: globals(c).Quiet, Name: flagOf}.Run(c.Context)
}

// labelledOpeners open the labelled data of eval and info
// --find-preprocessing: a split of --data read with layout (val where it
// has one; labelMap is --label-map's, for its notes), or the folders.
func labelledOpeners(c *cli.Context, layout dataLayout, labelMap string) evaluate.Openers {
	data := func(root string) (*datalayout.Set, error) {
		opt, err := layout.options()
		if err != nil {
			return nil, err
		}
		set, err := openData(c, root, opt, "val", labelMap)
		if err != nil {
			return nil, err
		}
		if err := set.Err(); err != nil {
			return nil, dataExit(err)
		}
		return set, nil
	}
	folder := func(key, v string) (*storage.Folder, error) { return openFolder(c, key, v, true) }
	return evaluate.Openers{Data: data, Folder: folder}
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
				return setting.Usage(err)
			}
			merged, err := evaluate.Merge(c.Context, c.Args().Slice())
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return merged.Summary().Output(printer(asJSON), s.Confusion, noticeWriter(c))
		},
	}
}
