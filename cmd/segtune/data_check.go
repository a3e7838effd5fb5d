package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/pathguard"
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
			maskPaletteFlag,
			&cli.IntFlag{Name: "classes", Usage: "number of classes: mask values at or above it (other than --ignore) are named (default: the largest value seen + 1)"},
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "mask label that is no class"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			jsonFlag,
		}, dataLayoutFlags("--data")...),
		Action: runDataCheck,
	}
}

func runDataCheck(c *cli.Context) error {
	root := c.String("data")
	dr, err := dataSplits(c, root)
	if err != nil {
		return err
	}
	names := dr.paletteNames // a CVAT labelmap names its colours' classes
	if v := c.String("class-names"); v != "" {
		names = strings.Split(v, ",")
	} else if dr.masks.Map != nil {
		names = nil // they name the labels before the label map
	}
	var reports []data.Report
	bad := 0
	for _, split := range dr.splits {
		set, err := datalayout.Open(root, dr.open(split))
		if err != nil {
			return cli.Exit(fmt.Sprintf("--data: %v", err), 2)
		}
		noteDataSet(c, set)
		r, err := data.Check(c.Context, set, data.Config{LabelMap: dr.masks.Map, Palette: dr.masks.Palette,
			NumClasses: c.Int("classes"), Ignore: c.Int("ignore"), ClassNames: names})
		if err != nil {
			return err
		}
		bad += r.Bad()
		reports = append(reports, r)
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, reports); err != nil {
			return err
		}
	} else {
		for _, r := range reports {
			printSplitCheck(os.Stdout, r)
		}
	}
	if bad > 0 {
		return cli.Exit(fmt.Sprintf("data check: %d files named above need attention", bad), 1)
	}
	return nil
}

func printSplitCheck(w io.Writer, r data.Report) {
	split := ""
	if r.Split != "" {
		split = ", split " + r.Split
	}
	fmt.Fprintf(w, "%s (%s layout%s): %d good pairs, %d unmatched files, %d bad files\n",
		r.Root, r.Format, split, r.Pairs, len(r.Unmatched), len(r.Problems))
	for _, u := range r.Unmatched {
		fmt.Fprintf(w, "  unmatched  %s: %s\n", u.Path, u.Why)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  bad        %s\n", p.Error)
	}
	if len(r.Classes) == 0 {
		return
	}
	fmt.Fprintf(w, "  %d classes (label %d ignored); object size = the class's share of an image's labelled pixels\n", r.NumClasses, r.Ignore)
	fmt.Fprintf(w, "  %5s  %-14s %12s %7s  %28s\n", "class", "name", "pixels", "images", "size min/p10/median/p90/max")
	for _, cc := range r.Classes {
		size := "-"
		if s := cc.Size; s != nil {
			size = fmt.Sprintf("%.3f/%.3f/%.3f/%.3f/%.3f", s.Min, s.P10, s.Median, s.P90, s.Max)
		}
		fmt.Fprintf(w, "  %5d  %-14s %12d %7d  %28s\n", cc.Class, cc.Name, cc.Pixels, cc.Images, size)
	}
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
			maskPaletteFlag,
		}, dataLayoutFlags("--data")...),
		Action: runDataConvert,
	}
}

func runDataConvert(c *cli.Context) error {
	root, out := c.String("data"), c.String("out")
	dr, err := dataSplits(c, root)
	if err != nil {
		return err
	}
	if err := guardConvertOut(root, out); err != nil {
		return err
	}
	// Every split is listed and checked before anything is written.
	var sets []*datalayout.Set
	for _, split := range dr.splits {
		set, err := datalayout.Open(root, dr.open(split))
		if err != nil {
			return cli.Exit(fmt.Sprintf("--data: %v", err), 2)
		}
		noteDataSet(c, set)
		if err := set.Err(); err != nil {
			return dataExit(err)
		}
		sets = append(sets, set)
	}
	var bar *progressbar.ProgressBar
	converted, err := datalayout.Convert(sets, out, dr.masks, func(cs datalayout.ConvertedSplit, done, total int) {
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

// guardConvertOut refuses an --out that overlaps --data (the conversion
// never writes among its inputs) or already holds files.
func guardConvertOut(root, out string) error {
	rr, err := pathguard.Resolve(root)
	if err != nil {
		return err
	}
	ro, err := pathguard.Resolve(out)
	if err != nil {
		return err
	}
	if pathguard.Within(ro, rr) || pathguard.Within(rr, ro) {
		return cli.Exit(fmt.Sprintf("--out %s and --data %s overlap (one is inside the other, or they are the same folder); choose an output folder outside the data", out, root), 2)
	}
	if err := datalayout.CheckOutput(out); err != nil {
		var ne *datalayout.NotEmptyError
		if errors.As(err, &ne) {
			return cli.Exit("--out "+err.Error(), 2)
		}
		return cli.Exit(fmt.Sprintf("--out %s: %v", out, err), 2)
	}
	return nil
}

// dataReading is how `data check` and `data convert` read a data folder.
type dataReading struct {
	// layout says how to open the folder (--format, --coco-crowd).
	layout datalayout.Options
	// splits are the splits to go through: --split's, or every split the
	// layout has.
	splits []string
	// masks says how masks are read (--label-map, --mask-palette);
	// paletteNames are the classes a CVAT labelmap names.
	masks        imageio.MaskOptions
	paletteNames []string
}

// open is how to open split.
func (dr dataReading) open(split string) datalayout.Options {
	opt := dr.layout
	opt.Split = split
	return opt
}

// dataSplits reads --format, --split, --label-map and --mask-palette for
// the data folder root.
func dataSplits(c *cli.Context, root string) (dataReading, error) {
	var dr dataReading
	opt, err := layoutOptions(c)
	if err != nil {
		return dr, err
	}
	dr.layout = opt
	_, splits, err := datalayout.Splits(root, opt)
	if err != nil {
		return dr, cli.Exit(fmt.Sprintf("--data: %v", err), 2)
	}
	dr.splits = splits
	if opt.Split != "" || len(splits) == 0 {
		dr.splits = []string{opt.Split}
	}
	if v := c.String("label-map"); v != "" {
		if dr.masks.Map, err = imageio.ParseLabelMap(v); err != nil {
			return dr, cli.Exit(fmt.Sprintf("--label-map: %v", err), 2)
		}
	}
	dr.masks.Palette, dr.paletteNames, err = maskPalette(c)
	return dr, err
}
