package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio/datalayout"
)

func dataCheckCommand() *cli.Command {
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
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder"},
			&cli.StringFlag{Name: "label-map", Usage: `remap mask labels first, e.g. "cityscapes" or "9,10:1;11:255;*:0"`},
			maskPaletteFlag(new(string)),
			&cli.IntFlag{Name: "classes", Usage: "number of classes: mask values at or above it (other than --ignore) are named (default: the largest value seen + 1)"},
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "mask label that is no class"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			jsonFlag(new(bool)),
		}, dataLayoutFlags(new(dataLayout), "--data")...),
		Action: runDataCheck,
	}
}

func runDataCheck(c *cli.Context) error {
	masks, names, err := maskFlags(c)
	if err != nil {
		return err
	}
	if given := classNames(c); given != nil {
		names = given
	} else if masks.Map != nil {
		names = nil // a CVAT labelmap's names are of the labels before the label map
	}
	sets, err := openDataSplits(c)
	if err != nil {
		return err
	}
	for _, set := range sets {
		noteDataSet(c, set)
	}
	if names == nil && masks.Map == nil && len(sets) > 0 {
		names = sets[0].Classes // an annotation format's names (COCO's categories …), where they are the labels
	}
	reports, err := data.CheckSplits(c.Context, sets, data.Config{LabelMap: masks.Map, Palette: masks.Palette,
		NumClasses: c.Int("classes"), Ignore: c.Int("ignore"), ClassNames: names})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, reports); err != nil {
			return err
		}
	} else {
		reports.WriteText(os.Stdout)
	}
	// After the report, which names the files that pair with nothing.
	if err := checkNotEmpty(c, sets); err != nil {
		return err
	}
	if bad := reports.Bad(); bad > 0 {
		return cli.Exit(fmt.Sprintf("data check: %d files named above need attention", bad), 1)
	}
	return nil
}

func dataConvertCommand() *cli.Command {
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
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "new or empty folder for images/ and masks/"},
			&cli.StringFlag{Name: "label-map", Usage: `remap mask labels on the way, e.g. "cityscapes"`},
			maskPaletteFlag(new(string)),
		}, dataLayoutFlags(new(dataLayout), "--data")...),
		Action: runDataConvert,
	}
}

func runDataConvert(c *cli.Context) error {
	root, out := c.String("data"), c.String("out")
	masks, _, err := maskFlags(c)
	if err != nil {
		return err
	}
	if err := datalayout.CheckConvertOutput(root, out); err != nil {
		var oe *datalayout.OverlapError
		var ne *datalayout.NotEmptyError
		switch {
		case errors.As(err, &oe):
			return cli.Exit(withFlagNames(err).Error(), 2)
		case errors.As(err, &ne):
			return cli.Exit("--out "+err.Error(), 2)
		}
		return cli.Exit(fmt.Sprintf("--out %s: %v", out, err), 2)
	}
	sets, err := openDataSplits(c) // every split is listed and checked before anything is written
	if err != nil {
		return err
	}
	for _, set := range sets {
		noteDataSet(c, set)
		if err := set.Err(); err != nil {
			return dataExit(err)
		}
	}
	if err := checkNotEmpty(c, sets); err != nil {
		return err
	}
	var bar *progressbar.ProgressBar
	converted, err := datalayout.Convert(sets, out, masks, func(cs datalayout.ConvertedSplit, done, total int) {
		if done == 0 {
			bar = progress(c, total, "convert")
		}
		if done > 0 {
			bar.Set(done)
		}
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
	fmt.Printf("wrote %d image/mask pairs to %s\n", total, out)
	return nil
}

// openDataSplits opens the splits of --data to go through (--split's, or
// every one).
func openDataSplits(c *cli.Context) ([]*datalayout.Set, error) {
	opt, err := layoutOptions(c)
	if err != nil {
		return nil, err
	}
	sets, err := datalayout.OpenSplits(c.String("data"), opt)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--data: %v", err), 2)
	}
	return sets, nil
}

// checkNotEmpty refuses a data folder in which no split holds a single
// image/mask pair: a layout was found, but nothing in it can be checked,
// converted or trained on (exit 1, as for files that need attention).
func checkNotEmpty(c *cli.Context, sets []*datalayout.Set) error {
	for _, set := range sets {
		if len(set.Samples) > 0 {
			return nil
		}
	}
	format := "no"
	if len(sets) > 0 {
		format = "a " + sets[0].Format
	}
	return cli.Exit(fmt.Sprintf("--data %s: %s layout, and not one image/mask pair in it", c.String("data"), format), 1)
}
