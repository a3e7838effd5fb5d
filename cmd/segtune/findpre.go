package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/evaluate/preprocsearch"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/resolve"
)

// findPreprocessingFlags are info's flags for --find-preprocessing; its
// data flags are eval's.
func findPreprocessingFlags() []cli.Flag {
	const cat = "Finding the preprocessing"
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "find-preprocessing", Category: cat, Usage: "score candidate preprocessings (value range 0..1, -1..1, 0..255, ImageNet mean/std; RGB or BGR; the current geometry and the model's fixed size or the images' own; the current settings) on a sample of labelled images (--images and --masks, or --data) and print them, best first"},
		&cli.StringFlag{Name: "images", Category: cat, Usage: "folder of labelled images"},
		&cli.StringFlag{Name: "masks", Category: cat, Usage: "folder of masks with the same base names"},
		&cli.StringFlag{Name: "data", Category: cat, Usage: "labelled data folder in any known layout (its val split where it has one), instead of --images and --masks"},
		&cli.StringFlag{Name: "label-map", Category: cat, Usage: `remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`},
		maskPaletteFlag(new(string)),
		&cli.IntFlag{Name: "ignore", Value: evaluate.DefaultIgnore, Category: cat, Usage: "mask label left out of scoring"},
		&cli.IntFlag{Name: "sample", Value: 16, Category: cat, Usage: "labelled images to score each candidate on, evenly spread over the pairs (0: all)"},
		&cli.BoolFlag{Name: "write-sidecar", Category: cat, Usage: "write the chosen preprocessing into the model's sidecar, MODEL.segtune.json (not over an existing one without --force)"},
		&cli.BoolFlag{Name: "force", Category: cat, Usage: "with --write-sidecar: replace an existing sidecar"},
		deviceFlag(new(string)), threadsFlag(new(int)),
	}, dataLayoutFlags(new(dataLayout), "--data")...)
}

// findPreprocessingOnly are the flags that mean nothing without
// --find-preprocessing.
var findPreprocessingOnly = []string{"images", "masks", "data", "label-map", "mask-palette", "sample", "write-sidecar", "force"}

// checkFindPreprocessingFlags refuses --find-preprocessing's flags given
// without it, and its data given twice or not at all, before any work.
func checkFindPreprocessingFlags(c *cli.Context) error {
	if !c.Bool("find-preprocessing") {
		for _, f := range findPreprocessingOnly {
			if c.IsSet(f) {
				return cli.Exit(fmt.Sprintf("--%s goes with --find-preprocessing", f), 2)
			}
		}
		return nil
	}
	switch {
	case c.IsSet("data") && (c.IsSet("images") || c.IsSet("masks")):
		return cli.Exit("--find-preprocessing: give --data, or --images and --masks, not both", 2)
	case !c.IsSet("data") && (c.String("images") == "" || c.String("masks") == ""):
		return cli.Exit("--find-preprocessing needs labelled images: --images DIR and --masks DIR, or --data DIR", 2)
	case c.Int("sample") < 0:
		return cli.Exit(fmt.Sprintf("--sample %d: want a number of images, or 0 for all", c.Int("sample")), 2)
	case c.Bool("force") && !c.Bool("write-sidecar"):
		return cli.Exit("--force goes with --write-sidecar", 2)
	}
	return nil
}

// findPreprocessing runs --find-preprocessing on the model at path.
func findPreprocessing(c *cli.Context, path string, asJSON bool) error {
	sidecar := imageio.SidecarPath(path)
	if c.Bool("write-sidecar") && !c.Bool("force") {
		if err := refuseExistingSidecar(sidecar); err != nil {
			return err
		}
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	if c.IsSet("data") {
		set, err := openDataFlag(c, "val")
		if err != nil {
			return err
		}
		if err := set.Err(); err != nil {
			return dataExit(err)
		}
		if err := setFlags(c, map[string]string{"images": set.Root, "masks": set.Root}); err != nil {
			return err
		}
		return searchPreprocessing(c, path, sidecar, set, asJSON)
	}
	return searchPreprocessing(c, path, sidecar, nil, asJSON)
}

// refuseExistingSidecar refuses to replace a sidecar without --force.
func refuseExistingSidecar(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return cli.Exit(fmt.Sprintf("--write-sidecar: %s exists; --force replaces it", path), 2)
	} else if !errors.Is(err, os.ErrNotExist) {
		return cli.Exit(fmt.Sprintf("--write-sidecar: %v", err), 2)
	}
	return nil
}

func searchPreprocessing(c *cli.Context, path, sidecar string, set *datalayout.Set, asJSON bool) error {
	own, err := resolve.ModelSettings(path, "", imageio.Sidecar{}) // the model's own settings, no flags
	if err != nil {
		return err
	}
	settings := own.Sidecar
	if settings.Preprocess == nil { // segtune's defaults
		settings.Preprocess = &imageio.Preprocess{}
	}
	read, _, err := maskFlags(c)
	if err != nil {
		return err
	}
	if read.Map != nil {
		settings.LabelMap = read.Map
	}
	open := func(m string, s imageio.Sidecar) (*inference.Segmenter, error) {
		return resolve.OpenSegmenter(m, s, resolve.SegmenterOptions{Session: sessionOptions(c)})
	}
	seg, err := open(path, settings)
	if err != nil {
		return err
	}
	current, ct := seg.Pre, seg.Contract // what the model runs with today, its fixed size applied
	seg.Close()
	imgs, err := openFolderFlag(c, "images", true)
	if err != nil {
		return err
	}
	defer imgs.Close()
	masks, err := openFolderFlag(c, "masks", true)
	if err != nil {
		return err
	}
	defer masks.Close()
	ignore := c.Int("ignore")
	req := preprocsearch.Request{Model: path, Settings: settings, Images: imgs, Masks: masks, Set: set, Sample: c.Int("sample"), Open: open,
		Options: evaluate.SetupOptions{Ignore: &ignore, ClassNames: classNames(c), MaskPalette: read.Palette}}
	cands := preprocsearch.Candidates(current, ct.Height, ct.Width)
	req.Progress = func(done, total int, cand preprocsearch.Candidate) {
		notef(c, "segtune: scoring %d/%d: %s", done+1, total, cand.Name)
	}
	res, err := preprocsearch.Search(c.Context, req, cands)
	var fe *evaluate.FolderError
	switch {
	case errors.Is(err, evaluate.ErrNoPairs):
		return cli.Exit(err.Error(), 1)
	case errors.As(err, &fe):
		return flagError(fe.Side, fe.Folder, fe.Err)
	case err != nil:
		return err
	}
	if asJSON {
		err = printJSON(os.Stdout, res)
	} else {
		printPreprocessingSearch(res)
	}
	if err != nil || !c.Bool("write-sidecar") {
		return err
	}
	return writeFoundSidecar(c, sidecar, own.Sidecar, res.Scores[res.Chosen])
}

// printPreprocessingSearch prints the candidates best first, which tie
// with the best, and the choice.
func printPreprocessingSearch(res *preprocsearch.Result) {
	t := &history.Table{Header: []string{"rank", "preprocessing", "mIoU", "note"}}
	for i, s := range res.Scores {
		miou, note := "-", ""
		if s.Err != "" {
			note = "not scored: " + s.Err
		} else {
			miou = fmt.Sprintf("%.4f", s.MeanIoU)
		}
		var marks []string
		if s.Current {
			marks = append(marks, "current")
		}
		if s.Tie {
			marks = append(marks, "tie")
		}
		if len(marks) > 0 {
			note = strings.TrimSpace(strings.Join(marks, ", ") + " " + note)
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), s.Name, miou, note})
	}
	t.WriteTo(os.Stdout)
	fmt.Printf("\nscored on %d of %d labelled images", res.Images, res.Available)
	if res.Images < res.Available {
		fmt.Print(" (--sample N scores more)")
	}
	fmt.Println()
	best := res.Scores[0]
	if tied := res.Tied(); len(tied) > 0 {
		names := make([]string, len(tied))
		for i, s := range tied {
			names[i] = s.Name
		}
		fmt.Printf("%d candidates tie within the noise of %d images (the best's lead is below what %d resamples of the images show): %s\n",
			len(tied), res.Images, res.Resamples, strings.Join(names, "; "))
	} else {
		fmt.Printf("best: %s, ahead of every other beyond the noise of %d images\n", best.Name, res.Images)
	}
	chosen := res.Scores[res.Chosen]
	switch {
	case chosen.Current && res.Chosen > 0:
		fmt.Printf("chosen: the current settings (%s, mIoU %.4f), which tie with the best: nothing here shows another to be better\n", chosen.Name, chosen.MeanIoU)
	case chosen.Current:
		fmt.Printf("chosen: %s (mIoU %.4f), the current settings\n", chosen.Name, chosen.MeanIoU)
	default:
		fmt.Printf("chosen: %s (mIoU %.4f)\n", chosen.Name, chosen.MeanIoU)
	}
}

// writeFoundSidecar writes the model's own settings with the chosen
// preprocessing into its sidecar, atomically.
func writeFoundSidecar(c *cli.Context, path string, own imageio.Sidecar, chosen preprocsearch.Score) error {
	if !c.Bool("force") { // again: another process may have written one meanwhile
		if err := refuseExistingSidecar(path); err != nil {
			return err
		}
	}
	s := own
	pre := chosen.Preprocess
	s.Preprocess = &pre
	if err := s.Save(path); err != nil {
		return fmt.Errorf("--write-sidecar: %w", err)
	}
	notef(c, "segtune: wrote %s (%s)", path, chosen.Name)
	return nil
}
