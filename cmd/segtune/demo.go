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

	"github.com/segtune/segtune/demo"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
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
	sc := demo.Data(c.Int("train"), c.Int("val"))
	dataDir := filepath.Join(out, "data")
	fmt.Printf("1/5 generating %d+%d synthetic images in %s\n", sc.Train, sc.Val, dataDir)
	if _, err := synth.Generate(dataDir, sc); err != nil {
		return fmt.Errorf("%w (remove %s to start afresh)", err, dataDir)
	}

	// 2. The built-in pretrained model.
	entry, modelPath, err := demo.WriteModel(out)
	if err != nil {
		return err
	}
	side := entry.Sidecar()
	fmt.Printf("2/5 built-in model %s: %s\n", entry.Name, modelPath)

	// 3. Two fine-tunes, identical but for the regularizer.
	base := demo.Config(modelPath, dataDir, sc, entry, c.Int("epochs"), c.Int("threads"))
	runs := demo.Runs(base, c.Float64("alpha"))
	var hist []history.Run
	table := &history.Table{Header: demo.TableHeader}
	for i, r := range runs {
		dir := filepath.Join(out, fmt.Sprintf("run%d", i+1))
		fmt.Printf("3/5 fine-tuning (%s) into %s\n", r.Name, dir)
		run, row, err := demo.Finetune(ctx, r.Name, r.Config, dir, printEpoch)
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
		{Name: runs[0].Name, Model: filepath.Join(out, "run1", finetune.ModelFile)},
		{Name: runs[1].Name, Model: filepath.Join(out, "run2", finetune.ModelFile)},
	}, predictor(c)); err != nil {
		return fmt.Errorf("%s: %w", sheet, err)
	}

	if err := demoDeploy(c, out, dataDir, side); err != nil {
		return err
	}
	fmt.Printf("\ncurves: %s   samples: %s   done in %.0fs\n", curves, sheet, time.Since(start).Seconds())
	return nil
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
	rep, err := folder.SegmentFiles(c.Context, seg, paths, segDir, folder.Options{Palette: side.Palette, Overlay: &imageio.OverlayOptions{Alpha: 0.5, Skip: []uint8{0}}, Batch: 8})
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
