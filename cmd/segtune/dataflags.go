package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
)

// dataLayout is how to read a data folder: what --format, --split and
// --coco-crowd set (options reads them).
type dataLayout datalayout.Layout

// dataLayoutFlags bind --format, --split and --coco-crowd, which say how
// to read the data folder given to flag (--data, --calibrate), into o.
func dataLayoutFlags(o *dataLayout, flag string) []cli.Flag {
	o.Crowd = "ignore"
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Usage: "layout of " + flag + ": " + strings.Join(datalayout.Formats(), ", ") + " (default: detected)", Destination: &o.Format},
		&cli.StringFlag{Name: "split", Usage: "split of " + flag + " to read (train, val, test, or a VOC list's name)", Destination: &o.Split},
		&cli.StringFlag{Name: "coco-crowd", Value: o.Crowd, Destination: &o.Crowd,
			Usage: "COCO annotations marked iscrowd in " + flag + ": ignore (left out of the loss and the scores) or class (painted with their category's class)"},
	}
}

// options are the layout options the flags give.
func (o *dataLayout) options() (datalayout.Options, error) { return datalayout.Layout(*o).Options() }

// dataFlag is --data for the commands that read one split of labelled
// data, into root.
func dataFlag(root *string) cli.Flag {
	return &cli.StringFlag{Name: "data", Usage: "labelled data folder in any known layout (see --format), instead of --images and --masks", Destination: root}
}

// maskPaletteFlag is --mask-palette, for RGB colour masks: the file's path
// into path (readMasks reads it).
func maskPaletteFlag(path *string) cli.Flag {
	return &cli.StringFlag{Name: "mask-palette", Destination: path,
		Usage: "read RGB colour masks: a palette image (colour i is class i) or a CVAT labelmap.txt (which also names the classes)"}
}

// labelMapFlag is --label-map, with the command's usage: its spec into
// spec (readMasks parses it).
func labelMapFlag(spec *string, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "label-map", Usage: usage, Destination: spec}
}

// classNamesFlag is --class-names, with the command's usage: the list into
// names (splitNames splits it).
func classNamesFlag(names *string, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "class-names", Usage: usage, Destination: names}
}

// readMasks reads how masks are read: --label-map's spec and
// --mask-palette's file, and the classes a CVAT labelmap names.
func readMasks(labelMap, palette string) (imageio.MaskOptions, []string, error) {
	return datalayout.ReadMasks(labelMap, palette)
}

// splitNames is a --class-names list (nil for "").
func splitNames(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// openData lists the samples of the data set at root (--data): opt's
// split, or else fallback where the layout has it (val for eval), and says
// in one line which layout it took and how many pairs it found (labelMap:
// --label-map's, for its notes).
func openData(c *cli.Context, root string, opt datalayout.Options, fallback, labelMap string) (*datalayout.Set, error) {
	return datalayout.OpenData(root, opt, fallback, labelMap != "", dataNotes(c))
}

// dataNotes are the data libraries' notes: on stderr unless --quiet,
// naming settings by their flags.
func dataNotes(c *cli.Context) datalayout.Notes {
	return datalayout.Notes{W: noticeWriter(c), Prefix: "segtune: ", Name: flagOf}
}

// dataExit is the exit for an error reading --data: 1 for unmatched
// files (named), 2 for a folder that cannot be read as data.
func dataExit(err error) error { return datalayout.DataError(err) }
