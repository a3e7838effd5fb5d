package main

import (
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate/preprocsearch"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
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
	cfg := &o.Find
	sidecar := imageio.SidecarPath(path)
	if cfg.WriteSidecar {
		if err := cfg.RefuseExistingSidecar(sidecar); err != nil {
			return cli.Exit(withFlagNames(err).Error(), 2)
		}
	}
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	own, err := resolve.ModelSettings(path, "", imageio.Sidecar{}) // the model's own settings, no flags
	if err != nil {
		return err
	}
	req, cands, err := searchRequest(c, o, path, own.Sidecar)
	if err != nil {
		return err
	}
	l, err := openLabelled(c, cfg.Data, o.Layout, o.LabelMap, &cfg.Images, &cfg.Masks)
	if err != nil {
		return err
	}
	defer l.Close()
	req.Set, req.Images, req.Masks = l.set, l.images, l.masks
	res, err := preprocsearch.Search(c.Context, req, cands)
	if err != nil {
		return pairsExit(err)
	}
	if asJSON {
		err = printJSON(os.Stdout, res)
	} else {
		res.WriteText(os.Stdout, flagOf)
	}
	if err != nil || !cfg.WriteSidecar {
		return err
	}
	chosen := res.Scores[res.Chosen]
	if err := cfg.SaveSidecar(sidecar, own.Sidecar, chosen); err != nil {
		return err
	}
	notef(c, "segtune: wrote %s (%s)", sidecar, chosen.Name)
	return nil
}

// searchRequest is the search of the model at path, whose own settings
// are own, and its candidates (preprocsearch.Config.Request).
func searchRequest(c *cli.Context, o *infoOptions, path string, own imageio.Sidecar) (preprocsearch.Request, []preprocsearch.Candidate, error) {
	masks, _, err := readMasks(o.LabelMap, o.MaskPalette)
	if err != nil {
		return preprocsearch.Request{}, nil, err
	}
	open := func(m string, s imageio.Sidecar) (*inference.Segmenter, error) {
		return resolve.OpenSegmenter(m, s, resolve.SegmenterOptions{Session: sessionFor(c, o.Session)})
	}
	req, cands, err := o.Find.Request(path, own, masks, open)
	req.Progress = func(done, total int, cand preprocsearch.Candidate) {
		notef(c, "segtune: scoring %d/%d: %s", done+1, total, cand.Name)
	}
	return req, cands, err
}
