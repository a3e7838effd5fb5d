package main

import (
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio/datalayout"
)

// dataOptions are the data commands' settings: the folder, its layout
// and how its masks read, where a conversion goes, data check's classes
// (finetune/data's Config) and report.
type dataOptions struct {
	datalayout.Folder
	out, classNames string
	check           data.Config
	json            bool
}

// folder is the data folder the flags give, its notes on stderr.
func (o *dataOptions) folder(c *cli.Context) datalayout.Folder {
	f := o.Folder
	f.Notes = dataNotes(c)
	return f
}

// layoutFlags are dataLayoutFlags for the data folder's layout.
func (o *dataOptions) layoutFlags() []cli.Flag {
	return dataLayoutFlags((*dataLayout)(&o.Layout), "--data")
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
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder", Destination: &o.Data},
			labelMapFlag(&o.LabelMap, `remap mask labels first, e.g. "cityscapes" or "9,10:1;11:255;*:0"`),
			maskPaletteFlag(&o.MaskPalette),
			&cli.IntFlag{Name: "classes", Usage: "number of classes: mask values at or above it (other than --ignore) are named (default: the largest value seen + 1)", Destination: &o.check.NumClasses},
			&cli.IntFlag{Name: "ignore", Value: o.check.Ignore, Usage: "mask label that is no class", Destination: &o.check.Ignore},
			classNamesFlag(&o.classNames, "comma-separated class names for the report"),
			jsonFlag(&o.json),
		}, o.layoutFlags()...),
		Action: func(c *cli.Context) error { return runDataCheck(c, o) },
	}
}

func runDataCheck(c *cli.Context, o *dataOptions) error {
	reports, err := data.CheckFolder(c.Context, data.CheckRequest{Folder: o.folder(c), ClassNames: splitNames(o.classNames), Check: o.check})
	if reports == nil {
		return err
	}
	if o.json {
		if err := printJSON(os.Stdout, reports); err != nil {
			return err
		}
	} else {
		reports.WriteText(os.Stdout)
	}
	return err // after the report, which names the files
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
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder", Destination: &o.Data},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "new or empty folder for images/ and masks/", Destination: &o.out},
			labelMapFlag(&o.LabelMap, `remap mask labels on the way, e.g. "cityscapes"`),
			maskPaletteFlag(&o.MaskPalette),
		}, o.layoutFlags()...),
		Action: func(c *cli.Context) error { return runDataConvert(c, o) },
	}
}

func runDataConvert(c *cli.Context, o *dataOptions) error {
	var bar *progressbar.ProgressBar
	total, err := datalayout.ConvertFolder(datalayout.ConvertRequest{Folder: o.folder(c), Out: o.out, Progress: func(done, total int) {
		if done == 0 {
			bar = progress(c, total, "convert")
		}
		bar.Set(done)
		if done == total {
			bar.Finish()
		}
	}})
	if err != nil {
		if bar != nil {
			bar.Finish()
		}
		return err
	}
	fmt.Printf("wrote %d image/mask pairs to %s\n", total, o.out)
	return nil
}
