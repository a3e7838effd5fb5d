package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio/datalayout"
)

func dataSplitCommand() *cli.Command {
	o := &dataOptions{}
	var (
		vs    datalayout.ValSplit
		lists bool
	)
	return &cli.Command{
		Name:  "split",
		Usage: "hold out a fraction of a labelled data folder for validation, written as train and val folders or as lists",
		Description: "Divides one split of --data (--split, default train where the layout has one, else the whole set)\n" +
			"as finetune --val-split divides it: the same --val, --split-seed and --split-by hold out the same images.\n" +
			"Writes in --out, new or empty and outside --data: OUT/images/{train,val} (the image files as they are)\n" +
			"and OUT/masks/{train,val} (the labels as palette PNGs, after --label-map), every file atomically;\n" +
			"with --lists, only OUT/train.txt and OUT/val.txt, the image paths below --data, one a line.",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "data", Required: true, Usage: "labelled data folder", Destination: &o.Data},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "new or empty folder for images/ and masks/ (or the lists)", Destination: &o.out},
			&cli.BoolFlag{Name: "lists", Usage: "write train.txt and val.txt (image paths below --data) instead of copying the data", Destination: &lists},
			labelMapFlag(&o.LabelMap, `remap mask labels on the way, e.g. "cityscapes"`),
			maskPaletteFlag(&o.MaskPalette),
		}, valSplitFlags(&vs, "val", "fraction `F` of the images to hold out for validation, in (0, 1)")...), o.layoutFlags()...),
		Action: func(c *cli.Context) error { return runDataSplit(c, o, vs, lists) },
	}
}

func runDataSplit(c *cli.Context, o *dataOptions, bound datalayout.ValSplit, lists bool) error {
	if !c.IsSet("val") {
		return cli.Exit("data split: give --val F, the fraction of the images to hold out for validation", 2)
	}
	vs, err := valSplitSetting(c, bound, "val")
	if err != nil {
		return err
	}
	return datalayout.SplitFolder(os.Stdout, datalayout.SplitRequest{Folder: o.folder(c), Out: o.out, Split: *vs, Lists: lists})
}
