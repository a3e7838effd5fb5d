package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/inference"
)

// denseFlags are segment's and eval's flags for sliding-window inference
// and test-time augmentation (inference.Dense); with prefix "val-" they
// are finetune's, for its validation.
func denseFlags(prefix string) []cli.Flag {
	category := "Large images"
	what := func(string) string { return "" }
	if prefix != "" {
		category = "Validation"
		what = func(flag string) string { return "validate as segment --" + flag + " does: " }
	}
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "tile", Usage: what("tile") + "run the model on HxW windows of the preprocessed image (with --resize none, of the image itself) and blend their scores", Category: category},
		&cli.Float64Flag{Name: prefix + "overlap", Value: 0.25, Usage: "fraction of a --" + prefix + "tile window shared with its neighbour, in [0, 1)", Category: category},
		&cli.StringFlag{Name: prefix + "tta", Usage: what("tta") + "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: category},
	}
}

// denseSettings reads the flags denseFlags(prefix) declares; nil when none
// asks for dense inference. Each bad value is refused naming its flag.
func denseSettings(c *cli.Context, prefix string) (*inference.Dense, error) {
	tileFlag, overlapFlag, ttaFlag := prefix+"tile", prefix+"overlap", prefix+"tta"
	tile, tta := c.String(tileFlag), c.String(ttaFlag)
	if tile == "" && c.IsSet(overlapFlag) {
		return nil, fmt.Errorf("--%s: needs --%s", overlapFlag, tileFlag)
	}
	if tile == "" && tta == "" {
		return nil, nil
	}
	d := &inference.Dense{}
	if tile != "" {
		h, w, err := parseSize(tile)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", tileFlag, err)
		}
		d.TileHeight, d.TileWidth = h, w
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("--%s: %w", tileFlag, err)
		}
	}
	d.Overlap = c.Float64(overlapFlag)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("--%s: %w", overlapFlag, err)
	}
	if err := d.ParseTTA(tta); err != nil {
		return nil, fmt.Errorf("--%s %q: %w", ttaFlag, tta, err)
	}
	return d, nil
}

// applyDense switches seg to dense inference when the flags ask for it.
func applyDense(c *cli.Context, seg *inference.Segmenter) error {
	d, err := denseSettings(c, "")
	if err != nil || d == nil {
		return err
	}
	if err := seg.SetDense(d); err != nil {
		return fmt.Errorf("--tile/--tta: %w", err)
	}
	return nil
}
