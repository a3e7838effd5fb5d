package metrics

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
)

// MatrixTextClasses is the most classes WriteConfusionText prints as a
// full matrix; beyond it a table that wide is unreadable, and it lists the
// largest confusions instead.
const MatrixTextClasses = 20

// topConfusions is how many off-diagonal cells the summary lists.
const topConfusions = 10

// WriteConfusionText prints m with normalised rows (percent of each true
// class's pixels), or for more than MatrixTextClasses classes the largest
// confusions between two classes.
func WriteConfusionText(w io.Writer, m *Confusion, names []string) {
	norm := m.RowNormalized()
	if m.Classes > MatrixTextClasses {
		writeTopConfusions(w, m, names, norm)
		return
	}
	// Rows carry the class number as well, the columns' headers.
	label := func(c int) string { return fmt.Sprintf("%d %s", c, ClassName(names, c)) }
	width := len("true \\ predicted")
	for c := range m.Classes {
		width = max(width, len(label(c)))
	}
	fmt.Fprintln(w, "confusion matrix: % of each true class's pixels (rows) by predicted class (columns)")
	fmt.Fprintf(w, "%-*s", width, "true \\ predicted")
	for c := range m.Classes {
		fmt.Fprintf(w, " %5d", c)
	}
	fmt.Fprintln(w)
	for t, row := range norm {
		fmt.Fprintf(w, "%-*s", width, label(t))
		for _, v := range row {
			fmt.Fprintf(w, " %5.1f", 100*v)
		}
		fmt.Fprintln(w)
	}
}

func writeTopConfusions(w io.Writer, m *Confusion, names []string, norm [][]float64) {
	type cell struct {
		t, p int
		v    float64
	}
	var cells []cell
	for t, row := range norm {
		for p, v := range row {
			if t != p && v > 0 {
				cells = append(cells, cell{t, p, v})
			}
		}
	}
	sort.SliceStable(cells, func(i, j int) bool { return cells[i].v > cells[j].v })
	cells = cells[:min(len(cells), topConfusions)]
	fmt.Fprintf(w, "largest confusions (%d classes: the whole matrix is in its CSV and PNG forms)\n", m.Classes)
	for _, c := range cells {
		fmt.Fprintf(w, "  %5.1f %% of %s predicted as %s (%d pixels)\n", 100*c.v,
			ClassName(names, c.t), ClassName(names, c.p), m.Counts[c.t*m.Classes+c.p])
	}
}

// WriteConfusionCSV writes m's pixel counts: a header of predicted class
// names, then one row per true class, its name first.
func WriteConfusionCSV(w io.Writer, m *Confusion, names []string) error {
	cw := csv.NewWriter(w)
	header := []string{ConfusionCSVHeader}
	for c := range m.Classes {
		header = append(header, ClassName(names, c))
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for t, row := range m.Rows() {
		rec := []string{ClassName(names, t)}
		for _, v := range row {
			rec = append(rec, strconv.FormatInt(v, 10))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// rowGrid is a row-normalised matrix as plotter.GridXYZ: column c is the
// predicted class, and true class 0 is the top row.
type rowGrid [][]float64

func (g rowGrid) Dims() (c, r int)   { return len(g), len(g) }
func (g rowGrid) Z(c, r int) float64 { return g[len(g)-1-r][c] }
func (g rowGrid) X(c int) float64    { return float64(c) }
func (g rowGrid) Y(r int) float64    { return float64(r) }

// classTicks labels the grid's axes with class names; flip numbers them
// from the top, as the rows are.
type classTicks struct {
	names []string
	k     int
	flip  bool
}

func (t classTicks) Ticks(_, _ float64) []plot.Tick {
	var ticks []plot.Tick
	for c := range t.k {
		v := float64(c)
		if t.flip {
			v = float64(t.k - 1 - c)
		}
		label := ClassName(t.names, c)
		if t.k > 40 { // names would overlap; number every tenth class
			label = ""
			if c%10 == 0 {
				label = strconv.Itoa(c)
			}
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// RenderConfusionPNG draws m's row-normalised matrix as a heat map (true
// class down, predicted across; white 0 to dark 1), each cell labelled
// with its percentage when there are at most MatrixTextClasses classes.
func RenderConfusionPNG(w io.Writer, m *Confusion, names []string) error {
	k := m.Classes
	if k < 2 {
		return fmt.Errorf("a confusion heat map needs 2 or more classes, not %d", k)
	}
	norm := rowGrid(m.RowNormalized())
	// Reversed so that an empty cell is light and a full one dark.
	pal := palette.Reverse(moreland.BlackBody())
	pal.SetMin(0)
	pal.SetMax(1)
	hm := plotter.NewHeatMap(norm, pal.Palette(256))
	hm.Min, hm.Max = 0, 1
	p := plot.New()
	p.Title.Text = "confusion: share of each true class's pixels"
	p.X.Label.Text = "predicted"
	p.Y.Label.Text = "true"
	p.X.Tick.Marker = classTicks{names: names, k: k}
	p.Y.Tick.Marker = classTicks{names: names, k: k, flip: true}
	p.X.Tick.Label.Rotation = 0.8
	p.X.Tick.Label.XAlign = draw.XRight
	p.Add(hm)
	// Whole cells, not the heat map's default range through their centres.
	p.X.Min, p.X.Max = -0.5, float64(k)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(k)-0.5
	if k <= MatrixTextClasses {
		var xys plotter.XYLabels
		for t, row := range norm {
			for c, v := range row {
				xys.XYs = append(xys.XYs, plotter.XY{X: float64(c), Y: float64(k - 1 - t)})
				xys.Labels = append(xys.Labels, strconv.FormatFloat(100*v, 'f', 0, 64))
			}
		}
		labels, err := plotter.NewLabels(xys)
		if err != nil {
			return err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].XAlign = draw.XCenter
			labels.TextStyle[i].YAlign = draw.YCenter
			if v := norm[i/k][i%k]; v > 0.5 {
				labels.TextStyle[i].Color = image.White
			}
		}
		p.Add(labels)
	}
	side := 240 + min(40*k, 1600)
	cnv := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, side, side))), vgimg.UseDPI(96))
	p.Draw(draw.New(cnv))
	return imageio.EncodePNGText(w, cnv.Image(), imageio.OutputMarkKey, ConfusionMark)
}

// ConfusionMark is the text chunk value of the heat maps RenderConfusionPNG
// draws, and ConfusionCSVHeader the first cell of WriteConfusionCSV's
// files: what tells segtune's confusion files, which a later run may
// replace, from a user's files of the same names.
const (
	ConfusionMark      = "segtune eval"
	ConfusionCSVHeader = "true \\ predicted"
)

// WriteConfusionFiles writes confusion.csv (counts) and confusion.png (the
// heat map) into dir, creating it, each atomically.
func WriteConfusionFiles(dir string, m *Confusion, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csvBuf, pngBuf bytes.Buffer
	if err := WriteConfusionCSV(&csvBuf, m, names); err != nil {
		return err
	}
	if err := RenderConfusionPNG(&pngBuf, m, names); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "confusion.csv"), csvBuf.Bytes(), 0o644); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "confusion.png"), pngBuf.Bytes(), 0o644)
}
