package main

import (
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate/preprocsearch"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/resolve"
)

// findPreprocessingFlags bind info's flags for --find-preprocessing into
// o; its data flags are eval's.
func findPreprocessingFlags(o *infoOptions) []cli.Flag {
	const cat = "Finding the preprocessing"
	def := preprocsearch.DefaultConfig()
	cfg := &o.Find
	*cfg = def
	return slices.Concat([]cli.Flag{
		&cli.BoolFlag{Name: "find-preprocessing", Category: cat, Usage: "score candidate preprocessings (value range 0..1, -1..1, 0..255, ImageNet mean/std; RGB or BGR; the current geometry and the model's fixed size or the images' own; the current settings) on a sample of labelled images (--images and --masks, or --data) and print them, best first", Destination: &cfg.Find},
		&cli.StringFlag{Name: "images", Category: cat, Usage: "folder of labelled images", Destination: &cfg.Images},
		&cli.StringFlag{Name: "masks", Category: cat, Usage: "folder of masks with the same base names", Destination: &cfg.Masks},
		&cli.StringFlag{Name: "data", Category: cat, Usage: "labelled data folder in any known layout (its val split where it has one), instead of --images and --masks", Destination: &cfg.Data},
		&cli.StringFlag{Name: "label-map", Category: cat, Usage: `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`, Destination: &o.LabelMap},
		maskPaletteFlag(&o.MaskPalette),
		&cli.IntFlag{Name: "ignore", Value: def.Ignore, Category: cat, Usage: "mask label left out of scoring", Destination: &cfg.Ignore},
		&cli.IntFlag{Name: "sample", Value: def.Sample, Category: cat, Usage: "labelled images to score each candidate on, evenly spread over the pairs (0: all)", Destination: &cfg.Sample},
		&cli.BoolFlag{Name: "write-sidecar", Category: cat, Usage: "write the chosen preprocessing into the model's sidecar, MODEL.segtune.json (not over an existing one without --force)", Destination: &cfg.WriteSidecar},
		&cli.BoolFlag{Name: "force", Category: cat, Usage: "with --write-sidecar: replace an existing sidecar", Destination: &cfg.Force},
	}, sessionFlags(&o.Session), dataLayoutFlags(&o.Layout, "--data"))
}

// findPreprocessing runs --find-preprocessing on the model at path.
func findPreprocessing(c *cli.Context, o *infoOptions, path string, asJSON bool) error {
	job := preprocsearch.Job{Config: o.Find, Model: path, Session: sessionFor(c, o.Session),
		Openers: labelledOpeners(c, o.Layout, o.LabelMap), Print: printer(asJSON), Notes: noticeWriter(c), Name: flagOf}
	if err := job.CheckSidecar(); err != nil {
		return err
	}
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	own, err := resolve.ModelSettings(path, "", imageio.Sidecar{}) // the model's own settings, no flags
	if err != nil {
		return err
	}
	if job.MaskOptions, _, err = readMasks(o.LabelMap, o.MaskPalette); err != nil {
		return err
	}
	return job.Run(c.Context, own.Sidecar)
}
