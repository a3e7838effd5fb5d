package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
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
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for --annotations (default: the model's sidecar)", Destination: &o.ClassNames},
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
	if n := seg.Contract.Classes; r.exp != nil && n > 0 && n != len(r.exp.Classes) {
		return cli.Exit(fmt.Sprintf("--annotations: %d class names (%s) for a model of %d classes", len(r.exp.Classes), strings.Join(r.exp.Classes, ","), n), 2)
	}
	if !globals(c).Quiet && term.IsTerminal(int(os.Stderr.Fd())) { // with the progress bar
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
		if err := writeAnnotations(c, r.in, r.out, *r.exp); err != nil {
			return err
		}
	}
	return reportSegment(folder.Summarize(rep, seg.Session.Device, r.opts.Batch, o.Output, r.opts.Shard), o.JSON)
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
	if r.exp, err = annotationsPlan(o, r.in, r.out, spec, r.settings); err != nil {
		return r, err
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

// reportSegment prints a run's summary, as JSON or text, and exits 1 if
// any image failed.
func reportSegment(sum folder.Summary, asJSON bool) error {
	var err error
	if asJSON {
		err = printJSON(os.Stdout, sum)
	} else {
		printSkipped(sum.Failures)
		err = sum.WriteText(os.Stdout)
	}
	if err == nil && sum.Failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", sum.Failed, sum.Images), 1)
	}
	return err
}

// annotationsPlan checks --annotations before any work (nil without
// it): its formats, local unsharded folders, the class names, and that
// its files would replace none that is there without --overwrite.
func annotationsPlan(o *segmentOptions, in, out *storage.Folder, spec shard.Spec, settings imageio.Sidecar) (*annot.ExportOptions, error) {
	if o.Annotations == "" {
		return nil, nil
	}
	formats, err := annot.ParseWriteFormats(o.Annotations)
	if err != nil {
		return nil, cli.Exit("--annotations: "+err.Error(), 2)
	}
	switch {
	case spec.Source != "":
		return nil, cli.Exit("--annotations with --shard: each shard would write its own annotation files; segment the shards without it, then run segment --annotations unsharded, which keeps their masks (--skip-existing)", 2)
	case !in.IsLocal() || !out.IsLocal():
		return nil, cli.Exit("--annotations needs local --input and --output folders", 2)
	}
	names := splitNames(o.ClassNames)
	if names == nil {
		names = settings.Classes
	}
	if slices.Contains(names, "") {
		return nil, cli.Exit(fmt.Sprintf("--class-names %s: a class name is empty", o.ClassNames), 2)
	}
	if names == nil {
		return nil, cli.Exit("--annotations names each class: give --class-names (background first) or a model whose sidecar lists its classes", 2)
	}
	for _, t := range annot.ExportTargets(out.Path(""), formats) {
		if _, err := os.Lstat(t); err == nil && !o.Folder.Overwrite {
			return nil, cli.Exit(fmt.Sprintf("--annotations: %s is there already; give --overwrite to replace it, or choose another --output", t), 2)
		}
	}
	// Absolute, so that LabelMe's imagePath can lead from one to the other.
	dir, err := filepath.Abs(out.Path(""))
	if err != nil {
		return nil, err
	}
	images, err := filepath.Abs(in.Path(""))
	if err != nil {
		return nil, err
	}
	return &annot.ExportOptions{WriteOptions: annot.WriteOptions{Classes: names}, Formats: formats, Dir: dir, ImageDir: images}, nil
}

// writeAnnotations writes exp's formats from the masks in out of the
// images in in (those that failed have none and are left out).
func writeAnnotations(c *cli.Context, in, out *storage.Folder, exp annot.ExportOptions) error {
	w, err := annot.NewExport(exp)
	if err != nil {
		return fmt.Errorf("--annotations: %w", err)
	}
	n, err := annot.AddMasks(w, folder.ImageNames(c.Context, in), func(image string) string { return out.Path(folder.Stem(image) + ".png") })
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return fmt.Errorf("--annotations: %w", err)
	}
	notef(c, "segtune: %d images' annotations (%s) in %s", n, strings.Join(exp.Formats, ", "), out.Path(""))
	return nil
}

// segmentError names the flag of the folder a listing error is about.
func segmentError(err error) error {
	var oe *folder.OverlapError
	var fe *folder.FolderError
	var ne *folder.NoImagesError
	switch {
	case errors.As(err, &oe):
		return cli.Exit(fmt.Sprintf("--output %s and --input %s overlap (one is inside the other, or they are the same folder): "+
			"segment would write among the images it reads; choose an output folder outside the input that does not hold it", oe.Out, oe.In), 2)
	case errors.As(err, &fe) && fe.Output:
		return flagError("output", fe.Folder, fe.Err)
	case errors.As(err, &fe):
		return flagError("input", fe.Folder, fe.Err)
	case errors.As(err, &ne):
		return cli.Exit(ne.Error(), 1)
	case errors.As(err, new(*folder.ForeignOutputError)):
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return err
}

// printSkipped names on stderr the images a run could not process.
func printSkipped(fs []pipeline.FailureRecord) {
	for _, f := range fs {
		fmt.Fprintf(os.Stderr, "segtune: skipped %s: %s\n", f.Path, f.Error)
	}
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
	Tile, TTA    string
	Overlap      float64
	overlapGiven bool
	prefix       string
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
			Action: func(*cli.Context, float64) error { o.overlapGiven = true; return nil }},
		&cli.StringFlag{Name: prefix + "tta", Usage: what("tta") + "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: category, Destination: &o.TTA},
	}
}

// dense is the dense inference the flags ask for (nil: none); each bad
// value is refused naming its flag.
func (o *denseOptions) dense() (*inference.Dense, error) {
	var overlap *float64
	if o.overlapGiven {
		overlap = &o.Overlap
	}
	d, err := inference.ParseDense(o.Tile, overlap, o.TTA)
	if err != nil { // its keys are the flags' without the prefix
		return nil, setting.Rename(err, func(key string) string { return flagOf(o.prefix + key) })
	}
	return d, nil
}
