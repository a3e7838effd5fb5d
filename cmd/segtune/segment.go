package main

import (
	"context"
	"fmt"
	"image"
	"io"
	"iter"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
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
		}, append(append(append(maskColourFlags(), shardFlags()...), preprocessFlags()...), denseFlags()...)...),
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
	if err := guardFolders(in, out); err != nil {
		return err
	}
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	pal, err := outputPalette(c, settings)
	if err != nil {
		return err
	}
	inputs, total, err := segmentListing(c, in, out, spec)
	if err != nil {
		return err
	}
	seg, err := openSegmenter(c, modelPath, settings)
	if err != nil {
		return err
	}
	defer seg.Close()
	batch := clampBatch(c, seg, c.Int("batch"))
	var ov *imageio.OverlayOptions
	if c.Bool("overlay") {
		ov = &imageio.OverlayOptions{Alpha: c.Float64("overlay-alpha"), Skip: []uint8{0}}
	}
	if err := checkPaletteCovers(pal, seg, modelPath); err != nil {
		return err
	}
	job := &segmentJob{ctx: ctx, seg: seg, in: in, out: out, pal: pal, ov: ov, batch: batch,
		skip: skipExisting(c, spec), notef: func(f string, a ...any) { notef(c, f, a...) }}
	if !c.Bool("quiet") && term.IsTerminal(int(os.Stderr.Fd())) { // with the progress bar
		fmt.Fprintln(os.Stderr, "segtune:", imageio.DecoderInfo())
	}
	bar := progress(c, total, "segment")
	rep, err := job.run(inputs, total, func(done int) { bar.Set(done) })
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
	m, _, err := loadModel(modelPath)
	if err != nil {
		return nil, err
	}
	ct, err := readContract(modelPath, m, settings)
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

func clampBatch(c *cli.Context, seg *inference.Segmenter, batch int) int {
	if batch < 1 {
		batch = 1
	}
	if seg.FixedBatch > 0 && batch > seg.FixedBatch {
		notef(c, "segtune: the model's batch size is fixed at %d; using --batch %d", seg.FixedBatch, seg.FixedBatch)
		batch = seg.FixedBatch
	}
	return batch
}

func printFailures(w io.Writer, fs []pipeline.Failure) {
	for _, f := range fs {
		fmt.Fprintf(w, "segtune: skipped %s: %v\n", f.Path, f.Err)
	}
}

func stem(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// checkDistinctStems refuses inputs whose masks would overwrite each other
// (a.jpg and a.png both give a.png).
func checkDistinctStems(paths []string) error {
	seen := map[string]string{}
	for _, p := range paths {
		s := stem(p)
		if prev, ok := seen[s]; ok {
			return fmt.Errorf("%s and %s would both be written as %s.png; rename one", prev, p, s)
		}
		seen[s] = p
	}
	return nil
}

// segmentFolder writes a palette-PNG mask (and, with ov, an overlay under
// overlays/) into outDir for each image of paths.
func segmentFolder(seg *inference.Segmenter, paths []string, outDir string, pal imageio.Palette,
	ov *imageio.OverlayOptions, batch int, progress func(done int)) (pipeline.Report, error) {
	out, err := storage.OpenFolder(context.Background(), outDir)
	if err != nil {
		return pipeline.Report{}, err
	}
	in, err := storage.OpenFolder(context.Background(), ".")
	if err != nil {
		return pipeline.Report{}, err
	}
	job := &segmentJob{ctx: context.Background(), seg: seg, in: in, out: out, pal: pal, ov: ov, batch: batch}
	return job.run(func(yield func(string, error) bool) {
		for _, p := range paths {
			if !yield(p, nil) {
				return
			}
		}
	}, len(paths), progress)
}

// segmentJob segments images from in (local paths or bucket URLs as
// items) into masks (and overlays) in out.
type segmentJob struct {
	ctx     context.Context
	seg     *inference.Segmenter
	in, out *storage.Folder
	pal     imageio.Palette
	ov      *imageio.OverlayOptions
	batch   int
	// skip keeps outputs that exist and check out (see done).
	skip  bool
	notef func(format string, args ...any)
}

// ioWorkers is the prepare (download and decode) or finish (encode and
// upload) concurrency: more than the cores for a bucket, whose requests
// wait on the network.
func ioWorkers(remote bool) int {
	n := goruntime.GOMAXPROCS(0)
	if remote {
		n = max(n, 8)
	}
	return n
}

func (j *segmentJob) run(inputs iter.Seq2[string, error], total int, progress func(done int)) (pipeline.Report, error) {
	var overlays *storage.Folder
	if err := j.out.MkdirAll(); err != nil {
		return pipeline.Report{}, err
	}
	if j.ov != nil {
		overlays = j.out.Sub("overlays")
		if err := overlays.MkdirAll(); err != nil {
			return pipeline.Report{}, err
		}
	}
	dec := imageio.Decoder{}
	read := dec.ReadFile
	if !j.in.IsLocal() {
		read = func(p string) (image.Image, error) {
			r, err := j.in.Open(j.ctx, baseName(p))
			if err != nil {
				return nil, fmt.Errorf("read image: %w", err)
			}
			defer r.Close()
			return dec.Decode(r, p)
		}
	}
	finish := func(r inference.Result) error {
		name := stem(r.Path) + ".png"
		mask, err := imageio.MaskImage(r.Labels, r.Width, r.Height, j.pal)
		if err != nil {
			return fmt.Errorf("write mask %s: %w", j.out.Path(name), err)
		}
		if err := j.out.Write(j.ctx, name, func(w io.Writer) error { return imageio.EncodePNG(w, mask) }); err != nil {
			return err
		}
		if j.ov != nil {
			img, err := imageio.Overlay(r.Image, r.Labels, j.pal, *j.ov)
			if err != nil {
				return err
			}
			return overlays.Write(j.ctx, name, func(w io.Writer) error { return imageio.EncodePNG(w, img) })
		}
		return nil
	}
	st := j.seg.StagesFrom(read, finish)
	if j.skip {
		prepare := st.Prepare
		st.Prepare = func(p string) (pipeline.Prepared, error) {
			if j.done(p, overlays) {
				return pipeline.Prepared{}, pipeline.ErrSkip
			}
			return prepare(p)
		}
	}
	return pipeline.RunSeq(inputs, total, st, pipeline.Config{
		Batch:          j.batch,
		PrepareWorkers: ioWorkers(!j.in.IsLocal()),
		FinishWorkers:  ioWorkers(!j.out.IsLocal()),
		Progress:       func(done, _ int) { progress(done) },
	})
}

// done reports whether the image at p already has its outputs: the mask
// (and the overlay, if asked for) exist, decode completely, are the
// image's size, and the mask is a palette PNG of the model's classes. The
// name alone proves nothing: an output that does not check out is made
// again (with a notice).
func (j *segmentJob) done(p string, overlays *storage.Folder) bool {
	name := stem(p) + ".png"
	dec := imageio.Decoder{}
	decode := func(f *storage.Folder) (image.Image, bool) {
		r, err := f.Open(j.ctx, name)
		if err != nil {
			if !storage.IsNotExist(err) && j.notef != nil {
				j.notef("segtune: cannot read %s (%v): segmenting %s again", f.Path(name), err, p)
			}
			return nil, false
		}
		defer r.Close()
		img, err := dec.Decode(r, f.Path(name))
		if err != nil {
			if j.notef != nil {
				j.notef("segtune: %v: segmenting %s again", err, p)
			}
			return nil, false
		}
		return img, true
	}
	m, ok := decode(j.out)
	if !ok {
		return false
	}
	again := func(why string, args ...any) bool {
		if j.notef != nil {
			j.notef("segtune: %s %s: segmenting %s again", j.out.Path(name), fmt.Sprintf(why, args...), p)
		}
		return false
	}
	mask, isMask := m.(*image.Paletted)
	if !isMask {
		return again("is not a palette PNG")
	}
	if k := j.seg.Contract.Classes; k > 0 {
		for _, v := range mask.Pix {
			if int(v) >= k {
				return again("holds label %d, and the model has %d classes", v, k)
			}
		}
	}
	r, err := j.openInput(p)
	if err != nil {
		return false // the pipeline reports the image
	}
	cfg, _, err := dec.Config(r, p)
	r.Close()
	if err != nil {
		return false
	}
	if b := mask.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return again("is %dx%d (WxH), the image %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	if j.ov != nil {
		o, ok := decode(overlays)
		if !ok {
			return false
		}
		if b := o.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
			return again("has an overlay of %dx%d (WxH), the image is %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height)
		}
	}
	return true
}

func (j *segmentJob) openInput(p string) (io.ReadCloser, error) {
	if j.in.IsLocal() {
		r, _, err := regfile.Open(p)
		return r, err
	}
	return j.in.Open(j.ctx, baseName(p))
}

// segmentListing lists the images this shard segments. A local folder is
// listed whole, checked and guarded against overwriting its images; a
// bucket folder is streamed twice, once here to check names and count,
// once into the pipeline, never held. The output folder is checked too.
func segmentListing(c *cli.Context, in, out *storage.Folder, spec shard.Spec) (iter.Seq2[string, error], int, error) {
	ctx, inDir, outDir := c.Context, c.String("input"), c.String("output")
	var inputs iter.Seq2[string, error]
	var total, all int
	if in.IsLocal() {
		paths, err := imageio.ListImages(inDir)
		if err != nil {
			return nil, 0, err
		}
		all = len(paths)
		if all == 0 {
			return nil, 0, cli.Exit(fmt.Sprintf("no images (%s) in %s", strings.Join(imageio.ImageExtensions, " "), inDir), 1)
		}
		if err := checkDistinctStems(paths); err != nil {
			return nil, 0, err
		}
		if out.IsLocal() {
			if err := guardSegmentOutput(outDir, paths, c.Bool("overlay"), spec); err != nil {
				return nil, 0, err
			}
		}
		var mine []string
		for _, p := range paths {
			if spec.Owns(filepath.Base(p)) {
				mine = append(mine, p)
			}
		}
		total = len(mine)
		inputs = func(yield func(string, error) bool) {
			for _, p := range mine {
				if !yield(p, nil) {
					return
				}
			}
		}
	} else {
		if err := in.CheckList(ctx); err != nil {
			return nil, 0, flagError("input", in, err)
		}
		for p, err := range segmentInputs(ctx, in, shard.All) { // the check pass
			if err != nil {
				return nil, 0, flagError("input", in, err)
			}
			all++
			if spec.Owns(baseName(p)) {
				total++
			}
		}
		inputs = segmentInputs(ctx, in, spec)
	}
	if all == 0 {
		return nil, 0, cli.Exit(fmt.Sprintf("no images (%s) in %s", strings.Join(imageio.ImageExtensions, " "), in), 1)
	}
	if !out.IsLocal() {
		if err := out.CheckAccess(ctx); err != nil {
			return nil, 0, flagError("output", out, err)
		}
	} else if !in.IsLocal() && !spec.Sharded() {
		atomicfile.RemoveStale(outDir)
		atomicfile.RemoveStale(filepath.Join(outDir, "overlays"))
	}
	return inputs, total, nil
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
	if n := seg.Contract.Classes; n > len(pal) && len(pal) > 0 {
		return fmt.Errorf("%s predicts %d classes; the palette has %d colours", modelPath, n, len(pal))
	}
	return nil
}
