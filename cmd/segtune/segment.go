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
)

func segmentCommand() *cli.Command {
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
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint"},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "folder of images (a path, or an s3://, gs:// or azblob:// URL)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "folder for masks (a path or a URL)"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.BoolFlag{Name: "overlay", Usage: "also write colour overlays of the masks on the images"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace files at the outputs' names that segment did not write (without it such a file, an annotation mask say, is kept and named)"},
			&cli.StringFlag{Name: "annotations", Usage: "also write the masks as pre-annotations: " + strings.Join(annot.WriteFormats, ", ") + " (comma-separated), in OUTPUT/FORMAT/; local folders, unsharded"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for --annotations (default: the model's sidecar)"},
			deviceFlag, threadsFlag, jsonFlag,
		}, append(append(append(maskColourFlags(), shardFlags()...), preprocessFlags()...), denseFlags("")...)...),
		Action: runSegment,
	}
}

func runSegment(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	spec, err := resolveShard(c)
	if err != nil {
		return err
	}
	in, err := openFolderFlag(c, "input", true)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := openFolderFlag(c, "output", false)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := folder.CheckFolders(in, out); err != nil {
		return segmentError(err)
	}
	modelPath := c.String("model")
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	exp, err := annotationsPlan(c, in, out, spec, settings)
	if err != nil {
		return err
	}
	opts := folder.Options{Shard: spec, SkipExisting: skipExisting(c, spec), Overwrite: c.Bool("overwrite"),
		Notef: func(f string, a ...any) { notef(c, "segtune: "+f, a...) }}
	if opts.Palette, err = outputPalette(c, settings); err != nil {
		return err
	}
	if c.Bool("overlay") {
		opts.Overlay = &imageio.OverlayOptions{Alpha: c.Float64("overlay-alpha"), Skip: []uint8{0}}
	}
	listing, err := folder.List(c.Context, in, out, opts)
	if err != nil {
		return segmentError(err)
	}
	seg, err := openSegmenterFor(c, modelPath, settings, true)
	if err != nil {
		return err
	}
	defer seg.Close()
	opts.Batch = clampBatch(c, seg, c.Int("batch"))
	if err := seg.CheckPalette(opts.Palette); err != nil {
		return err
	}
	if n := seg.Contract.Classes; exp != nil && n > 0 && n != len(exp.Classes) {
		return cli.Exit(fmt.Sprintf("--annotations: %d class names (%s) for a model of %d classes", len(exp.Classes), strings.Join(exp.Classes, ","), n), 2)
	}
	if !c.Bool("quiet") && term.IsTerminal(int(os.Stderr.Fd())) { // with the progress bar
		fmt.Fprintln(os.Stderr, "segtune:", imageio.DecoderInfo())
	}
	bar := progress(c, listing.Total, "segment")
	opts.Progress = func(done int) { bar.Set(done) }
	rep, err := folder.Run(c.Context, seg, in, out, listing, opts)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", modelPath, err)
	}
	for i, f := range rep.Failures {
		rep.Failures[i].Err = withFlagNames(f.Err) // their advice by flag
	}
	if exp != nil {
		exp.Palette = opts.Palette
		if err := writeAnnotations(c, in, out, *exp); err != nil {
			return err
		}
	}
	sum := folder.Summarize(rep, seg.Session.Device, opts.Batch, c.String("output"), spec)
	if c.Bool("json") {
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
func annotationsPlan(c *cli.Context, in, out *storage.Folder, spec shard.Spec, settings imageio.Sidecar) (*annot.ExportOptions, error) {
	if !c.IsSet("annotations") {
		return nil, nil
	}
	formats, err := annot.ParseWriteFormats(c.String("annotations"))
	if err != nil {
		return nil, cli.Exit("--annotations: "+err.Error(), 2)
	}
	switch {
	case spec.Source != "":
		return nil, cli.Exit("--annotations with --shard: each shard would write its own annotation files; segment the shards without it, then run segment --annotations unsharded, which keeps their masks (--skip-existing)", 2)
	case !in.IsLocal() || !out.IsLocal():
		return nil, cli.Exit("--annotations needs local --input and --output folders", 2)
	}
	names := classNames(c)
	if names == nil {
		names = settings.Classes
	}
	if slices.Contains(names, "") {
		return nil, cli.Exit(fmt.Sprintf("--class-names %s: a class name is empty", c.String("class-names")), 2)
	}
	if names == nil {
		return nil, cli.Exit("--annotations names each class: give --class-names (background first) or a model whose sidecar lists its classes", 2)
	}
	for _, t := range annot.ExportTargets(out.Path(""), formats) {
		if _, err := os.Lstat(t); err == nil && !c.Bool("overwrite") {
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

// openSegmenter opens the model as the command's flags say (session,
// --tile, --tta).
func openSegmenter(c *cli.Context, modelPath string, settings imageio.Sidecar) (*inference.Segmenter, error) {
	return openSegmenterFor(c, modelPath, settings, false)
}

// openSegmenterFor is openSegmenter, with labelsOnly for a command that
// needs only label maps (segment's masks and overlays): the arg-max then
// runs inside the graph where it gives the same masks
// (inference.OpenLabels).
func openSegmenterFor(c *cli.Context, modelPath string, settings imageio.Sidecar, labelsOnly bool) (*inference.Segmenter, error) {
	dense, err := denseSettings(c, "")
	if err != nil {
		return nil, err
	}
	seg, err := resolve.OpenSegmenter(modelPath, settings, resolve.SegmenterOptions{Session: sessionOptions(c), Dense: dense, LabelsOnly: labelsOnly,
		Notef: func(f string, a ...any) { notef(c, "segtune: "+f, a...) }})
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

// maskColourFlags say how masks and overlays are coloured (segment, serve).
func maskColourFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "overlay-alpha", Aliases: []string{"alpha"}, Value: 0.5, Usage: "overlay opacity of the mask colours (--alpha is the regularizer's weight in finetune)"},
		&cli.StringFlag{Name: "palette", Usage: "palette image (e.g. camvid12_palette.png); default: the model's sidecar, else Pascal VOC colours"},
	}
}

// outputPalette is the palette masks are written in: --palette's, else the
// model's settings' (nil: Pascal VOC colours).
func outputPalette(c *cli.Context, settings imageio.Sidecar) (imageio.Palette, error) {
	if f := c.String("palette"); f != "" {
		return imageio.ReadPalette(f)
	}
	return settings.Palette, nil
}

// denseFlags are segment's and eval's flags for sliding-window inference
// and test-time augmentation (inference.ParseDense); with prefix "val-"
// they are finetune's, for its validation.
func denseFlags(prefix string) []cli.Flag {
	category, what := "Large images", func(string) string { return "" }
	if prefix != "" {
		category = "Validation"
		what = func(flag string) string { return "validate as segment --" + flag + " does: " }
	}
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "tile", Usage: what("tile") + "run the model on HxW windows of the preprocessed image (with --resize none, of the image itself) and blend their scores", Category: category},
		&cli.Float64Flag{Name: prefix + "overlap", Value: inference.DefaultOverlap, Usage: "fraction of a --" + prefix + "tile window shared with its neighbour, in [0, 1)", Category: category},
		&cli.StringFlag{Name: prefix + "tta", Usage: what("tta") + "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: category},
	}
}

// denseSettings reads the flags denseFlags(prefix) declares (nil: none
// asks for dense inference); each bad value is refused naming its flag.
func denseSettings(c *cli.Context, prefix string) (*inference.Dense, error) {
	var overlap *float64
	if v := c.Float64(prefix + "overlap"); c.IsSet(prefix + "overlap") {
		overlap = &v
	}
	d, err := inference.ParseDense(c.String(prefix+"tile"), overlap, c.String(prefix+"tta"))
	if err != nil { // its keys are the flags' without the prefix
		return nil, setting.Rename(err, func(key string) string { return flagOf(prefix + key) })
	}
	return d, nil
}
