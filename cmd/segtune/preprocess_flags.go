package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/resolve"
)

// preprocessFlags describe how images become model inputs. They override,
// field by field, the model's sidecar (MODEL.segtune.json) and --preprocess.
func preprocessFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "preprocess", Usage: "JSON file with preprocessing settings (see README)", Category: "Preprocessing"},
		&cli.StringFlag{Name: "size", Usage: "model input size HxW (e.g. 513x513); implies --resize stretch", Category: "Preprocessing"},
		&cli.StringFlag{Name: "resize", Usage: "stretch, letterbox, none (native size) or scale", Category: "Preprocessing"},
		&cli.Float64Flag{Name: "scale", Usage: "scale images by this factor (implies --resize scale)", Category: "Preprocessing"},
		&cli.IntFlag{Name: "multiple-of", Usage: "with --scale: round sizes up to a multiple of N", Category: "Preprocessing"},
		&cli.BoolFlag{Name: "plus-one", Usage: "with --scale: add 1 to rounded sizes (DeepLab's 8k+1 sizes)", Category: "Preprocessing"},
		&cli.StringFlag{Name: "interpolation", Usage: "bilinear or nearest", Category: "Preprocessing"},
		&cli.BoolFlag{Name: "bgr", Usage: "feed channels in BGR order", Category: "Preprocessing"},
		&cli.BoolFlag{Name: "nhwc", Usage: "feed NHWC tensors instead of NCHW", Category: "Preprocessing"},
		&cli.StringFlag{Name: "mean", Usage: "per-channel mean, e.g. 0.485,0.456,0.406 (on 0..1 values)", Category: "Preprocessing"},
		&cli.StringFlag{Name: "std", Usage: "per-channel std, e.g. 0.229,0.224,0.225", Category: "Preprocessing"},
		&cli.Float64Flag{Name: "value-scale", Usage: "x*scale+offset on 0..255 values (e.g. 0.00784313725490196)", Category: "Preprocessing"},
		&cli.Float64Flag{Name: "value-offset", Usage: "see --value-scale (e.g. -1)", Category: "Preprocessing"},
		&cli.StringFlag{Name: "output-layout", Usage: "nchw or nhwc: the model output's layout where the graph does not tell (default: read from the graph, else --nhwc's)", Category: "Model output"},
		&cli.Float64Flag{Name: "threshold", Usage: "sigmoid heads: probability a channel must exceed to claim a pixel; below it, class 0 (background)", DefaultText: "0.5", Category: "Model output"},
	}
}

// modelSettings are the settings to run the model at modelPath with:
// what it brings (resolve.ModelSettings), a --preprocess file and the
// preprocessing flags, in increasing precedence; noteSettings says where
// they came from.
func modelSettings(c *cli.Context, modelPath string) (imageio.Sidecar, error) {
	s, err := modelSettingsFrom(c, modelPath)
	return s.Sidecar, err
}

// modelSettingsFrom is modelSettings with the layers they came from.
func modelSettingsFrom(c *cli.Context, modelPath string) (resolve.Settings, error) {
	flags, err := preprocessSettings(c)
	if err != nil {
		return resolve.Settings{}, err
	}
	s, err := resolve.ModelSettings(modelPath, c.String("preprocess"), flags)
	if err != nil {
		return resolve.Settings{}, err
	}
	noteSettings(c, modelPath, s)
	return s, nil
}

// preprocessSettings reads the preprocessing and output flags.
func preprocessSettings(c *cli.Context) (s imageio.Sidecar, err error) {
	var p imageio.Preprocess
	if v := c.String("size"); v != "" {
		h, w, err := imageio.ParseSize(v)
		if err != nil {
			return s, fmt.Errorf("--size: %w", err)
		}
		p.Height, p.Width = h, w
		p.Resize = imageio.ResizeStretch
	}
	if v := c.Float64("scale"); v != 0 {
		p.Resize, p.ScaleFactor = imageio.ResizeScale, v
	}
	if v := c.String("resize"); v != "" {
		p.Resize = imageio.ResizePolicy(v)
	}
	p.MultipleOf = c.Int("multiple-of")
	p.PlusOne = c.Bool("plus-one")
	p.Interpolation = imageio.Interpolation(c.String("interpolation"))
	if c.Bool("bgr") {
		p.ChannelOrder = imageio.BGR
	}
	if c.Bool("nhwc") {
		p.Layout = imageio.NHWC
	}
	if p.Mean, err = listflag.Floats(c.String("mean")); err != nil {
		return s, fmt.Errorf("--mean: %w", err)
	}
	if p.Std, err = listflag.Floats(c.String("std")); err != nil {
		return s, fmt.Errorf("--std: %w", err)
	}
	p.ValueScale = c.Float64("value-scale")
	p.ValueOffset = c.Float64("value-offset")
	out := imageio.OutputSpec{Layout: imageio.Layout(strings.ToUpper(c.String("output-layout"))), Threshold: c.Float64("threshold")}
	if err := out.Validate(); err != nil {
		return s, fmt.Errorf("--output-layout/--threshold: %w", err)
	}
	if c.IsSet("threshold") && !(out.Threshold > 0) {
		return s, fmt.Errorf("--threshold %v: want a probability in (0, 1)", out.Threshold)
	}
	s.Preprocess = &p
	if out != (imageio.OutputSpec{}) { // no empty output spec in the settings a model is exported with
		s.Output = &out
	}
	return s, nil
}
