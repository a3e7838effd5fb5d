package main

import (
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio/datalayout"
)

// dataOptions are the data commands' settings: the folder and its
// layout, how masks are read, where a conversion goes, data check's
// classes (finetune/data's Config) and report.
type dataOptions struct {
	data, out, classNames string
	layout                dataLayout
	labelMap, maskPalette string
	check                 data.Config
	json                  bool
}

func dataCheckCommand() *cli.Command {
	o := &dataOptions{check: data.Config{Ignore: data.DefaultIgnore}}
	return &cli.Command{
		Name:  "check",
		Usage: "check a labelled data folder: pairs, unmatched and unreadable files, class histogram, object sizes",
		Description: "Finds the layout of --data (or takes --format), pairs every image with its mask, decodes\n" +
			"them all and reports, per split: the pairs found, the files that pair with nothing, the\n" +
			"files that cannot be read or whose mask does not fit its image or its labels fall outside\n" +
			"the classes (--classes), and per class its pixels, the images it is in and the distribution\n" +
			"of its object size (the class's share of an image's labelled pixels). Exits 1 when any file\n" +
			"is named as a problem.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder", Destination: &o.data},
			labelMapFlag(&o.labelMap, `remap mask labels first, e.g. "cityscapes" or "9,10:1;11:255;*:0"`),
			maskPaletteFlag(&o.maskPalette),
			&cli.IntFlag{Name: "classes", Usage: "number of classes: mask values at or above it (other than --ignore) are named (default: the largest value seen + 1)", Destination: &o.check.NumClasses},
			&cli.IntFlag{Name: "ignore", Value: o.check.Ignore, Usage: "mask label that is no class", Destination: &o.check.Ignore},
			classNamesFlag(&o.classNames, "comma-separated class names for the report"),
			jsonFlag(&o.json),
		}, dataLayoutFlags(&o.layout, "--data")...),
		Action: func(c *cli.Context) error { return runDataCheck(c, o) },
	}
}

func runDataCheck(c *cli.Context, o *dataOptions) error {
	masks, labelmap, err := readMasks(o.labelMap, o.maskPalette)
	if err != nil {
		return err
	}
	sets, err := openDataSplits(c, o)
	if err != nil {
		return err
	}
	cfg := o.check
	cfg.LabelMap, cfg.Palette = masks.Map, masks.Palette
	cfg.ClassNames = data.ReportNames(splitNames(o.classNames), labelmap, masks.Map != nil, sets)
	reports, err := data.CheckSplits(c.Context, sets, cfg)
	if err != nil {
		return err
	}
	if o.json {
		if err := printJSON(os.Stdout, reports); err != nil {
			return err
		}
	} else {
		reports.WriteText(os.Stdout)
	}
	// After the report, which names the files that pair with nothing.
	if err := datalayout.RequirePairs(o.data, sets); err != nil {
		return cli.Exit("--data "+err.Error(), 1)
	}
	if bad := reports.Bad(); bad > 0 {
		return cli.Exit(fmt.Sprintf("data check: %d files named above need attention", bad), 1)
	}
	return nil
}

func dataConvertCommand() *cli.Command {
	o := &dataOptions{}
	return &cli.Command{
		Name:  "convert",
		Usage: "write a labelled data folder of any known layout as canonical images/SPLIT and masks/SPLIT folders",
		Description: "Reads every split of --data (or --split's) and writes, in --out, OUT/images/SPLIT/NAME.EXT (the\n" +
			"image file as it is) and OUT/masks/SPLIT/NAME.png (the labels, after --label-map, as a palette\n" +
			"PNG whose indices are the labels; training and validation become train and val); a layout without splits goes to OUT/images and OUT/masks.\n" +
			"NAME is the image's name, prefixed with its sub-folders where names repeat. --out must be new\n" +
			"or empty and outside --data; every file is written atomically. Unmatched files stop it before\n" +
			"anything is written.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder", Destination: &o.data},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "new or empty folder for images/ and masks/", Destination: &o.out},
			labelMapFlag(&o.labelMap, `remap mask labels on the way, e.g. "cityscapes"`),
			maskPaletteFlag(&o.maskPalette),
		}, dataLayoutFlags(&o.layout, "--data")...),
		Action: func(c *cli.Context) error { return runDataConvert(c, o) },
	}
}

func runDataConvert(c *cli.Context, o *dataOptions) error {
	masks, _, err := readMasks(o.labelMap, o.maskPalette)
	if err != nil {
		return err
	}
	if err := datalayout.CheckConvertOutput(o.data, o.out); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	sets, err := openDataSplits(c, o) // every split is listed and checked before anything is written
	if err != nil {
		return err
	}
	for _, set := range sets {
		if err := set.Err(); err != nil {
			return dataExit(err)
		}
	}
	if err := datalayout.RequirePairs(o.data, sets); err != nil {
		return cli.Exit("--data "+err.Error(), 1)
	}
	var bar *progressbar.ProgressBar
	converted, err := datalayout.Convert(sets, o.out, masks, func(cs datalayout.ConvertedSplit, done, total int) {
		if done == 0 {
			bar = progress(c, total, "convert")
		}
		bar.Set(done)
		if done == total {
			bar.Finish()
			notef(c, "segtune: wrote %d pairs to %s and %s", total, cs.ImageDir, cs.MaskDir)
		}
	})
	if err != nil {
		if bar != nil {
			bar.Finish()
		}
		return err
	}
	total := 0
	for _, cs := range converted {
		total += cs.Pairs
	}
	fmt.Printf("wrote %d image/mask pairs to %s\n", total, o.out)
	return nil
}

// openDataSplits opens the splits of the data folder to go through
// (--split's, or every one), saying what it found.
func openDataSplits(c *cli.Context, o *dataOptions) ([]*datalayout.Set, error) {
	opt, err := o.layout.options()
	if err != nil {
		return nil, err
	}
	sets, err := datalayout.OpenSplits(o.data, opt)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--data: %v", err), 2)
	}
	for _, set := range sets {
		noteData(c, set, o.labelMap)
	}
	return sets, nil
}
