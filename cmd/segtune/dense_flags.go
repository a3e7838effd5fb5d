package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/inference"
)

// denseFlags are segment's and eval's flags for sliding-window inference
// and test-time augmentation (inference.Dense).
func denseFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tile", Usage: "run the model on HxW windows of the preprocessed image (with --resize none, of the image itself) and blend their scores", Category: "Large images"},
		&cli.Float64Flag{Name: "overlap", Value: 0.25, Usage: "fraction of a --tile window shared with its neighbour, in [0, 1)", Category: "Large images"},
		&cli.StringFlag{Name: "tta", Usage: "test-time augmentation averaging scores: flip, scales=S1,S2,… or both (flip,scales=0.75,1,1.25)", Category: "Large images"},
	}
}

// denseSettings reads --tile, --overlap and --tta; nil when none asks for
// dense inference. Each bad value is refused naming its flag.
func denseSettings(c *cli.Context) (*inference.Dense, error) {
	tile, tta := c.String("tile"), c.String("tta")
	if tile == "" && tta == "" {
		if c.IsSet("overlap") {
			return nil, fmt.Errorf("--overlap: needs --tile")
		}
		return nil, nil
	}
	d := &inference.Dense{}
	if tile != "" {
		h, w, err := parseSize(tile)
		if err != nil {
			return nil, fmt.Errorf("--tile: %w", err)
		}
		d.TileHeight, d.TileWidth = h, w
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("--tile: %w", err)
		}
	} else if c.IsSet("overlap") {
		return nil, fmt.Errorf("--overlap: needs --tile")
	}
	d.Overlap = c.Float64("overlap")
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("--overlap: %w", err)
	}
	if err := d.ParseTTA(tta); err != nil {
		return nil, fmt.Errorf("--tta %q: %w", tta, err)
	}
	return d, nil
}

// applyDense switches seg to dense inference when the flags ask for it.
func applyDense(c *cli.Context, seg *inference.Segmenter) error {
	d, err := denseSettings(c)
	if err != nil || d == nil {
		return err
	}
	if err := seg.SetDense(d); err != nil {
		return fmt.Errorf("--tile/--tta: %w", err)
	}
	return nil
}
