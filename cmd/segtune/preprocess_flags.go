package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/resolve"
)

// preprocessOptions are what the preprocessing and model-output flags
// set: a --preprocess file and, field by field, the flags' layer over the
// model's own settings (modelSettings).
type preprocessOptions struct {
	resolve.Preprocessing
	names []string // the flags' names, for set
}

// preprocessFlags bind how images become model inputs into o.
func preprocessFlags(o *preprocessOptions) []cli.Flag {
	const pre, out = "Preprocessing", "Model output"
	ranges := o.Pre.CheckRanges // imageio's ranges, checked once a flag of them is set
	flags := []cli.Flag{
		&cli.StringFlag{Name: "preprocess", Usage: "JSON file with preprocessing settings (see README)", Category: pre, Destination: &o.File},
		&cli.StringFlag{Name: "size", Usage: "model input size HxW (e.g. 513x513); implies --resize stretch", Category: pre, Destination: &o.Size},
		&cli.GenericFlag{Name: "resize", Usage: "stretch, letterbox, none (native size) or scale", Category: pre, Value: &cliflag.Enum[imageio.ResizePolicy]{Dest: &o.Pre.Resize}},
		&cli.Float64Flag{Name: "scale", Usage: "scale images by this factor (implies --resize scale)", Category: pre, Destination: &o.Pre.ScaleFactor, Action: checkedBy[float64](ranges)},
		&cli.IntFlag{Name: "multiple-of", Usage: "with --scale: round sizes up to a multiple of N", Category: pre, Destination: &o.Pre.MultipleOf, Action: checkedBy[int](ranges)},
		&cli.BoolFlag{Name: "plus-one", Usage: "with --scale: add 1 to rounded sizes (DeepLab's 8k+1 sizes)", Category: pre, Destination: &o.Pre.PlusOne},
		&cli.GenericFlag{Name: "interpolation", Usage: "bilinear or nearest", Category: pre, Value: &cliflag.Enum[imageio.Interpolation]{Dest: &o.Pre.Interpolation}},
		&cli.BoolFlag{Name: "bgr", Usage: "feed channels in BGR order", Category: pre, Destination: &o.BGR},
		&cli.BoolFlag{Name: "nhwc", Usage: "feed NHWC tensors instead of NCHW", Category: pre, Destination: &o.NHWC},
		&cli.GenericFlag{Name: "mean", Usage: "per-channel mean, e.g. 0.485,0.456,0.406 (on 0..1 values)", Category: pre, Value: &cliflag.Floats{Dest: &o.Pre.Mean}, Action: checkedBy[any](ranges)},
		&cli.GenericFlag{Name: "std", Usage: "per-channel std, e.g. 0.229,0.224,0.225", Category: pre, Value: &cliflag.Floats{Dest: &o.Pre.Std}, Action: checkedBy[any](ranges)},
		&cli.Float64Flag{Name: "value-scale", Usage: "x*scale+offset on 0..255 values (e.g. 0.00784313725490196)", Category: pre, Destination: &o.Pre.ValueScale, Action: checkedBy[float64](ranges)},
		&cli.Float64Flag{Name: "value-offset", Usage: "see --value-scale (e.g. -1)", Category: pre, Destination: &o.Pre.ValueOffset, Action: checkedBy[float64](ranges)},
		&cli.GenericFlag{Name: "output-layout", Usage: "nchw or nhwc: the model output's layout where the graph does not tell (default: read from the graph, else --nhwc's)", Category: out,
			Value: &cliflag.Enum[imageio.Layout]{Dest: &o.Out.Layout, Norm: strings.ToUpper}},
		&cli.Float64Flag{Name: "threshold", Usage: "sigmoid heads: probability a channel must exceed to claim a pixel; below it, class 0 (background)", DefaultText: "0.5", Category: out, Destination: &o.Out.Threshold,
			Action: func(*cli.Context, float64) error { o.ThresholdGiven = true; return nil }},
	}
	o.names = nil
	for _, f := range flags {
		o.names = append(o.names, f.Names()...)
	}
	return flags
}

// set are the preprocessing flags set on the command line (or by
// --config), as --name.
func (o *preprocessOptions) set(c *cli.Context) []string {
	var set []string
	for _, name := range o.names {
		if c.IsSet(name) {
			set = append(set, "--"+name)
		}
	}
	return set
}

// modelSettings are the settings to run the model at modelPath with:
// what it brings, a --preprocess file and the preprocessing flags, in
// increasing precedence, with the layers they came from, which it notes
// (resolve.Preprocessing.Settings).
func (o *preprocessOptions) modelSettings(c *cli.Context, modelPath string) (resolve.Settings, error) {
	p := o.Preprocessing
	p.Given = o.set(c)
	return p.Settings(modelPath, noticeWriter(c), os.Stderr, flagOf)
}
