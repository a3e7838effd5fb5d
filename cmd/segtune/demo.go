package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/cmd/segtune/demo"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
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
			&cli.Float64Flag{Name: "alpha", Value: demo.Alpha, Usage: "weight of the regularizer in the second run, relative to the cross entropy (finetune's --alpha; every other regularizer setting at finetune's default)"},
			&cli.IntFlag{Name: "train", Value: 160, Usage: "training images to generate"},
			&cli.IntFlag{Name: "val", Value: 80, Usage: "validation images to generate"},
			threadsFlag(new(int)),
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo.RunAll(ctx, os.Stdout, demo.Options{
		Out: c.String("out"), Epochs: c.Int("epochs"), Train: c.Int("train"), Val: c.Int("val"),
		Threads: c.Int("threads"), Alpha: c.Float64("alpha"), OnEpoch: printEpoch,
		Open: func(model string, s imageio.Sidecar) (*inference.Segmenter, error) { return openSegmenter(c, model, s) },
	})
}
