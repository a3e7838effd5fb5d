package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/regfile"
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

// splitCheck is data check's report on one split.
type splitCheck struct {
	Root       string                 `json:"root"`
	Format     string                 `json:"format"`
	Split      string                 `json:"split,omitempty"`
	Pairs      int                    `json:"pairs"`
	Unmatched  []datalayout.Unmatched `json:"unmatched"`
	Problems   []failureJSON          `json:"problems"`
	NumClasses int                    `json:"classes"`
	Ignore     int                    `json:"ignore"`
	Classes    []classCheck           `json:"histogram"`
}

// classCheck is one class's pixels, images and object sizes.
type classCheck struct {
	Class  int    `json:"class"`
	Name   string `json:"name,omitempty"`
	Pixels int64  `json:"pixels"`
	Images int    `json:"images"`
	// Size is the distribution of the class's share of the labelled
	// pixels of the images it is in; nil when it is in none.
	Size *sizeSpread `json:"size,omitempty"`
}

type sizeSpread struct {
	Min    float64 `json:"min"`
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
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
	var reports []splitCheck
	bad := 0
	for _, split := range dr.splits {
		r, err := checkSplit(c, root, datalayout.Options{Format: dr.format, Split: split}, dr.masks, names)
		if err != nil {
			return err
		}
		bad += len(r.Unmatched) + len(r.Problems)
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

func checkSplit(c *cli.Context, root string, opt datalayout.Options, mo imageio.MaskOptions, names []string) (splitCheck, error) {
	set, err := datalayout.Open(root, opt)
	if err != nil {
		return splitCheck{}, cli.Exit(fmt.Sprintf("--data: %v", err), 2)
	}
	noteDataSet(c, set)
	r := splitCheck{Root: root, Format: set.Format, Split: set.Split, Unmatched: set.Unmatched,
		Problems: []failureJSON{}, Ignore: c.Int("ignore")}
	if r.Unmatched == nil {
		r.Unmatched = []datalayout.Unmatched{}
	}
	if len(set.Samples) == 0 {
		return r, nil
	}
	ds, problems, err := data.Open(c.Context, data.Config{Data: root, Format: set.Format, Split: set.Split,
		LabelMap: mo.Map, Palette: mo.Palette, NumClasses: c.Int("classes"), Ignore: r.Ignore, ClassNames: names, SkipBad: true, CacheBytes: -1})
	unmatched := map[string]bool{}
	for _, u := range set.Unmatched {
		unmatched[u.Path] = true
	}
	for _, p := range problems {
		if !unmatched[p.Path] {
			r.Problems = append(r.Problems, failureJSON{Path: p.Path, Error: p.Err.Error()})
		}
	}
	if err != nil {
		if len(r.Problems) > 0 { // every example is bad: each is named
			return r, nil
		}
		return r, err
	}
	r.Pairs, r.NumClasses = ds.Len(), ds.NumClasses()
	for k := range ds.NumClasses() {
		cc := classCheck{Class: k}
		if k < len(names) {
			cc.Name = names[k]
		}
		var sizes []float64
		for id := range ds.Len() {
			if n := ds.ClassCounts(id)[k]; n > 0 {
				cc.Pixels += n
				cc.Images++
				sizes = append(sizes, ds.Fraction(id, k))
			}
		}
		if len(sizes) > 0 {
			slices.Sort(sizes)
			q := func(p float64) float64 { return sizes[int(p*float64(len(sizes)-1)+0.5)] }
			cc.Size = &sizeSpread{Min: sizes[0], P10: q(0.1), Median: q(0.5), P90: q(0.9), Max: sizes[len(sizes)-1]}
		}
		r.Classes = append(r.Classes, cc)
	}
	return r, nil
}

func printSplitCheck(w io.Writer, r splitCheck) {
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
		set, err := datalayout.Open(root, datalayout.Options{Format: dr.format, Split: split})
		if err != nil {
			return cli.Exit(fmt.Sprintf("--data: %v", err), 2)
		}
		noteDataSet(c, set)
		if set.Err() != nil {
			return unmatchedExit(set)
		}
		sets = append(sets, set)
	}
	total := 0
	for _, set := range sets {
		names, err := flatNames(set.Samples)
		if err != nil {
			return err
		}
		split := datalayout.CanonicalSplit(set.Split)
		imgDir, maskDir := filepath.Join(out, "images", split), filepath.Join(out, "masks", split)
		for _, d := range []string{imgDir, maskDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		bar := progress(c, len(set.Samples), "convert")
		for i, s := range set.Samples {
			if err := convertSample(s, dr.masks, filepath.Join(imgDir, names[i]+strings.ToLower(filepath.Ext(s.Image))),
				filepath.Join(maskDir, names[i]+".png")); err != nil {
				bar.Finish()
				return err
			}
			bar.Set(i + 1)
		}
		bar.Finish()
		total += len(set.Samples)
		notef(c, "segtune: wrote %d pairs to %s and %s", len(set.Samples), imgDir, maskDir)
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
	entries, err := os.ReadDir(out)
	if err != nil && !os.IsNotExist(err) {
		return cli.Exit(fmt.Sprintf("--out %s: %v", out, err), 2)
	}
	if len(entries) > 0 {
		return cli.Exit(fmt.Sprintf("--out %s is not empty; give a new or empty folder", out), 2)
	}
	return nil
}

// flatNames names the samples for one flat folder: their base names, or,
// where those repeat, their names with "/" made "_".
func flatNames(samples []datalayout.Sample) ([]string, error) {
	names := make([]string, len(samples))
	seen := map[string]bool{}
	unique := true
	for i, s := range samples {
		names[i] = filepath.Base(filepath.FromSlash(s.Name))
		if seen[names[i]] {
			unique = false
		}
		seen[names[i]] = true
	}
	if unique {
		return names, nil
	}
	clear(seen)
	for i, s := range samples {
		names[i] = strings.ReplaceAll(s.Name, "/", "_")
		if seen[names[i]] {
			return nil, fmt.Errorf("data convert: two samples would both be named %q in one folder (one is %s)", names[i], s.Image)
		}
		seen[names[i]] = true
	}
	return names, nil
}

// convertSample copies the image file as it is and writes the labels as
// a palette PNG, both atomically.
func convertSample(s datalayout.Sample, mo imageio.MaskOptions, imgOut, maskOut string) error {
	m, err := s.ReadMask(mo)
	if err != nil {
		return err
	}
	labels, err := m.Uint8(nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Mask, err)
	}
	f, _, err := regfile.Open(s.Image)
	if err != nil {
		return fmt.Errorf("data convert: %w", err)
	}
	defer f.Close()
	if err := atomicfile.WriteFunc(imgOut, 0o644, func(w io.Writer) error { _, err := io.Copy(w, f); return err }); err != nil {
		return fmt.Errorf("data convert: %w", err)
	}
	return imageio.WriteMaskPNG(maskOut, labels, m.Width, m.Height, nil)
}

// dataReading is how `data check` and `data convert` read a data folder.
type dataReading struct {
	format string
	// splits are the splits to go through: --split's, or every split the
	// layout has.
	splits []string
	// masks says how masks are read (--label-map, --mask-palette);
	// paletteNames are the classes a CVAT labelmap names.
	masks        imageio.MaskOptions
	paletteNames []string
}

// dataSplits reads --format, --split, --label-map and --mask-palette for
// the data folder root.
func dataSplits(c *cli.Context, root string) (dataReading, error) {
	dr := dataReading{format: c.String("format")}
	opt := datalayout.Options{Format: dr.format, Split: c.String("split")}
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
