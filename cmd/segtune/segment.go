package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/pipeline"
	"github.com/segtune/segtune/internal/segmenter"
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
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "folder of images"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "folder for masks"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.BoolFlag{Name: "overlay", Usage: "also write colour overlays of the masks on the images"},
			&cli.Float64Flag{Name: "alpha", Value: 0.5, Usage: "overlay opacity of the mask colours"},
			&cli.StringFlag{Name: "palette", Usage: "palette image (e.g. camvid12_palette.png); default: the model's sidecar, else Pascal VOC colours"},
			deviceFlag, threadsFlag, jsonFlag,
		}, preprocessFlags()...),
		Action: runSegment,
	}
}

// segmentSummary is what `segment --json` prints.
type segmentSummary struct {
	Images       int           `json:"images"`
	Succeeded    int           `json:"succeeded"`
	Failed       int           `json:"failed"`
	Failures     []failureJSON `json:"failures"`
	Seconds      float64       `json:"seconds"`
	ImagesPerSec float64       `json:"images_per_s"`
	InferSeconds float64       `json:"infer_seconds"`
	Device       string        `json:"device"`
	Batch        int           `json:"batch"`
	Output       string        `json:"output"`
}

type failureJSON struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func runSegment(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	modelPath, inDir, outDir := c.String("model"), c.String("input"), c.String("output")
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	pal := settings.Palette
	if f := c.String("palette"); f != "" {
		if pal, err = imageio.ReadPalette(f); err != nil {
			return err
		}
	}
	paths, err := imageio.ListImages(inDir)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return cli.Exit(fmt.Sprintf("no images (%s) in %s", strings.Join(imageio.ImageExtensions, " "), inDir), 1)
	}
	if err := checkDistinctStems(paths); err != nil {
		return err
	}
	if err := guardSegmentOutput(inDir, outDir, paths, c.Bool("overlay")); err != nil {
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
		ov = &imageio.OverlayOptions{Alpha: c.Float64("alpha"), Skip: []uint8{0}}
	}
	if n := seg.Contract.Classes; n > len(pal) && len(pal) > 0 {
		return fmt.Errorf("%s predicts %d classes; the palette has %d colours", modelPath, n, len(pal))
	}
	bar := progress(c, len(paths), "segment")
	rep, err := segmentFolder(seg, paths, outDir, pal, ov, batch, func(done int) { bar.Set(done) })
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", modelPath, err)
	}
	sum := segmentSummary{
		Images: rep.Total, Succeeded: rep.Succeeded, Failed: len(rep.Failures),
		Failures: []failureJSON{}, Seconds: rep.Elapsed.Seconds(), InferSeconds: rep.InferElapsed.Seconds(),
		Device: seg.Session.Device, Batch: batch, Output: outDir,
	}
	if sum.Seconds > 0 {
		sum.ImagesPerSec = float64(rep.Succeeded) / sum.Seconds
	}
	for _, f := range rep.Failures {
		sum.Failures = append(sum.Failures, failureJSON{Path: f.Path, Error: f.Err.Error()})
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, sum); err != nil {
			return err
		}
	} else {
		printFailures(os.Stderr, rep.Failures)
		fmt.Printf("segmented %d of %d images into %s in %.1fs (%.2f images/s, %s, batch %d)\n",
			sum.Succeeded, sum.Images, outDir, sum.Seconds, sum.ImagesPerSec, sum.Device, batch)
	}
	if len(rep.Failures) > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", len(rep.Failures), rep.Total), 1)
	}
	return nil
}

// openSegmenter loads the model (checking it, resolving external data inside
// its folder) and opens a session on it.
func openSegmenter(c *cli.Context, modelPath string, settings imageio.Sidecar) (*segmenter.Segmenter, error) {
	m, _, err := loadModel(modelPath)
	if err != nil {
		return nil, err
	}
	ct, err := readContract(modelPath, m, settings)
	if err != nil {
		return nil, err
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	seg, err := segmenter.Open(data, ct, *settings.Preprocess, sessionOptions(c))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	return seg, nil
}

func clampBatch(c *cli.Context, seg *segmenter.Segmenter, batch int) int {
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
func segmentFolder(seg *segmenter.Segmenter, paths []string, outDir string, pal imageio.Palette,
	ov *imageio.OverlayOptions, batch int, progress func(done int)) (pipeline.Report, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return pipeline.Report{}, err
	}
	if ov != nil {
		if err := os.MkdirAll(filepath.Join(outDir, "overlays"), 0o755); err != nil {
			return pipeline.Report{}, err
		}
	}
	finish := func(r segmenter.Result) error {
		name := stem(r.Path) + ".png"
		if err := imageio.WriteMaskPNG(filepath.Join(outDir, name), r.Labels, r.Width, r.Height, pal); err != nil {
			return err
		}
		if ov != nil {
			return imageio.WriteOverlayPNG(filepath.Join(outDir, "overlays", name), r.Image, r.Labels, pal, *ov)
		}
		return nil
	}
	return pipeline.Run(paths, seg.Stages(imageio.Decoder{}, finish), pipeline.Config{
		Batch:    batch,
		Progress: func(done, _ int) { progress(done) },
	})
}
