package main

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/metrics"
	"github.com/segtune/segtune/internal/pipeline"
	"github.com/segtune/segtune/internal/segmenter"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "score a model on labelled images: mean IoU, per-class IoU, pixel accuracy",
		Description: "Pairs the images in --images with the masks in --masks by file name, runs the model,\n" +
			"maps its prediction back to each image's own size and compares it with the mask.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint (its run's settings apply)"},
			&cli.StringFlag{Name: "images", Required: true, Usage: "folder of images"},
			&cli.StringFlag{Name: "masks", Required: true, Usage: "folder of masks with the same base names"},
			&cli.StringFlag{Name: "label-map", Usage: `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`},
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "mask label left out of scoring"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "images per model run"},
			&cli.StringFlag{Name: "size-classes", Usage: "report small and large objects separately: classes whose pixel fraction is the size (e.g. 1)"},
			&cli.Float64Flag{Name: "size-threshold", Usage: "fraction above which an image's object is large (default: a checkpoint's, else the mean over these images)"},
			deviceFlag, threadsFlag, jsonFlag,
		}, preprocessFlags()...),
		Action: runEval,
	}
}

type evalSummary struct {
	metrics.Report
	// Groups holds the scores of images with small and large objects.
	Groups map[string]metrics.Report `json:"groups,omitempty"`
	// SizeGap is large − small mean IoU.
	SizeGap   *float64      `json:"size_gap,omitempty"`
	Threshold float64       `json:"size_threshold,omitempty"`
	Images    int           `json:"images"`
	Failed    int           `json:"failed"`
	Failures  []failureJSON `json:"failures"`
	Seconds   float64       `json:"seconds"`
	Device    string        `json:"device"`
}

func runEval(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	modelPath := c.String("model")
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	if v := c.String("label-map"); v != "" {
		if settings.LabelMap, err = imageio.ParseLabelMap(v); err != nil {
			return fmt.Errorf("--label-map: %w", err)
		}
	}
	ignore := c.Int("ignore")
	if settings.IgnoreLabel != nil && !c.IsSet("ignore") {
		ignore = *settings.IgnoreLabel
	}
	names := settings.Classes
	if v := c.String("class-names"); v != "" {
		names = strings.Split(v, ",")
	}
	pairing, err := imageio.PairDataset(c.String("images"), c.String("masks"))
	if err != nil {
		return err
	}
	if err := pairing.Err(); err != nil {
		return err
	}
	if len(pairing.Pairs) == 0 {
		return cli.Exit("no image/mask pairs found", 1)
	}
	seg, err := openSegmenter(c, modelPath, settings)
	if err != nil {
		return err
	}
	defer seg.Close()
	classes := seg.Contract.Classes
	if classes == 0 {
		classes = max(len(names), 2)
	}
	if len(names) > 0 {
		if err := seg.Contract.CheckClasses(len(names), "--class-names names"); err != nil {
			return fmt.Errorf("%s: %w", modelPath, err)
		}
	}
	maskOf := make(map[string]string, len(pairing.Pairs))
	paths := make([]string, len(pairing.Pairs))
	for i, p := range pairing.Pairs {
		paths[i] = p.Image
		maskOf[p.Image] = p.Mask
	}
	sizeClasses, err := parseInts(c.String("size-classes"))
	if err != nil {
		return fmt.Errorf("--size-classes: %w", err)
	}
	threshold := c.Float64("size-threshold")
	if threshold == 0 && len(sizeClasses) > 0 && isCheckpoint(modelPath) {
		threshold = checkpointSizeThreshold(modelPath)
	}
	var sized []sizedImage
	var mu sync.Mutex
	conf := metrics.NewConfusion(classes, ignore)
	finish := func(r segmenter.Result) error {
		mask, err := imageio.ReadMask(maskOf[r.Path], imageio.MaskOptions{
			Map: settings.LabelMap, Width: r.Width, Height: r.Height,
			NumClasses: classes, Ignore: int32(ignore),
		})
		if err != nil {
			return err
		}
		target, err := mask.Uint8(nil)
		if err != nil {
			return fmt.Errorf("%s: %w", maskOf[r.Path], err)
		}
		local := metrics.NewConfusion(classes, ignore)
		if err := local.Add(r.Labels, target); err != nil {
			return fmt.Errorf("%s: %w", maskOf[r.Path], err)
		}
		mu.Lock()
		conf.Merge(local)
		if len(sizeClasses) > 0 {
			sized = append(sized, sizedImage{fraction: fraction(target, sizeClasses, ignore), conf: local})
		}
		mu.Unlock()
		return nil
	}
	bar := progress(c, len(paths), "eval")
	rep, err := pipeline.Run(paths, seg.Stages(imageio.Decoder{}, finish), pipeline.Config{
		Batch:    clampBatch(c, seg, c.Int("batch")),
		Progress: func(done, _ int) { bar.Set(done) },
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", modelPath, err)
	}
	sum := evalSummary{Report: metrics.NewReport(conf, names), Images: rep.Total, Failed: len(rep.Failures),
		Failures: []failureJSON{}, Seconds: rep.Elapsed.Seconds(), Device: seg.Session.Device}
	for _, f := range rep.Failures {
		sum.Failures = append(sum.Failures, failureJSON{Path: f.Path, Error: f.Err.Error()})
	}
	if len(sized) > 0 {
		sum.Groups, sum.SizeGap, sum.Threshold = sizeGroups(sized, threshold, classes, ignore, names)
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, sum); err != nil {
			return err
		}
	} else {
		printFailures(os.Stderr, rep.Failures)
		sum.Report.WriteText(os.Stdout)
		for _, g := range []string{"small", "large"} {
			if r, ok := sum.Groups[g]; ok && r.MeanIoU != nil {
				fmt.Printf("%-9s  %.4f  (mean IoU of images with %s objects, size threshold %.4g)\n", g, *r.MeanIoU, g, sum.Threshold)
			}
		}
		if sum.SizeGap != nil {
			fmt.Printf("%-9s  %+.4f  (large − small)\n", "size gap", *sum.SizeGap)
		}
		fmt.Printf("%d images scored in %.1fs on %s\n", rep.Succeeded, sum.Seconds, sum.Device)
	}
	if len(rep.Failures) > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", len(rep.Failures), rep.Total), 1)
	}
	return nil
}

// sizedImage is one image's object size and scores, for size groups.
type sizedImage struct {
	fraction float64
	conf     *metrics.Confusion
}

// fraction is the share of labelled pixels that belong to classes.
func fraction(target []uint8, classes []int, ignore int) float64 {
	var in, all int
	for _, t := range target {
		if int(t) == ignore {
			continue
		}
		all++
		for _, c := range classes {
			if int(t) == c {
				in++
				break
			}
		}
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

// sizeGroups splits images at threshold (or, if 0, at their mean object
// size) and scores each group.
func sizeGroups(imgs []sizedImage, threshold float64, classes, ignore int, names []string) (map[string]metrics.Report, *float64, float64) {
	if threshold == 0 {
		for _, im := range imgs {
			threshold += im.fraction
		}
		threshold /= float64(len(imgs))
	}
	small, large := metrics.NewConfusion(classes, ignore), metrics.NewConfusion(classes, ignore)
	for _, im := range imgs {
		if im.fraction > threshold {
			large.Merge(im.conf)
		} else {
			small.Merge(im.conf)
		}
	}
	groups := map[string]metrics.Report{"small": metrics.NewReport(small, names), "large": metrics.NewReport(large, names)}
	var gap *float64
	if s, l := groups["small"].MeanIoU, groups["large"].MeanIoU; s != nil && l != nil {
		g := *l - *s
		gap = &g
	}
	return groups, gap, threshold
}
