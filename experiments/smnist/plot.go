package smnist

import (
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

// palette holds distinguishable line colours (Okabe–Ito plus black).
var palette = []color.Color{
	color.RGBA{0, 0, 0, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 158, 115, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 114, 178, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{160, 160, 0, 255},
}

// PlotAccuracy writes a PNG of the test accuracy per epoch of every run
// (one line each) to path: the full range above, and below a zoom on the
// runs whose accuracy stays within 4 points of the best final accuracy.
func PlotAccuracy(path, title string, runs []*Results) error {
	if len(runs) == 0 {
		return fmt.Errorf("smnist: no runs to plot")
	}
	best := 0.0
	for _, r := range runs {
		best = math.Max(best, r.FinalAcc)
	}
	lo := best - 0.04
	newPlot := func(t string) *plot.Plot {
		p := plot.New()
		p.Title.Text = t
		p.X.Label.Text = "epoch"
		p.Y.Label.Text = "test accuracy (S-MNIST test)"
		p.Add(plotter.NewGrid())
		return p
	}
	full := newPlot(title)
	zoom := newPlot(fmt.Sprintf("zoom: accuracy ≥ %.2f", lo))
	full.Legend.Top, full.Legend.Left = false, false
	full.Legend.YOffs = vg.Points(90)
	for i, r := range runs {
		pts := make(plotter.XYs, len(r.Epochs))
		var zpts plotter.XYs
		for j, e := range r.Epochs {
			pts[j].X, pts[j].Y = float64(e.Epoch), e.TestAcc
			if e.TestAcc >= lo {
				zpts = append(zpts, pts[j])
			}
		}
		c := palette[i%len(palette)]
		line := func(xy plotter.XYs) (*plotter.Line, *plotter.Scatter, error) {
			l, pt, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, nil, fmt.Errorf("smnist: %s: %v", r.Config.Name, err)
			}
			l.Color, l.Width = c, vg.Points(1.5)
			l.Dashes = plotutil.Dashes(i / len(palette))
			pt.Color, pt.Shape, pt.Radius = c, draw.CircleGlyph{}, vg.Points(2)
			return l, pt, nil
		}
		l, pt, err := line(pts)
		if err != nil {
			return err
		}
		full.Add(l, pt)
		full.Legend.Add(r.Config.Name, l, pt)
		if len(zpts) > len(pts)/2 {
			l, pt, err := line(zpts)
			if err != nil {
				return err
			}
			zoom.Add(l, pt)
		}
	}
	zoom.Y.Min = lo
	const dpi = 96
	cnv := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, 1200, 1100))), vgimg.UseDPI(dpi))
	dc := draw.New(cnv)
	split := dc.Min.Y + (dc.Max.Y-dc.Min.Y)*0.45
	top, bottom := dc, dc
	top.Min.Y = split
	bottom.Max.Y = split
	full.Draw(top)
	zoom.Draw(bottom)
	return atomicfile.WriteFunc(path, 0o644, func(w io.Writer) error { return png.Encode(w, cnv.Image()) })
}
