package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// Transitional (#42): the shared groups read by flag name, for the
// commands that do not yet bind them (unboundCommands). Each command's
// conversion stops calling these; the file goes when the list is empty.
// The bound forms: loadRuntime, sessionFor, openModel,
// preprocessOptions.modelSettings, denseOptions.dense, readMasks,
// splitNames, openData, noteData, listCalibration, openFinetuneData,
// shardOptions.resolve, openFolder, newStepBarFor.

func initRuntime(c *cli.Context) error { return loadRuntime(c, c.String("device")) }

func sessionOptions(c *cli.Context) runtime.Options {
	return runtime.Options{Device: c.String("device"), Threads: c.Int("threads"), Log: noticeWriter(c)}
}

func openSegmenter(c *cli.Context, modelPath string, settings imageio.Sidecar) (*inference.Segmenter, error) {
	dense, err := denseSettings(c, "")
	if err != nil {
		return nil, err
	}
	return openModel(c, modelPath, settings, resolve.SegmenterOptions{Session: sessionOptions(c), Dense: dense})
}

func denseSettings(c *cli.Context, prefix string) (*inference.Dense, error) {
	var overlap *float64
	if v := c.Float64(prefix + "overlap"); c.IsSet(prefix + "overlap") {
		overlap = &v
	}
	d, err := inference.ParseDense(c.String(prefix+"tile"), overlap, c.String(prefix+"tta"))
	if err != nil {
		return nil, setting.Rename(err, func(key string) string { return flagOf(prefix + key) })
	}
	return d, nil
}

func modelSettings(c *cli.Context, modelPath string) (imageio.Sidecar, error) {
	s, err := modelSettingsFrom(c, modelPath)
	return s.Sidecar, err
}

func modelSettingsFrom(c *cli.Context, modelPath string) (resolve.Settings, error) {
	flags, err := preprocessSettings(c)
	if err != nil {
		return resolve.Settings{}, err
	}
	s, err := resolve.ModelSettings(modelPath, c.String("preprocess"), flags)
	if err != nil {
		return resolve.Settings{}, err
	}
	var o preprocessOptions
	given := false
	for _, f := range preprocessFlags(&o) {
		given = given || c.IsSet(f.Names()[0])
	}
	noteSettings(c, modelPath, s, given)
	return s, nil
}

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

func layoutOptions(c *cli.Context) (datalayout.Options, error) {
	o := dataLayout{Format: c.String("format"), Split: c.String("split"), Crowd: c.String("coco-crowd")}
	return o.options()
}

func maskFlags(c *cli.Context) (imageio.MaskOptions, []string, error) {
	return readMasks(c.String("label-map"), c.String("mask-palette"))
}

func classNames(c *cli.Context) []string { return splitNames(c.String("class-names")) }

// ifSet is the value of a flag the user set, read with get (nil if
// unset).
func ifSet[T any](c *cli.Context, name string, get func(string) T) *T {
	if !c.IsSet(name) {
		return nil
	}
	v := get(name)
	return &v
}

func openDataFlag(c *cli.Context, fallback string) (*datalayout.Set, error) {
	opt, err := layoutOptions(c)
	if err != nil {
		return nil, err
	}
	return openData(c, c.String("data"), opt, fallback, c.String("label-map"))
}

func noteDataSet(c *cli.Context, set *datalayout.Set) { noteData(c, set, c.String("label-map")) }

func calibrationImages(c *cli.Context, dir string) ([]string, error) {
	opt, err := layoutOptions(c)
	if err != nil {
		return nil, err
	}
	return listCalibration(c, dir, opt, c.String("label-map"))
}

func finetuneData(c *cli.Context, root string, vs *datalayout.ValSplit) (train, val finetune.DataSpec, err error) {
	opt, err := layoutOptions(c)
	if err != nil {
		return train, val, err
	}
	return openFinetuneData(c, root, vs, opt, c.Bool("skip-bad"), c.String("label-map"), c.String("out"))
}

func resolveShard(c *cli.Context) (shard.Spec, error) {
	o := shardOptions{Shard: c.String("shard"), Shards: c.Int("shards")}
	return o.resolve(c)
}

func openFolderFlag(c *cli.Context, flag string, input bool) (*storage.Folder, error) {
	return openFolder(c, flag, c.String(flag), input)
}

func newStepBar(c *cli.Context, total int64) *stepBar { return newStepBarFor(c, total, c.Bool("json")) }

var _ = fmt.Sprint
var _ = strings.ToUpper
var _ = listflag.Floats
