package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "the main job end to end: fine-tune the built-in model with and without the size regularizer",
		Description: "Generates a synthetic data set whose objects range from 0.05% to 25% of the image (a\n" +
			"different seed and more camouflage than the one segtune-synth was trained on), fine-tunes\n" +
			"the embedded segtune-synth DeepLabV3+ on it twice — baseline and with the F1 size\n" +
			"regularizer (Algorithm 1) —, prints mean IoU overall and on images with small and large\n" +
			"objects, draws both runs' curves, segments the validation images with the regularised\n" +
			"model and exports it to ONNX. Under a minute on two CPU cores.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: "out/demo", Usage: "output folder"},
			&cli.IntFlag{Name: "epochs", Value: 4, Usage: "epochs per run"},
			&cli.Float64Flag{Name: "alpha", Value: demoAlpha, Usage: "weight of the regularizer in the second run, relative to the cross entropy (finetune's --alpha; every other regularizer setting at finetune's default)"},
			&cli.IntFlag{Name: "train", Value: 160, Usage: "training images to generate"},
			&cli.IntFlag{Name: "val", Value: 80, Usage: "validation images to generate"},
			threadsFlag,
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	start := time.Now()
	out := c.String("out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// 1. The data: a new draw of the synthetic world, harder than the one
	// the model was pretrained on.
	sc := synth.DefaultConfig()
	sc.Seed, sc.Train, sc.Val, sc.Camouflage, sc.Noise = 7, c.Int("train"), c.Int("val"), 0.3, 12
	dataDir := filepath.Join(out, "data")
	fmt.Printf("1/5 generating %d+%d synthetic images in %s\n", sc.Train, sc.Val, dataDir)
	if _, err := synth.Generate(dataDir, sc); err != nil {
		return fmt.Errorf("%w (remove %s to start afresh)", err, dataDir)
	}

	// 2. The built-in pretrained model.
	entry, modelPath, err := demoModel(out)
	if err != nil {
		return err
	}
	side := entry.Sidecar()
	fmt.Printf("2/5 built-in model %s: %s\n", entry.Name, modelPath)

	// 3. Two fine-tunes, identical but for the regularizer.
	base := demoConfig(c, modelPath, dataDir, sc, entry)
	reg := base
	reg.Regularizer = finetune.DefaultRegularizer(c.Float64("alpha"))
	runs := []struct {
		name string
		cfg  finetune.Config
	}{{"baseline", base}, {fmt.Sprintf("F1 α=%g", c.Float64("alpha")), reg}}
	var hist []history.Run
	table := &history.Table{Header: []string{"run", "val mIoU", "small", "large", "gap", "size F1", "s/epoch", "projections"}}
	for i, r := range runs {
		dir := filepath.Join(out, fmt.Sprintf("run%d", i+1))
		run, row, err := demoFinetune(ctx, r.name, r.cfg, dir)
		if err != nil {
			return err
		}
		hist = append(hist, run)
		table.Rows = append(table.Rows, row)
	}
	fmt.Println()
	table.WriteTo(os.Stdout)
	d, err := pairedIoU(c, base, filepath.Join(out, "run1", finetune.ModelFile), filepath.Join(out, "run2", finetune.ModelFile))
	if err != nil {
		return err
	}
	fmt.Printf("\n%s\n", demoVerdict(d))
	curves := filepath.Join(out, "curves.png")
	if err := history.PlotPNG(curves, hist, history.PlotOptions{Title: "segtune demo: baseline vs F1 size regularizer"}); err != nil {
		return err
	}
	sheet := filepath.Join(out, samples.File)
	if err := samples.Write(sheet, base, side.Palette, []samples.Column{
		{Name: runs[0].name, Model: filepath.Join(out, "run1", finetune.ModelFile)},
		{Name: runs[1].name, Model: filepath.Join(out, "run2", finetune.ModelFile)},
	}, predictor(c)); err != nil {
		return fmt.Errorf("%s: %w", sheet, err)
	}

	if err := demoDeploy(c, out, dataDir, side); err != nil {
		return err
	}
	fmt.Printf("\ncurves: %s   samples: %s   done in %.0fs\n", curves, sheet, time.Since(start).Seconds())
	return nil
}

// demoFinetune runs one of the demo's fine-tunes into dir (afresh) and
// returns its history and its row of the demo's table.
func demoFinetune(ctx context.Context, name string, cfg finetune.Config, dir string) (history.Run, []string, error) {
	os.RemoveAll(dir) // a demo starts afresh
	fmt.Printf("3/5 fine-tuning (%s) into %s\n", name, dir)
	var last finetune.EpochInfo
	_, err := finetune.Train(ctx, cfg, dir, false, finetune.Hooks{OnEpoch: func(e finetune.EpochInfo) {
		last = e
		printEpoch(e)
	}})
	if err != nil {
		return history.Run{}, nil, err
	}
	recs, err := history.Read(filepath.Join(dir, finetune.HistoryFile))
	if err != nil {
		return history.Run{}, nil, err
	}
	epochs := history.Filter(recs, history.KindEpoch)
	e := epochs[len(epochs)-1]
	var secs, proj float64
	for _, x := range epochs {
		secs += x.Seconds
		if p, ok := x.Value("reg_projections"); ok {
			proj += p
		}
	}
	val := func(k string) string {
		if v, ok := e.Value(k); ok {
			return fmt.Sprintf("%.4f", v)
		}
		return "—"
	}
	miou := "—"
	if last.Val != nil && last.Val.MeanIoU != nil {
		miou = fmt.Sprintf("%.4f", *last.Val.MeanIoU)
	}
	row := []string{name, miou, val("val_miou_small"), val("val_miou_large"),
		val("val_miou_gap"), val("size_f1_val"), fmt.Sprintf("%.1f", secs/float64(len(epochs))), fmt.Sprintf("%.0f", proj)}
	return history.Run{Name: name, Records: recs}, row, nil
}

// demoDeploy segments the validation images with the regularised model
// (step 4) and exports its best checkpoint (step 5).
func demoDeploy(c *cli.Context, out, dataDir string, side imageio.Sidecar) error {
	refined := filepath.Join(out, "run2", finetune.ModelFile)
	seg, err := openSegmenter(c, refined, side)
	if err != nil {
		return err
	}
	defer seg.Close()
	paths, err := imageio.ListImages(filepath.Join(dataDir, "images", "val"))
	if err != nil {
		return err
	}
	segDir := filepath.Join(out, "segmented")
	rep, err := segmentFolder(seg, paths, segDir, side.Palette, &imageio.OverlayOptions{Alpha: 0.5, Skip: []uint8{0}}, 8, func(int) {})
	if err != nil {
		return err
	}
	fmt.Printf("\n4/5 segmented %d validation images into %s (masks, overlays/)\n", rep.Succeeded, segDir)

	// 5. The refined network, exported.
	exported := filepath.Join(out, "refined.onnx")
	if _, err := finetune.Export(filepath.Join(out, "run2", "best.ckpt"), "", exported); err != nil {
		return err
	}
	fmt.Printf("5/5 exported the regularised model to %s\n", exported)
	return nil
}

// demoConfig is the baseline fine-tune of the demo: the built-in model at
// modelPath on the synthetic data of dataDir, drawn with sc.
func demoConfig(c *cli.Context, modelPath, dataDir string, sc synth.Config, entry models.Entry) finetune.Config {
	abs, _ := filepath.Abs(modelPath)
	base := finetune.Config{
		Network: finetune.NetworkSpec{BaseModel: abs},
		Train:   finetune.DataSpec{Images: filepath.Join(dataDir, "images", "train"), Masks: filepath.Join(dataDir, "masks", "train")},
		Val:     finetune.DataSpec{Images: filepath.Join(dataDir, "images", "val"), Masks: filepath.Join(dataDir, "masks", "val")},
		Ignore:  255, ClassNames: synth.ClassNames, Trainable: "all",
		Batch: 8, Height: sc.Height, Width: sc.Width, Epochs: c.Int("epochs"),
		Optimizer: "adam", LR: 1e-3, Schedule: "poly:0.9", Seed: 1,
		Augment:    data.Augment{ScaleMin: 0.75, ScaleMax: 1.25, Flip: true},
		Preprocess: entry.Preprocess, Threads: c.Int("threads"),
		// Both runs draw balanced batches of whole images, as finetune
		// --alpha does, so that they differ only in the regularizer.
		Balanced: true,
	}
	base.Augment.WholeFrame = true
	return base
}

// demoModel writes the built-in pretrained model and its sidecar into out.
func demoModel(out string) (models.Entry, string, error) {
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		return entry, "", err
	}
	modelPath := filepath.Join(out, entry.File)
	if err := atomicfile.Write(modelPath, models.SynthModel, 0o644); err != nil {
		return entry, "", err
	}
	side := entry.Sidecar()
	return entry, modelPath, side.Save(imageio.SidecarPath(modelPath))
}
