package samples

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
)

// File is the contact sheet that demo and finetune write next to
// curves.png.
const File = "samples.png"

// PerEnd is how many images with the smallest and with the largest
// objects the sheet shows.
const PerEnd = 3

// Column is a model whose predictions fill one column of the sheet.
type Column struct {
	Name, Model string
}

// Predictor segments image files with a model, preprocessed as pre, and
// returns the labels by path.
type Predictor func(model string, pre imageio.Preprocess, paths []string) (map[string][]uint8, error)

// Write writes a contact sheet to path: for the validation images of cfg
// with the smallest and with the largest objects (object size as the run
// measures it: the pixel fraction of cfg.Size.Classes, default every
// class but 0), the image, its ground truth and each column's prediction
// side by side, the masks drawn in pal's colours (nil: the VOC palette).
func Write(path string, cfg finetune.Config, pal imageio.Palette, cols []Column, predict Predictor) error {
	ds, err := openVal(cfg)
	if err != nil {
		return err
	}
	classes := cfg.Size.ObjectClasses(ds.NumClasses())
	ids := pickBySize(ds, classes, PerEnd)
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
		if preds[k], err = predict(col.Model, cfg.Preprocess, paths); err != nil {
			return fmt.Errorf("%s: %w", col.Name, err)
		}
	}
	pal = withIgnore(pal, ds.Ignore())
	sheet := imageio.Sheet{Columns: []string{"image", "ground truth (grey: ignored)"}}
	for _, col := range cols {
		sheet.Columns = append(sheet.Columns, col.Name)
	}
	for i, id := range ids {
		end := "smallest"
		if i >= (len(ids)+1)/2 {
			end = "largest"
		}
		caption := fmt.Sprintf("%s objects: %s, %.2f %% of the pixels", end, filepath.Base(paths[i]), 100*ds.Fraction(id, classes...))
		row, err := sheetRow(ds, id, paths[i], caption, pal, cols, preds)
		if err != nil {
			return err
		}
		sheet.Rows = append(sheet.Rows, row)
	}
	return sheet.WritePNG(path)
}

// openVal opens cfg's validation data as the run reads it, skipping bad
// files.
func openVal(cfg finetune.Config) (*data.Dataset, error) {
	if !cfg.Val.Given() {
		return nil, errors.New("no validation images")
	}
	dc := cfg.Val.DataConfig()
	dc.Ignore, dc.SkipBad, dc.CacheBytes = cfg.Ignore, true, -1
	if cfg.LabelMap != "" {
		lm, err := imageio.ParseLabelMap(cfg.LabelMap)
		if err != nil {
			return nil, err
		}
		dc.LabelMap = lm
	}
	ds, _, err := data.Open(context.Background(), dc)
	return ds, err
}

// withIgnore is pal over the VOC palette, with the ignore label grey in
// every column, whatever the palette.
func withIgnore(pal imageio.Palette, ignore int) imageio.Palette {
	full := imageio.VOCPalette(256)
	copy(full, pal)
	full[ignore] = color.RGBA{128, 128, 128, 255}
	return full
}

// sheetRow is example id's row: the image, its ground truth and each
// column's prediction.
func sheetRow(ds *data.Dataset, id int, path, caption string, pal imageio.Palette, cols []Column, preds []map[string][]uint8) (imageio.SheetRow, error) {
	s, err := ds.Load(id)
	if err != nil {
		return imageio.SheetRow{}, err
	}
	img, err := imageio.ReadImage(path)
	if err != nil {
		return imageio.SheetRow{}, err
	}
	gt, err := imageio.LabelImage(s.Labels, s.Width, s.Height, pal)
	if err != nil {
		return imageio.SheetRow{}, err
	}
	row := imageio.SheetRow{Caption: caption, Cells: []image.Image{img, gt}}
	for k, col := range cols {
		labels, ok := preds[k][path]
		if !ok {
			return row, fmt.Errorf("%s: no prediction for %s", col.Name, path)
		}
		b := img.Bounds()
		p, err := imageio.LabelImage(labels, b.Dx(), b.Dy(), pal)
		if err != nil {
			return row, err
		}
		row.Cells = append(row.Cells, p)
	}
	return row, nil
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

// Predict segments paths with seg and returns the labels by path; the
// first image that fails fails it.
func Predict(seg *inference.Segmenter, paths []string) (map[string][]uint8, error) {
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

// RunSheet is the contact sheet of a finished run.
type RunSheet struct {
	// Path is the sheet, in the run's folder.
	Path string
	// TensorBoard says why the sheet is not also in the run's TensorBoard
	// log; nil when it is.
	TensorBoard error
}

// WriteRun writes the contact sheet of a finished run into its folder,
// with the run's own settings (config.json) and exported model, and adds
// it to the run's TensorBoard log.
func WriteRun(res *finetune.Result, predict Predictor) (RunSheet, error) {
	b, err := os.ReadFile(filepath.Join(res.Dir, finetune.ConfigFile))
	if err != nil {
		return RunSheet{}, err
	}
	var cfg finetune.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return RunSheet{}, fmt.Errorf("%s: %w", finetune.ConfigFile, err)
	}
	model := res.Model
	if model == "" {
		model = filepath.Join(res.Dir, finetune.ModelFile)
	}
	rs := RunSheet{Path: filepath.Join(res.Dir, File)}
	if err := Write(rs.Path, cfg, nil, []Column{{"prediction", model}}, predict); err != nil {
		return RunSheet{}, err
	}
	tb, err := history.OpenTensorBoard(filepath.Join(res.Dir, finetune.TensorBoardDir), 0)
	if err == nil {
		err = tb.Image(res.Steps, "samples", rs.Path)
		if cerr := tb.Close(); err == nil {
			err = cerr
		}
	}
	rs.TensorBoard = err
	return rs, nil
}

// ReportRun writes the contact sheet of a finished run into its folder
// (WriteRun) and says where on log; a run without validation images (or
// any failure) gets a line instead, as the run itself succeeded.
func ReportRun(log io.Writer, res *finetune.Result, predict Predictor) {
	rs, err := WriteRun(res, predict)
	if err != nil {
		fmt.Fprintf(log, "segtune: no %s: %v\n", File, err)
		return
	}
	if rs.TensorBoard != nil {
		fmt.Fprintf(log, "segtune: the contact sheet is not in TensorBoard: %v\n", rs.TensorBoard)
	}
	fmt.Fprintf(log, "segtune: contact sheet of the smallest and largest validation objects: %s\n", rs.Path)
}
