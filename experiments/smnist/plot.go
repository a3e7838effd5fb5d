package smnist

import (
	"fmt"
	"image"
	"image/png"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotAccuracy writes a PNG of the test accuracy per epoch of every run
// (one line each) to path.
func PlotAccuracy(path, title string, runs []*Results) error {
	if len(runs) == 0 {
		return fmt.Errorf("smnist: no runs to plot")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "test accuracy (S-MNIST test)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	for i, r := range runs {
		pts := make(plotter.XYs, len(r.Epochs))
		for j, e := range r.Epochs {
			pts[j].X, pts[j].Y = float64(e.Epoch), e.TestAcc
		}
		l, pt, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("smnist: %s: %v", r.Config.Name, err)
		}
		c := plotutil.Color(i)
		l.Color, l.Width = c, vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i / 7)
		pt.Color, pt.Shape, pt.Radius = c, draw.CircleGlyph{}, vg.Points(2)
		p.Add(l, pt)
		p.Legend.Add(r.Config.Name, l, pt)
	}
	const dpi = 96
	cnv := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, 1200, 750))), vgimg.UseDPI(dpi))
	p.Draw(draw.New(cnv))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, cnv.Image()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
