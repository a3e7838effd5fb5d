package main

import (
	"errors"
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
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
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

// segmentRun is what segment works on once its flags are checked.
type segmentRun struct {
	in, out  *storage.Folder
	settings imageio.Sidecar
	exp      *annot.ExportOptions
	opts     folder.Options
	listing  folder.Listing
	session  runtime.Options
	dense    *inference.Dense
}

func runSegment(c *cli.Context, o *segmentOptions) error {
	r, err := prepareSegment(c, o)
	if r.in != nil {
		defer r.in.Close()
	}
	if r.out != nil {
		defer r.out.Close()
	}
	if err != nil {
		return err
	}
	seg, err := openModel(c, o.Model, r.settings, resolve.SegmenterOptions{Session: r.session, Dense: r.dense, LabelsOnly: true})
	if err != nil {
		return err
	}
	defer seg.Close()
	r.opts.Batch = clampBatch(c, seg, o.Folder.Batch)
	if err := seg.CheckPalette(r.opts.Palette); err != nil {
		return err
	}
	if err := folder.CheckAnnotationClasses(r.exp, seg.Contract.Classes); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	if progressui.Shown(globals(c).Quiet) { // with the progress bar
		fmt.Fprintln(os.Stderr, "segtune:", imageio.DecoderInfo())
	}
	bar := progress(c, r.listing.Total, "segment")
	r.opts.Progress = func(done int) { bar.Set(done) }
	rep, err := folder.Run(c.Context, seg, r.in, r.out, r.listing, r.opts)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", o.Model, err)
	}
	for i, f := range rep.Failures {
		rep.Failures[i].Err = withFlagNames(f.Err) // their advice by flag
	}
	if r.exp != nil {
		r.exp.Palette = r.opts.Palette
		n, err := folder.WriteAnnotations(c.Context, r.in, r.out, *r.exp)
		if err != nil {
			return err
		}
		notef(c, "segtune: %d images' annotations (%s) in %s", n, strings.Join(r.exp.Formats, ", "), r.out.Path(""))
	}
	return folder.Summarize(rep, seg.Session.Device, r.opts.Batch, o.Output, r.opts.Shard).Print(printer(o.JSON))
}

// prepareSegment checks segment's flags and lists its work before the
// model is opened; the folders it opened are in the result, error or not.
func prepareSegment(c *cli.Context, o *segmentOptions) (r segmentRun, err error) {
	r.session = sessionFor(c, o.Session)
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return r, err
	}
	spec, err := o.Shard.resolve(c)
	if err != nil {
		return r, err
	}
	if r.in, err = openFolder(c, "input", o.Input, true); err != nil {
		return r, err
	}
	if r.out, err = openFolder(c, "output", o.Output, false); err != nil {
		return r, err
	}
	if err := folder.CheckFolders(r.in, r.out); err != nil {
		return r, segmentError(err)
	}
	s, err := o.Pre.modelSettings(c, o.Model)
	if err != nil {
		return r, err
	}
	r.settings = s.Sidecar
	if o.Annotations != "" {
		req := folder.AnnotationRequest{Formats: o.Annotations, Classes: splitNames(o.ClassNames), ModelClasses: r.settings.Classes,
			Overwrite: o.Folder.Overwrite, Sharded: spec.Source != ""}
		if r.exp, err = folder.PlanAnnotations(req, r.in, r.out); err != nil {
			return r, cli.Exit(withFlagNames(err).Error(), 2)
		}
	}
	r.opts = o.Folder
	r.opts.Shard, r.opts.SkipExisting = spec, o.Shard.skipExisting(spec)
	r.opts.Notef = func(f string, a ...any) { notef(c, "segtune: "+f, a...) }
	if r.opts.Palette, err = o.Colour.palette(r.settings); err != nil {
		return r, err
	}
	if o.Overlay {
		r.opts.Overlay = &imageio.OverlayOptions{Alpha: o.Colour.Alpha, Skip: []uint8{0}}
	}
	if r.listing, err = folder.List(c.Context, r.in, r.out, r.opts); err != nil {
		return r, segmentError(err)
	}
	r.dense, err = o.Dense.dense()
	return r, err
}

// segmentError is a listing error's exit: 1 for a folder without
// images, else 2 (a folder or the outputs there refused); errors name
// their flags.
func segmentError(err error) error {
	if errors.As(err, new(*folder.NoImagesError)) {
		return cli.Exit(err.Error(), 1)
	}
	var n setting.Namer
	if errors.As(err, &n) {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return err
}

// openModel opens the model at modelPath with opts
// (resolve.OpenSegmenter), its notices on stderr.
func openModel(c *cli.Context, modelPath string, settings imageio.Sidecar, opts resolve.SegmenterOptions) (*inference.Segmenter, error) {
	opts.Notef = func(f string, a ...any) { notef(c, "segtune: "+f, a...) }
	seg, err := resolve.OpenSegmenter(modelPath, settings, opts)
	if errors.Is(err, inference.ErrDense) {
		return nil, fmt.Errorf("--tile/--tta: %w", err)
	}
	return seg, err
}

// clampBatch is batch limited to the model's fixed batch size (with a
// notice), and at least 1.
func clampBatch(c *cli.Context, seg *inference.Segmenter, batch int) int {
	b := seg.BatchFor(batch)
	if b < batch {
		notef(c, "segtune: the model's batch size is fixed at %d; using --batch %d", b, b)
	}
	return b
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

// palette is the palette masks are written in: --palette's, else the
// model's settings' (nil: Pascal VOC colours).
func (o *colourOptions) palette(settings imageio.Sidecar) (imageio.Palette, error) {
	if o.Palette != "" {
		return imageio.ReadPalette(o.Palette)
	}
	return settings.Palette, nil
}

// denseOptions are what the dense-inference flags set, as
// inference.ParseDense reads them.
type denseOptions struct {
	Tile, TTA string
	Overlap   float64
	overlap   *float64 // &Overlap once the flag is given
	prefix    string
}

// denseFlags bind segment's and eval's flags for sliding-window inference
// and test-time augmentation into o; with prefix "val-" they are
// finetune's, for its validation.
func denseFlags(o *denseOptions, prefix string) []cli.Flag {
	category, what := "Large images", func(string) string { return "" }
	if prefix != "" {
		category = "Validation"
		what = func(flag string) string { return "validate as segment --" + flag + " does: " }
	}
	o.Overlap, o.prefix = inference.DefaultOverlap, prefix
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "tile", Usage: what("tile") + "run the model on HxW windows of the preprocessed image (with --resize none, of the image itself) and blend their scores", Category: category, Destination: &o.Tile},
		&cli.Float64Flag{Name: prefix + "overlap", Value: o.Overlap, Usage: "fraction of a --" + prefix + "tile window shared with its neighbour, in [0, 1)", Category: category, Destination: &o.Overlap,
			Action: func(*cli.Context, float64) error { o.overlap = &o.Overlap; return nil }},
		&cli.StringFlag{Name: prefix + "tta", Usage: what("tta") + "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: category, Destination: &o.TTA},
	}
}

// dense is the dense inference the flags ask for (nil: none); each bad
// value is refused naming its flag.
func (o *denseOptions) dense() (*inference.Dense, error) {
	d, err := inference.ParseDense(o.Tile, o.overlap, o.TTA)
	if err != nil { // its keys are the flags' without the prefix
		return nil, setting.Rename(err, func(key string) string { return flagOf(o.prefix + key) })
	}
	return d, nil
}
