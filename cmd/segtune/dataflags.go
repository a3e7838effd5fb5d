package main

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/storage"
)

// dataLayoutFlags are --format, --split and --coco-crowd, which say how to
// read the data folder given to flag (--data, --calibrate).
func dataLayoutFlags(flag string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "layout of " + flag + ": " + strings.Join(datalayout.Formats(), ", ") + " (default: detected)"},
		&cli.StringFlag{Name: "split", Usage: "split of " + flag + " to read (train, val, test, or a VOC list's name)"},
		&cli.StringFlag{Name: "coco-crowd", Value: "ignore", Usage: "COCO annotations marked iscrowd in " + flag + ": ignore (left out of the loss and the scores) or class (painted with their category's class)"},
	}
}

// layoutOptions reads how to open a data folder: --format, --split and
// --coco-crowd.
func layoutOptions(c *cli.Context) (datalayout.Options, error) {
	opt := datalayout.Options{Format: c.String("format"), Split: c.String("split")}
	switch v := c.String("coco-crowd"); v {
	case "", "ignore":
	case "class":
		opt.CrowdAsClass = true
	default:
		return opt, cli.Exit(fmt.Sprintf("--coco-crowd %q: must be ignore or class", v), 2)
	}
	return opt, nil
}

// dataFlag is --data for the commands that read one split of labelled data.
var dataFlag = &cli.StringFlag{Name: "data", Usage: "labelled data folder in any known layout (see --format), instead of --images and --masks"}

// maskPaletteFlag is --mask-palette, for RGB colour masks.
var maskPaletteFlag = &cli.StringFlag{Name: "mask-palette", Usage: "read RGB colour masks: a palette image (colour i is class i) or a CVAT labelmap.txt (which also names the classes)"}

// maskFlags reads how masks are read (--label-map, --mask-palette), and
// the classes a CVAT labelmap names.
func maskFlags(c *cli.Context) (imageio.MaskOptions, []string, error) {
	var masks imageio.MaskOptions
	var err error
	if v := c.String("label-map"); v != "" {
		if masks.Map, err = imageio.ParseLabelMap(v); err != nil {
			return masks, nil, cli.Exit(fmt.Sprintf("--label-map: %v", err), 2)
		}
	}
	pal, names, err := maskPalette(c)
	masks.Palette = pal
	return masks, names, err
}

// classNames is --class-names's list (nil without it).
func classNames(c *cli.Context) []string {
	if v := c.String("class-names"); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// ifSet is the value of a flag the user set, read with get (nil if
// unset).
func ifSet[T any](c *cli.Context, name string, get func(string) T) *T {
	if !c.IsSet(name) {
		return nil
	}
	v := get(name)
	return &v
}

// maskPalette reads --mask-palette: the colours of colour masks' classes
// and, from a CVAT labelmap, their names (nil without the flag).
func maskPalette(c *cli.Context) (imageio.Palette, []string, error) {
	path := c.String("mask-palette")
	if path == "" {
		return nil, nil, nil
	}
	pal, names, err := datalayout.ReadMaskPalette(path)
	if err != nil {
		return nil, nil, cli.Exit(fmt.Sprintf("--mask-palette: %v", err), 2)
	}
	return pal, names, nil
}

// openDataFlag lists the samples of --data's split: --split, or else
// fallback where the layout has it (val for eval), and says in one line
// which layout it took and how many pairs it found.
func openDataFlag(c *cli.Context, fallback string) (*datalayout.Set, error) {
	root := c.String("data")
	if storage.IsURL(root) {
		return nil, cli.Exit(fmt.Sprintf("--data %s: this command reads a local folder; copy the data set first (segtune finetune mirrors a URL itself)", root), 2)
	}
	opt, err := layoutOptions(c)
	if err != nil {
		return nil, err
	}
	set, err := datalayout.OpenDefault(root, opt, fallback)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--data: %v", err), 2)
	}
	noteDataSet(c, set)
	return set, nil
}

// noteDataSet says which layout was taken and, where the format's labels
// need a label map preset that --label-map does not give, which one.
func noteDataSet(c *cli.Context, set *datalayout.Set) {
	notef(c, "segtune: %s", set.Summary())
	if lossy := set.LossyMasks(); len(lossy) > 0 {
		notef(c, "segtune: warning: %d masks are JPEG files (%s, …): JPEG's lossy compression changes the labels along every edge; save masks as PNG",
			len(lossy), lossy[0])
	}
	if len(set.Classes) > 0 {
		notef(c, "segtune: %s classes, label 0 up: %s", set.Format, strings.Join(set.Classes, ","))
	}
	if p := set.LabelPreset; p != "" && c.String("label-map") == "" && p != "voc" {
		notef(c, "segtune: note: %s masks usually need --label-map %s", set.Format, p)
	}
}

// dataExit is the exit for an error reading --data: 1 for unmatched
// files (named), 2 for a folder that cannot be read as data.
func dataExit(err error) error {
	var ue *datalayout.UnmatchedError
	if errors.As(err, &ue) {
		return cli.Exit(fmt.Sprintf("--data: %v", err), 1)
	}
	return cli.Exit(fmt.Sprintf("--data: %v", err), 2)
}

// setFlags sets flags to values, in a stable order.
func setFlags(c *cli.Context, values map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if err := c.Set(k, values[k]); err != nil {
			return err
		}
	}
	return nil
}

// finetuneData reads --data for finetune: the training split (--split,
// default train where the layout has splits) and, where the layout has
// one, the val split for validation. Unmatched files stop the run before
// any work unless --skip-bad.
func finetuneData(c *cli.Context, root string, vs *datalayout.ValSplit) (train, val finetune.DataSpec, err error) {
	opt, err := layoutOptions(c)
	if err != nil {
		return train, val, err
	}
	fd, err := finetune.OpenDataSplit(root, opt, vs, c.Bool("skip-bad"))
	for _, set := range fd.Sets {
		noteDataSet(c, set)
	}
	var ve *finetune.ValSplitExistsError
	if errors.As(err, &ve) {
		return train, val, cli.Exit(fmt.Sprintf("--val-split: %v", err), 2)
	}
	if err != nil {
		return train, val, dataExit(err)
	}
	if vs != nil {
		notef(c, "segtune: --val-split %g: %d of %d images held out for validation (by %s, seed %d), listed in %s",
			vs.Fraction, fd.HeldOut, fd.Kept+fd.HeldOut, vs.By, vs.Seed, filepath.Join(c.String("out"), finetune.SplitFile))
	}
	if !fd.Val.Given() {
		notef(c, "segtune: %s has no validation split other than the training data: training without validation", root)
	}
	return fd.Train, fd.Val, nil
}
