package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/resolve"
)

func modelCommand() *cli.Command {
	var (
		net models.DeepLabConfig
		out string
	)
	return &cli.Command{
		Name:  "model",
		Usage: "list known pretrained models, or build a new network to train from scratch",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "the registry of known pretrained models and where their files are, the Hugging Face Hub catalogue and what is cached",
				Action: func(c *cli.Context) error {
					if err := resolve.WriteModelList(os.Stdout); err != nil {
						return err
					}
					fmt.Println("\nEvery --model takes these names, hf:OWNER/REPO[/FILE.onnx][@REVISION] and https:// URLs; a file is recognised by its SHA-256 wherever it is.")
					return nil
				},
			},
			{
				Name:  "new",
				Usage: "write a freshly initialised DeepLabV3+ (MobileNetV2-style backbone) and its sidecar",
				Flags: deepLabFlags(&net, &out),
				Action: func(c *cli.Context) error {
					params, side, err := models.WriteNewDeepLab(out, net)
					if err != nil {
						return err
					}
					fmt.Printf("wrote %s (%d parameters) and %s\n", out, params, side)
					return nil
				},
			},
		},
	}
}

func dataCommand() *cli.Command {
	var (
		cfg       synth.Config
		out, size string
	)
	return &cli.Command{
		Name:  "data",
		Usage: "generate, check and convert data sets",
		Subcommands: []*cli.Command{dataCheckCommand(), dataConvertCommand(), dataSplitCommand(), {
			Name: "synth",
			Usage: "a synthetic segmentation set (discs and squares on textured backgrounds) whose objects\n" +
				"range over two orders of magnitude in size, deterministic from --seed",
			Flags: synthFlags(&cfg, &out, &size),
			Action: func(c *cli.Context) error {
				var err error
				if cfg.Height, cfg.Width, err = imageio.ParseSize(size); err != nil {
					return setting.Usage(setting.Messagef("{size}: %w", err))
				}
				if _, err := synth.Generate(out, cfg); err != nil {
					return err
				}
				fmt.Printf("wrote %d training and %d validation images with masks to %s (classes %v)\n", cfg.Train, cfg.Val, out, synth.ClassNames)
				return nil
			},
		}},
	}
}
