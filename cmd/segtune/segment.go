package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/resolve"
)

func segmentCommand() *cli.Command {
	return &cli.Command{
		Name:  "segment",
		Usage: "segment every image in a folder and write palette-PNG masks (and overlays)",
		Description: "Writes OUTPUT/NAME.png, a palette PNG whose pixel values are class indices, for every\n" +
			"image in INPUT, at the image's own size; with --overlay also OUTPUT/overlays/NAME.png.\n" +
			"Unreadable images are reported by name and skipped; the exit status is 1 if any failed.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint"},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "folder of images (a path, or an s3://, gs:// or azblob:// URL)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "folder for masks (a path or a URL)"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.BoolFlag{Name: "overlay", Usage: "also write colour overlays of the masks on the images"},
			deviceFlag, threadsFlag, jsonFlag,
		}, append(append(append(maskColourFlags(), shardFlags()...), preprocessFlags()...), denseFlags("")...)...),
		Action: runSegment,
	}
}

// segmentSummary is what `segment --json` prints.
type segmentSummary struct {
	Images       int           `json:"images"`
	Succeeded    int           `json:"succeeded"`
	Skipped      int           `json:"skipped"` // outputs already there and checked
	Failed       int           `json:"failed"`
	Failures     []failureJSON `json:"failures"`
	Seconds      float64       `json:"seconds"`
	ImagesPerSec float64       `json:"images_per_s"`
	InferSeconds float64       `json:"infer_seconds"`
	Device       string        `json:"device"`
	Decoders     string        `json:"decoders"` // imageio.DecoderInfo: native or Go JPEG/PNG decoders
	Batch        int           `json:"batch"`
	Output       string        `json:"output"`
	Shard        string        `json:"shard,omitempty"` // K/N when sharded
}

type failureJSON struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func runSegment(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	ctx := c.Context
	spec, err := resolveShard(c)
	if err != nil {
		return err
	}
	modelPath := c.String("model")
	in, err := openFolderFlag(c, "input")
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := openFolderFlag(c, "output")
	if err != nil {
		return err
	}
	defer out.Close()
	if err := folder.CheckFolders(in, out); err != nil {
		return segmentError(err)
	}
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	pal, err := outputPalette(c, settings)
	if err != nil {
		return err
	}
	opts := folder.Options{Palette: pal, Shard: spec, SkipExisting: skipExisting(c, spec),
		Notef: func(f string, a ...any) { notef(c, "segtune: "+f, a...) }}
	if c.Bool("overlay") {
		opts.Overlay = &imageio.OverlayOptions{Alpha: c.Float64("overlay-alpha"), Skip: []uint8{0}}
	}
	listing, err := folder.List(ctx, in, out, opts)
	if err != nil {
		return segmentError(err)
	}
	seg, err := openSegmenter(c, modelPath, settings)
	if err != nil {
		return err
	}
	defer seg.Close()
	batch := clampBatch(c, seg, c.Int("batch"))
	opts.Batch = batch
	if err := checkPaletteCovers(pal, seg, modelPath); err != nil {
		return err
	}
	if !c.Bool("quiet") && term.IsTerminal(int(os.Stderr.Fd())) { // with the progress bar
		fmt.Fprintln(os.Stderr, "segtune:", imageio.DecoderInfo())
	}
	bar := progress(c, listing.Total, "segment")
	opts.Progress = func(done int) { bar.Set(done) }
	rep, err := folder.Run(ctx, seg, in, out, listing, opts)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", modelPath, err)
	}
	if err := printSegmentReport(c, rep, seg.Session.Device, batch, spec); err != nil {
		return err
	}
	if len(rep.Failures) > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", len(rep.Failures), rep.Total), 1)
	}
	return nil
}

// openSegmenter loads the model (checking it, resolving external data inside
// its folder) and opens a session on it.
func openSegmenter(c *cli.Context, modelPath string, settings imageio.Sidecar) (*inference.Segmenter, error) {
	m, _, err := resolve.Load(modelPath)
	if err != nil {
		return nil, err
	}
	ct, err := resolve.ReadContract(modelPath, m, settings)
	if err != nil {
		return nil, err
	}
	if note := ct.BinaryNote(); note != "" {
		notef(c, "segtune: %s: %s", modelPath, note)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	seg, err := inference.Open(data, ct, *settings.Preprocess, sessionOptions(c))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	if err := applyDense(c, seg); err != nil {
		seg.Close()
		return nil, err
	}
	return seg, nil
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

func printFailures(w io.Writer, fs []pipeline.Failure) {
	for _, f := range fs {
		fmt.Fprintf(w, "segtune: skipped %s: %v\n", f.Path, f.Err)
	}
}

// segmentError names the flag of the folder a listing error is about.
func segmentError(err error) error {
	var oe *folder.OverlapError
	if errors.As(err, &oe) {
		return cli.Exit(fmt.Sprintf("--output %s and --input %s overlap (one is inside the other, or they are the same folder): "+
			"segment would write among the images it reads; choose an output folder outside the input that does not hold it", oe.Out, oe.In), 2)
	}
	var fe *folder.FolderError
	if errors.As(err, &fe) {
		flag := "input"
		if fe.Output {
			flag = "output"
		}
		return flagError(flag, fe.Folder, fe.Err)
	}
	var ne *folder.NoImagesError
	if errors.As(err, &ne) {
		return cli.Exit(ne.Error(), 1)
	}
	return err
}

// printSegmentReport prints what segment did: as JSON with --json, else
// the failures and one line.
func printSegmentReport(c *cli.Context, rep pipeline.Report, device string, batch int, spec shard.Spec) error {
	outDir := c.String("output")
	sum := segmentSummary{
		Images: rep.Total, Succeeded: rep.Succeeded, Skipped: rep.Skipped, Failed: len(rep.Failures),
		Failures: []failureJSON{}, Seconds: rep.Elapsed.Seconds(), InferSeconds: rep.InferElapsed.Seconds(),
		Device: device, Decoders: imageio.DecoderInfo(), Batch: batch, Output: outDir,
	}
	if spec.Sharded() {
		sum.Shard = spec.String()
	}
	if sum.Seconds > 0 {
		sum.ImagesPerSec = float64(rep.Succeeded) / sum.Seconds
	}
	for _, f := range rep.Failures {
		sum.Failures = append(sum.Failures, failureJSON{Path: f.Path, Error: f.Err.Error()})
	}
	if c.Bool("json") {
		return printJSON(os.Stdout, sum)
	}
	printFailures(os.Stderr, rep.Failures)
	what := ""
	if spec.Sharded() {
		what = fmt.Sprintf(" (shard %s)", spec)
	}
	if rep.Skipped > 0 {
		what += fmt.Sprintf(" (%d already done)", rep.Skipped)
	}
	fmt.Printf("segmented %d of %d images%s into %s in %.1fs (%.2f images/s, %s, batch %d)\n",
		sum.Succeeded, sum.Images, what, outDir, sum.Seconds, sum.ImagesPerSec, sum.Device, batch)
	return nil
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

// checkPaletteCovers refuses a palette with fewer colours than the model
// has classes.
func checkPaletteCovers(pal imageio.Palette, seg *inference.Segmenter, modelPath string) error {
	var pe *inference.PaletteError
	if err := seg.CheckPalette(pal); errors.As(err, &pe) {
		return fmt.Errorf("%s predicts %d classes; the palette has %d colours", modelPath, pe.Classes, pe.Colours)
	} else if err != nil {
		return err
	}
	return nil
}
