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
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

func demoCommand() *cli.Command {
	o := &demo.Options{Out: "out/demo", Epochs: 4, Alpha: demo.Alpha, Train: 160, Val: 80}
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
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: o.Out, Usage: "output folder", Destination: &o.Out},
			&cli.IntFlag{Name: "epochs", Value: o.Epochs, Usage: "epochs per run", Destination: &o.Epochs},
			&cli.Float64Flag{Name: "alpha", Value: o.Alpha, Destination: &o.Alpha, Usage: "weight of the regularizer in the second run, relative to the cross entropy (finetune's --alpha; every other regularizer setting at finetune's default)"},
			&cli.IntFlag{Name: "train", Value: o.Train, Usage: "training images to generate", Destination: &o.Train},
			&cli.IntFlag{Name: "val", Value: o.Val, Usage: "validation images to generate", Destination: &o.Val},
			threadsFlag(&o.Threads),
		},
		Action: func(c *cli.Context) error { return runDemo(c, *o) },
	}
}

func runDemo(c *cli.Context, o demo.Options) error {
	if err := loadRuntime(c, ""); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	session := resolve.SegmenterOptions{Session: sessionFor(c, runtime.Options{Threads: o.Threads})}
	o.OnEpoch = printEpoch
	o.Open = func(model string, s imageio.Sidecar) (*inference.Segmenter, error) {
		return openModel(c, model, s, session)
	}
	return demo.RunAll(ctx, os.Stdout, o)
}
