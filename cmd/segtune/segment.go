package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// segmentOptions are what segment's flags set.
type segmentOptions struct {
	Model, Input, Output    string
	Folder                  folder.Options // Batch, Overwrite
	Overlay, JSON           bool
	Annotations, ClassNames string
	Session                 runtime.Options
	Colour                  colourOptions
	Shard                   shardOptions
	Pre                     preprocessOptions
	Dense                   denseOptions
}

func segmentCommand() *cli.Command {
	o := &segmentOptions{Folder: folder.Options{Batch: 1}}
	return &cli.Command{
		Name:  "segment",
		Usage: "segment every image in a folder and write palette-PNG masks (and overlays)",
		Description: "Writes OUTPUT/NAME.png, a palette PNG whose pixel values are class indices, for every\n" +
			"image in INPUT, at the image's own size; with --overlay also OUTPUT/overlays/NAME.png.\n" +
			"Unreadable images are reported by name and skipped; the exit status is 1 if any failed.\n" +
			"With --annotations the masks are also written as pre-annotations for a labelling tool, named by\n" +
			"the model's class names (background is not exported): OUTPUT/coco/annotations.json (RLE),\n" +
			"OUTPUT/labelstudio/tasks.json (brushlabels, images as /data/local-files/?d=NAME),\n" +
			"OUTPUT/cvat/ (Segmentation mask 1.1) and OUTPUT/labelme/NAME.json (mask shapes).",
		Flags: slices.Concat([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint", Destination: &o.Model},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "folder of images (a path, or an s3://, gs:// or azblob:// URL)", Destination: &o.Input},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "folder for masks (a path or a URL)", Destination: &o.Output},
			&cli.IntFlag{Name: "batch", Value: o.Folder.Batch, Usage: "images per model run", Destination: &o.Folder.Batch},
			&cli.BoolFlag{Name: "overlay", Usage: "also write colour overlays of the masks on the images", Destination: &o.Overlay},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace files at the outputs' names that segment did not write (without it such a file, an annotation mask say, is kept and named)", Destination: &o.Folder.Overwrite},
			&cli.StringFlag{Name: "annotations", Usage: "also write the masks as pre-annotations: " + strings.Join(annot.WriteFormats, ", ") + " (comma-separated), in OUTPUT/FORMAT/; local folders, unsharded", Destination: &o.Annotations},
			classNamesFlag(&o.ClassNames, "comma-separated class names for --annotations (default: the model's sidecar)"),
		}, sessionFlags(&o.Session), []cli.Flag{jsonFlag(&o.JSON)},
			maskColourFlags(&o.Colour), shardFlags(&o.Shard), preprocessFlags(&o.Pre), denseFlags(&o.Dense, "")),
		Action: func(c *cli.Context) error { return runSegment(c, o) },
	}
}

func runSegment(c *cli.Context, o *segmentOptions) error {
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	spec, err := o.Shard.resolve(c)
	if err != nil {
		return err
	}
	opts := o.Folder
	opts.Shard, opts.SkipExisting = spec, o.Shard.Skip(spec)
	plan, err := folder.Prepare(c.Context, folder.Request{Input: o.Input, Output: o.Output, Options: opts, Overlay: o.Overlay, Alpha: o.Colour.Alpha,
		Palette: o.Colour.Palette, Annotations: o.Annotations, ClassNames: splitNames(o.ClassNames), Notes: noticeWriter(c), Name: flagOf},
		func() (imageio.Sidecar, error) { s, err := o.Pre.modelSettings(c, o.Model); return s.Sidecar, err })
	if err != nil {
		return err
	}
	defer plan.Close()
	dense, err := o.Dense.dense()
	if err != nil {
		return err
	}
	seg, err := openModel(c, o.Model, plan.Settings, resolve.SegmenterOptions{Session: sessionFor(c, o.Session), Dense: dense, LabelsOnly: true})
	if err != nil {
		return err
	}
	defer seg.Close()
	if err := plan.Use(seg); err != nil {
		return err
	}
	if progressui.Shown(globals(c).Quiet) { // with the progress bar
		fmt.Fprintln(os.Stderr, "segtune:", imageio.DecoderInfo())
	}
	sum, err := plan.Run(c.Context, seg, progress(c, plan.Listing.Total, "segment"))
	if err != nil {
		return err
	}
	return sum.Print(printer(o.JSON))
}

// openModel opens the model at modelPath with opts
// (resolve.OpenSegmenter), its notices on stderr.
func openModel(c *cli.Context, modelPath string, settings imageio.Sidecar, opts resolve.SegmenterOptions) (*inference.Segmenter, error) {
	opts.Notes = noticeWriter(c)
	return resolve.OpenSegmenter(modelPath, settings, opts)
}

// clampBatch is batch fitted to the model's fixed batch size, noted.
func clampBatch(c *cli.Context, seg *inference.Segmenter, batch int) int {
	return seg.FitBatch(batch, noticeWriter(c), flagOf)
}

// colourOptions are how masks and overlays are coloured (segment, serve).
type colourOptions struct {
	Alpha   float64 // --overlay-alpha
	Palette string  // --palette's file
}

// maskColourFlags bind how masks and overlays are coloured into o.
func maskColourFlags(o *colourOptions) []cli.Flag {
	o.Alpha = 0.5
	return []cli.Flag{
		&cli.Float64Flag{Name: "overlay-alpha", Aliases: []string{"alpha"}, Value: o.Alpha, Destination: &o.Alpha,
			Action: checkedBy[float64](func() error { return imageio.OverlayOptions{Alpha: o.Alpha}.Validate() }),
			Usage:  "overlay opacity of the mask colours (--alpha is the regularizer's weight in finetune)"},
		&cli.StringFlag{Name: "palette", Usage: "palette image (e.g. camvid12_palette.png); default: the model's sidecar, else Pascal VOC colours", Destination: &o.Palette},
	}
}

// denseOptions are what the dense-inference flags set
// (inference.DenseRequest).
type denseOptions struct{ inference.DenseRequest }

// denseFlags bind segment's and eval's flags for sliding-window inference
// and test-time augmentation into o; with prefix "val-" they are
// finetune's, for its validation.
func denseFlags(o *denseOptions, prefix string) []cli.Flag {
	category, what := "Large images", func(string) string { return "" }
	if prefix != "" {
		category = "Validation"
		what = func(flag string) string { return "validate as segment --" + flag + " does: " }
	}
	o.Overlap, o.Prefix = inference.DefaultOverlap, strings.ReplaceAll(prefix, "-", "_")
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "tile", Usage: what("tile") + "run the model on HxW windows of the preprocessed image (with --resize none, of the image itself) and blend their scores", Category: category, Destination: &o.Tile},
		&cli.Float64Flag{Name: prefix + "overlap", Value: o.Overlap, Usage: "fraction of a --" + prefix + "tile window shared with its neighbour, in [0, 1)", Category: category, Destination: &o.Overlap,
			Action: func(*cli.Context, float64) error { o.OverlapGiven = true; return nil }},
		&cli.StringFlag{Name: prefix + "tta", Usage: what("tta") + "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: category, Destination: &o.TTA},
	}
}

// dense is the dense inference the flags ask for (nil: none); each bad
// value is refused naming its flag.
func (o *denseOptions) dense() (*inference.Dense, error) {
	d, err := o.Parse()
	return d, withFlagNames(err)
}
