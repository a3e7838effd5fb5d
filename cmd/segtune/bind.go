package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

// Flag groups bind straight into the config structs of the libraries that
// own the settings: a flag is declared once, here, with its name and help;
// its default is the library's (Value: def.Field) and its Destination the
// field, so an action reads the struct, never c.String("…"). To add a
// setting: give the library's config the field (json key, validation that
// returns a setting.Error), then add one flag to the group with
// Destination: &cfg.Field. TestBoundFlags checks each flag sets one field.
// (Commands not yet converted still read their flags by name.)

// deepLabFlags set `segtune model new`'s network (models.DeepLabConfig)
// and the file it goes to.
func deepLabFlags(cfg *models.DeepLabConfig, out *string) []cli.Flag {
	def := models.DefaultDeepLabConfig()
	*cfg = def
	return []cli.Flag{
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "ONNX file to write", Destination: out},
		&cli.IntFlag{Name: "classes", Value: def.Classes, Usage: "output classes", Destination: &cfg.Classes},
		&cli.Float64Flag{Name: "width", Value: def.Width, Usage: "width multiplier of the backbone", Destination: &cfg.Width},
		&cli.IntFlag{Name: "output-stride", Value: def.OutputStride, Usage: "encoder stride, 16 or 8", Destination: &cfg.OutputStride},
		&cli.Uint64Flag{Name: "seed", Value: def.Seed, Usage: "seed of the initial weights", Destination: &cfg.Seed},
	}
}

// synthFlags set `segtune data synth`'s data set (synth.Config), the
// folder it goes to and its size as HxW text (parsed into cfg by the
// action).
func synthFlags(cfg *synth.Config, out, size *string) []cli.Flag {
	def := synth.DefaultConfig()
	*cfg = def
	return []cli.Flag{
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "folder (images/{train,val}, masks/{train,val})", Destination: out},
		&cli.Uint64Flag{Name: "seed", Value: def.Seed, Destination: &cfg.Seed},
		&cli.IntFlag{Name: "train", Value: def.Train, Usage: "training images", Destination: &cfg.Train},
		&cli.IntFlag{Name: "val", Value: def.Val, Usage: "validation images", Destination: &cfg.Val},
		&cli.StringFlag{Name: "size", Value: "96x128", Usage: "image size HxW", Destination: size},
	}
}

// given says which settings, by key, the command line (or --config) gave,
// for the libraries whose rules differ for a setting left at its default.
func given(c *cli.Context) func(key string) bool {
	return func(key string) bool { return c.IsSet(strings.TrimPrefix(flagOf(key), "--")) }
}
