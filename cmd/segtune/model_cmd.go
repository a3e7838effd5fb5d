package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/resolve"
)

func modelCommand() *cli.Command {
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
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "ONNX file to write"},
					&cli.IntFlag{Name: "classes", Value: 3, Usage: "output classes"},
					&cli.Float64Flag{Name: "width", Value: 0.5, Usage: "width multiplier of the backbone"},
					&cli.IntFlag{Name: "output-stride", Value: 16, Usage: "encoder stride, 16 or 8"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the initial weights"},
				},
				Action: func(c *cli.Context) error {
					cfg := models.DefaultDeepLabConfig()
					cfg.Classes, cfg.Width, cfg.OutputStride, cfg.Seed = c.Int("classes"), c.Float64("width"), c.Int("output-stride"), c.Uint64("seed")
					out := c.String("out")
					params, side, err := models.WriteNewDeepLab(out, cfg)
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
	return &cli.Command{
		Name:  "data",
		Usage: "generate, check and convert data sets",
		Subcommands: []*cli.Command{dataCheckCommand(), dataConvertCommand(), dataSplitCommand(), {
			Name: "synth",
			Usage: "a synthetic segmentation set (discs and squares on textured backgrounds) whose objects\n" +
				"range over two orders of magnitude in size, deterministic from --seed",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "folder (images/{train,val}, masks/{train,val})"},
				&cli.Uint64Flag{Name: "seed", Value: 1},
				&cli.IntFlag{Name: "train", Value: 300, Usage: "training images"},
				&cli.IntFlag{Name: "val", Value: 100, Usage: "validation images"},
				&cli.StringFlag{Name: "size", Value: "96x128", Usage: "image size HxW"},
			},
			Action: func(c *cli.Context) error {
				cfg := synth.DefaultConfig()
				cfg.Seed, cfg.Train, cfg.Val = c.Uint64("seed"), c.Int("train"), c.Int("val")
				var err error
				if cfg.Height, cfg.Width, err = imageio.ParseSize(c.String("size")); err != nil {
					return err
				}
				if _, err := synth.Generate(c.String("out"), cfg); err != nil {
					return err
				}
				fmt.Printf("wrote %d training and %d validation images with masks to %s (classes %v)\n", cfg.Train, cfg.Val, c.String("out"), synth.ClassNames)
				return nil
			},
		}},
	}
}
