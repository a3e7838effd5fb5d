package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/stats"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models/synth"
)

// Alpha is the demo's default regularizer weight (finetune's alpha): the
// one the CamVid study selected (docs/study.md), with c_λ at its default.
const Alpha = 3.0

// Options are the settings of a demo run.
type Options struct {
	// Out is the folder everything is written into.
	Out string
	// Epochs is each fine-tune's length; Train and Val the synthetic
	// images generated; Threads ONNX Runtime's threads (0: its default).
	Epochs, Train, Val, Threads int
	// Alpha is the regularised run's regularizer weight.
	Alpha float64
	// Open opens a model for inference with settings (on the caller's
	// device): the demo segments and scores images with it.
	Open func(model string, settings imageio.Sidecar) (*inference.Segmenter, error)
	// OnEpoch, when set, is called after each epoch of each fine-tune.
	OnEpoch func(finetune.EpochInfo)
}

// RunAll runs the whole demo into o.Out, narrating its five steps, the runs' table
// and the verdict on w: the data, the built-in model, the two fine-tunes,
// the regularised model segmenting the validation images, and its export.
func RunAll(ctx context.Context, w io.Writer, o Options) error {
	start := time.Now()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	// A new draw of the synthetic world, harder than the one the model
	// was pretrained on.
	sc := Data(o.Train, o.Val)
	dataDir := filepath.Join(o.Out, "data")
	fmt.Fprintf(w, "1/5 generating %d+%d synthetic images in %s\n", sc.Train, sc.Val, dataDir)
	if _, err := synth.Generate(dataDir, sc); err != nil {
		return fmt.Errorf("%w (remove %s to start afresh)", err, dataDir)
	}
	entry, modelPath, err := WriteModel(o.Out)
	if err != nil {
		return err
	}
	side := entry.Sidecar()
	fmt.Fprintf(w, "2/5 built-in model %s: %s\n", entry.Name, modelPath)

	base := Config(modelPath, dataDir, sc, entry, o.Epochs, o.Threads)
	runs := Runs(base, o.Alpha)
	hist, err := finetuneBoth(ctx, w, o, runs)
	if err != nil {
		return err
	}
	models := []string{filepath.Join(runDir(o.Out, 1), finetune.ModelFile), filepath.Join(runDir(o.Out, 2), finetune.ModelFile)}
	d, err := PairedIoU(ctx, base, models[0], models[1], o.predictor())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", Verdict(d))
	curves := filepath.Join(o.Out, "curves.png")
	if err := history.PlotPNG(curves, hist, history.PlotOptions{Title: "segtune demo: baseline vs F1 size regularizer"}); err != nil {
		return err
	}
	sheet := filepath.Join(o.Out, samples.File)
	cols := []samples.Column{{Name: runs[0].Name, Model: models[0]}, {Name: runs[1].Name, Model: models[1]}}
	if err := samples.Write(sheet, base, side.Palette, cols, o.predictor()); err != nil {
		return fmt.Errorf("%s: %w", sheet, err)
	}
	if err := segmentAndExport(ctx, w, o, dataDir, side); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncurves: %s   samples: %s   done in %.0fs\n", curves, sheet, time.Since(start).Seconds())
	return nil
}

// runDir is the folder of the demo's run i (1: baseline, 2: regularised).
func runDir(out string, i int) string { return filepath.Join(out, fmt.Sprintf("run%d", i)) }

// finetuneBoth runs the two fine-tunes into OUT/run1 and OUT/run2 and
// prints their table.
func finetuneBoth(ctx context.Context, w io.Writer, o Options, runs []Run) ([]history.Run, error) {
	onEpoch := o.OnEpoch
	if onEpoch == nil {
		onEpoch = func(finetune.EpochInfo) {}
	}
	var hist []history.Run
	table := &history.Table{Header: TableHeader}
	for i, r := range runs {
		dir := runDir(o.Out, i+1)
		fmt.Fprintf(w, "3/5 fine-tuning (%s) into %s\n", r.Name, dir)
		run, row, err := Finetune(ctx, r.Name, r.Config, dir, onEpoch)
		if err != nil {
			return nil, err
		}
		hist = append(hist, run)
		table.Rows = append(table.Rows, row)
	}
	fmt.Fprintln(w)
	_, err := table.WriteTo(w)
	return hist, err
}

// predictor segments images with o.Open.
func (o Options) predictor() samples.Predictor {
	return func(model string, pre imageio.Preprocess, paths []string) (map[string][]uint8, error) {
		seg, err := o.Open(model, imageio.Sidecar{Preprocess: &pre})
		if err != nil {
			return nil, err
		}
		defer seg.Close()
		return samples.Predict(seg, paths)
	}
}

// segmentAndExport segments the validation images with the regularised model (step
// 4) and exports its best checkpoint (step 5).
func segmentAndExport(ctx context.Context, w io.Writer, o Options, dataDir string, side imageio.Sidecar) error {
	seg, err := o.Open(filepath.Join(runDir(o.Out, 2), finetune.ModelFile), side)
	if err != nil {
		return err
	}
	defer seg.Close()
	paths, err := imageio.ListImages(filepath.Join(dataDir, "images", "val"))
	if err != nil {
		return err
	}
	segDir := filepath.Join(o.Out, "segmented")
	overlay := &imageio.OverlayOptions{Alpha: 0.5, Skip: []uint8{0}}
	rep, err := folder.SegmentFiles(ctx, seg, paths, segDir, folder.Options{Palette: side.Palette, Overlay: overlay, Batch: 8})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n4/5 segmented %d validation images into %s (masks, overlays/)\n", rep.Succeeded, segDir)
	exported := filepath.Join(o.Out, "refined.onnx")
	if err := finetune.Export(filepath.Join(runDir(o.Out, 2), checkpoint.BestName), "", exported); err != nil {
		return err
	}
	fmt.Fprintf(w, "5/5 exported the regularised model to %s\n", exported)
	return nil
}

// PairedIoU scores models a and b image by image on cfg's validation set
// (metrics.PairedMeanIoU), predicting with predict: each image's mean
// IoU under b minus under a, with the 95 % t interval over the images.
func PairedIoU(ctx context.Context, cfg finetune.Config, a, b string, predict samples.Predictor) (stats.Interval, error) {
	dc := cfg.Val.DataConfig()
	dc.Ignore, dc.CacheBytes = cfg.Ignore, -1
	ds, _, err := data.Open(ctx, dc)
	if err != nil {
		return stats.Interval{}, err
	}
	paths := make([]string, ds.Len())
	for id := range paths {
		e, _ := ds.Example(id)
		paths[id] = e.Image
	}
	pa, err := predict(a, cfg.Preprocess, paths)
	if err != nil {
		return stats.Interval{}, fmt.Errorf("%s: %w", a, err)
	}
	pb, err := predict(b, cfg.Preprocess, paths)
	if err != nil {
		return stats.Interval{}, fmt.Errorf("%s: %w", b, err)
	}
	images := func(yield func(metrics.PairedPrediction, error) bool) {
		for id, path := range paths {
			s, err := ds.Load(id)
			if err != nil {
				yield(metrics.PairedPrediction{}, err)
				return
			}
			if !yield(metrics.PairedPrediction{Name: path, A: pa[path], B: pb[path], Target: s.Labels}, nil) {
				return
			}
		}
	}
	return metrics.PairedMeanIoU(images, ds.NumClasses(), ds.Ignore())
}

// Verdict is the demo's last word on the regularizer: what it changed on
// the validation images (d, per-image mean IoU of the regularised run
// minus the baseline's), and whether that is more than the images'
// spread (one training seed each, so not a claim about seeds; that is
// docs/study.md's job).
func Verdict(d stats.Interval) string {
	what := map[string]string{
		"gain":                     "the regularized model segments these images better",
		"loss":                     "the regularized model segments these images worse",
		"no detectable difference": "the regularizer changed nothing detectable on these images",
		"too few pairs":            "too few validation images to tell",
	}[d.Verdict()]
	return fmt.Sprintf("verdict: %s: per-image mean IoU, F1 run − baseline, %s (95 %% interval over the %d validation images; one training seed each, so it speaks for this seed only)",
		what, d, d.N)
}
