package history

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/segtune/segtune/internal/atomicfile"
)

// Run is one training run's records under a display name, for plots that
// compare runs (say, baseline and regularised).
type Run struct {
	Name    string
	Records []Record
}

// DefaultSmoothing is the exponential-moving-average weight applied to
// the per-step loss when PlotOptions.Smoothing is 0.
const DefaultSmoothing = 0.9

// PlotOptions controls PlotPNG and RenderPNG.
type PlotOptions struct {
	// Width and Height are the image size in pixels (default 1200×900).
	Width, Height int
	// Title is drawn above the loss panel.
	Title string
	// Smoothing is the EMA weight in [0, 1) for the step loss: 0 means
	// DefaultSmoothing, a negative value draws the raw loss only.
	Smoothing float64
	// Metric is the epoch field plotted in the lower panel (default
	// "val_miou"). The panel is left out when no run has it.
	Metric string

	fixedHeight bool // Height was given: the regularizer's panels share it
}

// RegularizerPanels lists the panels RenderPNG adds below the others when
// a run logged the size regularizer's state (finetune's reg_* fields):
// each panel's title and the epoch fields it draws, one line each.
var RegularizerPanels = []struct {
	Title  string
	Fields []string
}{
	{"dual multipliers λ (after the epoch's dual step)", []string{"reg_lambda_mean", "reg_lambda_max"}},
	{"Σ τ, active hinges, size head F1", []string{"reg_tau_sum", "reg_hinge_active", "size_f1_train", "size_f1_val"}},
	{"ε before and after the epoch's projection", []string{"reg_eps_before", "reg_eps_after"}},
}

// regularizerPanels builds RegularizerPanels for the runs that have the
// fields: colours tell the fields apart, dashes the runs.
func regularizerPanels(runs []Run) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, spec := range RegularizerPanels {
		p := plot.New()
		p.Title.Text = spec.Title
		p.X.Label.Text = "epoch"
		p.X.Tick.Marker = wholeTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		any := false
		for ri, run := range runs {
			for fi, field := range spec.Fields {
				pts := metricPoints(run.Records, field)
				if len(pts) == 0 {
					continue
				}
				any = true
				l, pt, err := plotter.NewLinePoints(pts)
				if err != nil {
					return nil, fmt.Errorf("history: %s: %v", field, err)
				}
				c := plotutil.Color(fi)
				l.Color, pt.Color = c, c
				l.Width = vg.Points(1.5)
				l.Dashes = plotutil.Dashes(ri)
				pt.Shape = draw.CircleGlyph{}
				pt.Radius = vg.Points(2)
				p.Add(l, pt)
				name := field
				if len(runs) > 1 {
					name = fmt.Sprintf("%s (%s)", field, runName(run, ri))
				}
				p.Legend.Add(name, l, pt)
			}
		}
		if any {
			out = append(out, p)
		}
	}
	return out, nil
}

func runName(r Run, i int) string {
	if r.Name == "" {
		return fmt.Sprintf("run %d", i+1)
	}
	return r.Name
}

func (o *PlotOptions) defaults() error {
	if o.Width == 0 {
		o.Width = 1200
	}
	if o.Height == 0 {
		o.Height = 900
	} else {
		o.fixedHeight = true
	}
	if o.Width < 100 || o.Height < 100 || o.Width > 10000 || o.Height > 10000 {
		return fmt.Errorf("history: plot size %d×%d outside 100..10000 pixels", o.Width, o.Height)
	}
	if o.Smoothing == 0 {
		o.Smoothing = DefaultSmoothing
	}
	if o.Smoothing >= 1 || math.IsNaN(o.Smoothing) {
		return fmt.Errorf("history: smoothing %v must be below 1", o.Smoothing)
	}
	if o.Metric == "" {
		o.Metric = "val_miou"
	}
	return nil
}

// PlotPNG renders the runs' training curves (see RenderPNG) and writes the
// PNG to path atomically (temporary file, sync, rename), so a reader never
// sees a half-written image.
func PlotPNG(path string, runs []Run, opt PlotOptions) error {
	var buf bytes.Buffer
	if err := RenderPNG(&buf, runs, opt); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes(), 0o644) // a plot is for sharing
}

// RenderPNG draws the training curves of runs as a PNG: an upper panel
// with the loss per step (faint raw values and an EMA-smoothed line per
// run), and, if any run has it, a lower panel with opt.Metric per epoch.
// Runs are told apart by colour, with a legend. Non-finite values are
// skipped.
func RenderPNG(w io.Writer, runs []Run, opt PlotOptions) error {
	if err := opt.defaults(); err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("history: no runs to plot")
	}
	loss := plot.New()
	loss.Title.Text = opt.Title
	loss.X.Label.Text = "step"
	loss.X.Tick.Marker = wholeTicks{}
	loss.Y.Label.Text = "training loss"
	loss.Add(plotter.NewGrid())
	loss.Legend.Top = true

	metric := plot.New()
	metric.X.Label.Text = "epoch"
	metric.X.Tick.Marker = wholeTicks{}
	metric.Y.Label.Text = opt.Metric
	metric.Add(plotter.NewGrid())
	metric.Legend.Top = true
	metric.Legend.Left = true
	hasMetric, hasLoss := false, false

	for i, run := range runs {
		c := plotutil.Color(i)
		name := run.Name
		if name == "" {
			name = fmt.Sprintf("run %d", i+1)
		}
		pts := lossPoints(run.Records)
		if len(pts) > 0 {
			hasLoss = true
			if opt.Smoothing > 0 && len(pts) > 1 {
				raw, err := plotter.NewLine(pts)
				if err != nil {
					return fmt.Errorf("history: %s: %v", name, err)
				}
				raw.Color = faint(c)
				raw.Width = vg.Points(0.75)
				loss.Add(raw)
				pts = smooth(pts, opt.Smoothing)
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("history: %s: %v", name, err)
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			loss.Add(l)
			loss.Legend.Add(name, l)
		}
		if mp := metricPoints(run.Records, opt.Metric); len(mp) > 0 {
			hasMetric = true
			l, pt, err := plotter.NewLinePoints(mp)
			if err != nil {
				return fmt.Errorf("history: %s: %v", name, err)
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			pt.Color = c
			pt.Shape = draw.CircleGlyph{}
			pt.Radius = vg.Points(2.5)
			metric.Add(l, pt)
			metric.Legend.Add(name, l, pt)
		}
	}
	if !hasLoss && !hasMetric {
		return fmt.Errorf("history: no loss or %s values to plot", opt.Metric)
	}
	regPanels, err := regularizerPanels(runs)
	if err != nil {
		return err
	}

	// UseImage fixes the size in pixels exactly (UseWH rounds from
	// points); the canvas draws on its own copy, read back by Image.
	const dpi = 96
	height := opt.Height
	if len(regPanels) > 0 && !opt.fixedHeight {
		height += height * len(regPanels) / 3 // room for the regularizer's panels
	}
	cnv := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, opt.Width, height))), vgimg.UseDPI(dpi))
	dc := draw.New(cnv)
	// The regularizer's panels take the bottom, a third of the base height each.
	if len(regPanels) > 0 {
		unit := (dc.Max.Y - dc.Min.Y) / vg.Length(3+len(regPanels))
		for i, p := range regPanels {
			c := dc
			c.Max.Y = dc.Min.Y + unit*vg.Length(len(regPanels)-i)
			c.Min.Y = c.Max.Y - unit
			p.Draw(c)
		}
		dc.Min.Y += unit * vg.Length(len(regPanels))
	}
	switch {
	case hasLoss && hasMetric:
		// Loss gets the larger share: it is the denser, noisier curve.
		split := dc.Min.Y + (dc.Max.Y-dc.Min.Y)*0.42
		top, bottom := dc, dc
		top.Min.Y = split
		bottom.Max.Y = split
		loss.Draw(top)
		metric.Draw(bottom)
	case hasLoss:
		loss.Draw(dc)
	default:
		metric.Title.Text = opt.Title
		metric.Draw(dc)
	}
	if err := png.Encode(w, cnv.Image()); err != nil {
		return fmt.Errorf("history: encoding PNG: %w", err)
	}
	return nil
}

// wholeTicks labels an axis of counts (steps, epochs): gonum's default
// ticks, with whole-number labels printed without decimals ("25", not
// "25.00") and fractional ticks left unlabelled.
type wholeTicks struct{}

// Ticks implements plot.Ticker.
func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	if lo, hi := math.Ceil(min), math.Floor(max); hi-lo <= 12 && hi >= lo {
		// Few epochs: label each one.
		var ticks []plot.Tick
		for v := lo; v <= hi; v++ {
			ticks = append(ticks, plot.Tick{Value: v, Label: FormatNumber(v)})
		}
		return ticks
	}
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			if ticks[i].Value == math.Trunc(ticks[i].Value) {
				ticks[i].Label = FormatNumber(ticks[i].Value)
			} else {
				ticks[i].Label = ""
			}
		}
	}
	return ticks
}

// lossPoints returns (step, loss) of the step records, or of the epoch
// records where a run logged no steps.
func lossPoints(recs []Record) plotter.XYs {
	var pts plotter.XYs
	for _, kind := range []string{KindStep, KindEpoch} {
		for _, r := range recs {
			if r.Kind == kind && finiteXY(float64(r.Step), r.Loss) {
				pts = append(pts, plotter.XY{X: float64(r.Step), Y: r.Loss})
			}
		}
		if len(pts) > 0 {
			break
		}
	}
	return pts
}

// metricPoints returns (epoch, value) of the epoch records with the metric,
// epochs numbered from 1 as the run's progress lines and table number them,
// and the base model's record at epoch 0.
func metricPoints(recs []Record, name string) plotter.XYs {
	var pts plotter.XYs
	for _, r := range recs {
		if r.Kind != KindEpoch && r.Kind != KindBase {
			continue
		}
		if v, ok := r.Value(name); ok && finiteXY(float64(r.Epoch+1), v) {
			pts = append(pts, plotter.XY{X: float64(r.Epoch + 1), Y: v})
		}
	}
	return pts
}

func finiteXY(x, y float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && !math.IsNaN(y) && !math.IsInf(y, 0)
}

// smooth returns the debiased exponential moving average of the y values
// (as TensorBoard draws it), so the start is not pulled toward zero.
func smooth(pts plotter.XYs, alpha float64) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	var ema, weight float64
	for i, p := range pts {
		ema = alpha*ema + (1-alpha)*p.Y
		weight = alpha*weight + (1 - alpha)
		out[i] = plotter.XY{X: p.X, Y: ema / weight}
	}
	return out
}

func faint(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	// Blend toward white rather than use alpha, so overlapping raw
	// curves stay light.
	mix := func(v uint32) uint8 { return uint8((v>>8)/3 + 255*2/3) }
	return color.RGBA{mix(r), mix(g), mix(b), 255}
}
