package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
)

// SamplesFile is the contact sheet that demo and finetune write next to
// curves.png.
const SamplesFile = "samples.png"

// samplesPerEnd is how many images with the smallest and with the largest
// objects the contact sheet shows.
const samplesPerEnd = 3

// sampleColumn is a model whose predictions fill one column of the sheet.
type sampleColumn struct {
	Name, Model string
}

// writeSamples writes a contact sheet to path: for the validation images of
// cfg with the smallest and with the largest objects (object size as the
// run measures it: the pixel fraction of cfg.Size.Classes, default every
// class but 0), the image, its ground truth and each column's prediction
// side by side, the masks drawn in pal's colours (nil: the VOC palette).
func writeSamples(c *cli.Context, path string, cfg finetune.Config, pal imageio.Palette, cols []sampleColumn) error {
	if !cfg.Val.Given() {
		return errors.New("no validation images")
	}
	dc := cfg.Val.DataConfig()
	dc.Ignore, dc.SkipBad, dc.CacheBytes = cfg.Ignore, true, -1
	if cfg.LabelMap != "" {
		lm, err := imageio.ParseLabelMap(cfg.LabelMap)
		if err != nil {
			return err
		}
		dc.LabelMap = lm
	}
	ds, _, err := data.Open(context.Background(), dc)
	if err != nil {
		return err
	}
	classes := cfg.Size.ObjectClasses(ds.NumClasses())
	ids := pickBySize(ds, classes, samplesPerEnd)
	if len(ids) == 0 {
		return errors.New("no validation image has an object")
	}
	paths := make([]string, len(ids))
	for i, id := range ids {
		e, _ := ds.Example(id)
		paths[i] = e.Image
	}
	preds := make([]map[string][]uint8, len(cols))
	for k, col := range cols {
		if preds[k], err = predict(c, col.Model, cfg.Preprocess, paths); err != nil {
			return fmt.Errorf("%s: %w", col.Name, err)
		}
	}
	// The ignore label is drawn grey in every column, whatever the palette.
	ignore := ds.Ignore()
	full := imageio.VOCPalette(256)
	copy(full, pal)
	full[ignore] = color.RGBA{128, 128, 128, 255}
	pal = full
	sheet := imageio.Sheet{Columns: []string{"image", "ground truth (grey: ignored)"}}
	for _, col := range cols {
		sheet.Columns = append(sheet.Columns, col.Name)
	}
	for i, id := range ids {
		s, err := ds.Load(id)
		if err != nil {
			return err
		}
		img, err := imageio.ReadImage(paths[i])
		if err != nil {
			return err
		}
		gt, err := imageio.LabelImage(s.Labels, s.Width, s.Height, pal)
		if err != nil {
			return err
		}
		end := "smallest"
		if i >= (len(ids)+1)/2 {
			end = "largest"
		}
		row := imageio.SheetRow{
			Caption: fmt.Sprintf("%s objects: %s, %.2f %% of the pixels", end, filepath.Base(paths[i]), 100*ds.Fraction(id, classes...)),
			Cells:   []image.Image{img, gt},
		}
		for k, col := range cols {
			labels, ok := preds[k][paths[i]]
			if !ok {
				return fmt.Errorf("%s: no prediction for %s", col.Name, paths[i])
			}
			b := img.Bounds()
			p, err := imageio.LabelImage(labels, b.Dx(), b.Dy(), pal)
			if err != nil {
				return err
			}
			row.Cells = append(row.Cells, p)
		}
		sheet.Rows = append(sheet.Rows, row)
	}
	return sheet.WritePNG(path)
}

// pickBySize returns up to n examples with the smallest objects (among
// those with any) and up to n with the largest, smallest first; fewer when
// the set is small, never one twice.
func pickBySize(ds *data.Dataset, classes []int, n int) []int {
	type ex struct {
		id int
		f  float64
	}
	var xs []ex
	for id := range ds.Len() {
		if f := ds.Fraction(id, classes...); f > 0 {
			xs = append(xs, ex{id, f})
		}
	}
	slices.SortStableFunc(xs, func(a, b ex) int { return cmp.Compare(a.f, b.f) })
	if len(xs) > 2*n {
		xs = append(xs[:n], xs[len(xs)-n:]...)
	}
	ids := make([]int, len(xs))
	for i, x := range xs {
		ids[i] = x.id
	}
	return ids
}

// predict segments paths with the model and returns the labels by path.
func predict(c *cli.Context, model string, pre imageio.Preprocess, paths []string) (map[string][]uint8, error) {
	seg, err := openSegmenter(c, model, imageio.Sidecar{Preprocess: &pre})
	if err != nil {
		return nil, err
	}
	defer seg.Close()
	var mu sync.Mutex
	out := map[string][]uint8{}
	rep, err := pipeline.Run(paths, seg.Stages(imageio.Decoder{}, func(r inference.Result) error {
		mu.Lock()
		defer mu.Unlock()
		out[r.Path] = r.Labels
		return nil
	}), pipeline.Config{Batch: 1})
	if err != nil {
		return nil, err
	}
	if len(rep.Failures) > 0 {
		return nil, fmt.Errorf("%s: %w", rep.Failures[0].Path, rep.Failures[0].Err)
	}
	return out, nil
}

// reportSamples writes the contact sheet of a finished finetune run into its
// folder and says where on stderr; a run without validation images (or any
// failure) gets a notice instead, as the run itself succeeded.
func reportSamples(c *cli.Context, res *finetune.Result) {
	if path, err := finetuneSamples(c, res); err != nil {
		notef(c, "segtune: no %s: %v", SamplesFile, err)
	} else {
		notef(c, "segtune: contact sheet of the smallest and largest validation objects: %s", path)
	}
}

// finetuneSamples writes the contact sheet of a finished finetune run into
// its folder, with the run's own settings (config.json) and exported model.
func finetuneSamples(c *cli.Context, res *finetune.Result) (string, error) {
	b, err := os.ReadFile(filepath.Join(res.Dir, finetune.ConfigFile))
	if err != nil {
		return "", err
	}
	var cfg finetune.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", finetune.ConfigFile, err)
	}
	model := res.Model
	if model == "" {
		model = filepath.Join(res.Dir, finetune.ModelFile)
	}
	path := filepath.Join(res.Dir, SamplesFile)
	if err := writeSamples(c, path, cfg, nil, []sampleColumn{{"prediction", model}}); err != nil {
		return "", err
	}
	// The sheet in TensorBoard too, beside the run's scalars.
	tb, err := history.OpenTensorBoard(filepath.Join(res.Dir, finetune.TensorBoardDir), 0)
	if err == nil {
		err = tb.Image(res.Steps, "samples", path)
		if cerr := tb.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		notef(c, "segtune: the contact sheet is not in TensorBoard: %v", err)
	}
	return path, nil
}
