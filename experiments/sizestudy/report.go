package main

import (
	"encoding/json"
	"fmt"
	"github.com/segtune/segtune/internal/stats"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/atomicfile"
)

// metric is one column of the tables: a number per run.
type metric struct {
	Name string
	Get  func(r *runResult, set string) (float64, bool)
	// Descriptive marks a metric that is neither better high nor low (the
	// gap, the training loss): its verdict says "higher" or "lower".
	Descriptive bool
}

func scoreMetric(name string, f func(s scores) *float64) metric {
	return metric{Name: name, Get: func(r *runResult, set string) (float64, bool) {
		if p := f(r.Scores[set]); p != nil {
			return *p, true
		}
		return 0, false
	}}
}

func epochMetric(name, field string) metric {
	return metric{Name: name, Get: func(r *runResult, _ string) (float64, bool) {
		v, ok := r.LastEpoch[field]
		return v, ok
	}}
}

// verdict is the interval's verdict for m: gain or loss for a score,
// higher or lower for a descriptive metric, "baseline has none" where
// only the arm has the metric (the size head's F1) and "no values" where
// neither has (no small image in the set).
func (m metric) verdict(d stats.Interval, baseline, arm map[int]float64) string {
	v := d.Verdict()
	switch {
	case len(baseline) == 0 && len(arm) == 0:
		return "no values"
	case len(baseline) == 0:
		return "baseline has none"
	case m.Descriptive && v == "gain":
		return "higher"
	case m.Descriptive && v == "loss":
		return "lower"
	}
	return v
}

var (
	mIoU      = scoreMetric("person IoU", func(s scores) *float64 { return s.IoU })
	mSmall    = scoreMetric("person IoU, small images", func(s scores) *float64 { return s.IoUSmall })
	mLarge    = scoreMetric("person IoU, large images", func(s scores) *float64 { return s.IoULarge })
	mGap      = descriptive(scoreMetric("gap (large − small)", func(s scores) *float64 { return s.Gap }))
	mSizeF1   = epochMetric("size head F1 (training, last epoch)", "size_f1_train")
	mLoss     = metric{Name: "training loss (last epoch)", Get: func(r *runResult, _ string) (float64, bool) { return r.TrainLoss, true }, Descriptive: true}
	reportMet = []metric{mIoU, mSmall, mLarge, mGap, mSizeF1, mLoss}
)

func descriptive(m metric) metric { m.Descriptive = true; return m }

// values returns m of arm's runs over seeds, by seed.
func (st *study) values(a arm, seeds []int, set string, m metric) map[int]float64 {
	out := map[int]float64{}
	for _, s := range seeds {
		if r := st.results[runKey(a, s)]; r != nil {
			if v, ok := m.Get(r, set); ok {
				out[s] = v
			}
		}
	}
	return out
}

func sortedSeeds(m map[int]float64) []int {
	var s []int
	for k := range m {
		s = append(s, k)
	}
	sort.Ints(s)
	return s
}

func list(m map[int]float64) []float64 {
	var out []float64
	for _, s := range sortedSeeds(m) {
		out = append(out, m[s])
	}
	return out
}

// report writes results.json, tables.md, curves.png and paired.png.
func (st *study) report(sel *selection, best arm) error {
	out := st.cfg.Out
	var runs []*runResult
	for _, r := range st.results {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].Phase != runs[j].Phase {
			return runs[i].Phase < runs[j].Phase
		}
		if runs[i].Arm != runs[j].Arm {
			return runs[i].Arm < runs[j].Arm
		}
		return runs[i].Seed < runs[j].Seed
	})
	js, err := json.MarshalIndent(map[string]any{
		"epochs": st.cfg.Epochs, "crop": st.cfg.Crop, "batch": st.cfg.Batch, "limit": st.cfg.Limit,
		"sets": st.sets, "arms": append(st.phase1Arms(), stepArm(best)), "selection": sel, "runs": runs,
	}, "", " ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	st.tables(&b, sel, best)
	if err := atomicfile.Write(filepath.Join(out, "tables.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprint(st.cfg.Stdout, b.String())
	if err := st.curves(filepath.Join(out, "curves.png"), best); err != nil {
		return err
	}
	if len(st.seeds(2)) > 0 && st.cfg.Phase != "1" {
		return st.pairedPlot(filepath.Join(out, "paired.png"), best)
	}
	return nil
}

// tables renders the study's Markdown tables.
func (st *study) tables(w io.Writer, sel *selection, best arm) {
	c := st.cfg
	sel1 := st.sets[0].Name
	fmt.Fprintf(w, "# Size regularizer study: person on CamVid\n\n")
	fmt.Fprintf(w, "Train on %s, select on %s, report on %s (CamVid train); CamVid val is the training sequence (sanity only). "+
		"%d epochs, batch %d, whole frames at %s, balanced batches for every arm, AdamW 2e-4 with poly decay; last epoch scored. "+
		"Small/large at the training set's threshold. Intervals: 95 %%, Student's t on the paired differences.", seqTrain, seqSelect, seqReport, c.Epochs, c.Batch, c.Crop)
	if c.Limit > 0 {
		fmt.Fprintf(w, " **Smoke run: only the first %d frames of every sequence.**", c.Limit)
	}
	fmt.Fprintf(w, "\n\n## Phase 1 (seeds %s): selection sequence %s\n\n", seedRange(st.seeds(1)), seqSelect)
	fmt.Fprintln(w, "| arm | person IoU | small | large | gap | Δ person IoU vs baseline | training loss (× baseline) | size F1 (train) | λ mean / max | ε before projection | hinges active | minutes/run |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	seeds := st.seeds(1)
	arms := append(st.phase1Arms(), stepArm(best))
	base := st.values(baselineArm, seeds, sel1, mIoU)
	for _, a := range arms {
		col := func(m metric) string { return stats.MeanSD(list(st.values(a, seeds, sel1, m))) }
		ratio := "—"
		if a.Key != baselineArm.Key {
			var rs []float64
			for _, s := range seeds {
				r, b := st.results[runKey(a, s)], st.results[runKey(baselineArm, s)]
				if r != nil && b != nil && b.TrainLoss > 0 {
					rs = append(rs, r.TrainLoss/b.TrainLoss)
				}
			}
			ratio = stats.MeanSD(rs)
		}
		diff := "—"
		if a.Key != baselineArm.Key {
			diff = pairedDiff(st.values(a, seeds, sel1, mIoU), base).String()
		}
		lam := fmt.Sprintf("%s / %s", col(epochMetric("", "reg_lambda_mean")), col(epochMetric("", "reg_lambda_max")))
		minutes := stats.MeanSD(list(st.values(a, seeds, sel1, metric{Get: func(r *runResult, _ string) (float64, bool) { return r.Seconds / 60, true }})))
		name := a.Name
		if a.Key == sel.Best {
			name = "**" + name + "** (selected)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
			col(mIoU), col(mSmall), col(mLarge), col(mGap), diff, ratio, col(mSizeF1), lam,
			col(epochMetric("", "reg_eps_before")), col(epochMetric("", "reg_hinge_active")), minutes)
	}
	fmt.Fprintf(w, "\nSelection: %s. Criterion: %s.", best.Name, sel.Criterion)
	if len(sel.Collapsed) > 0 {
		fmt.Fprintf(w, " Collapsed: %s.", strings.Join(sel.Collapsed, ", "))
	}
	fmt.Fprintln(w)
	if c.Phase == "1" || len(st.seeds(2)) == 0 {
		return
	}
	for i, ds := range st.sets {
		title := map[int]string{0: "selection sequence " + seqSelect + " (phase 2 seeds, not used to select)", 1: "**report sequence " + seqReport + "**", 2: "CamVid val (sequence 0016E5, the training sequence: sanity check)"}[i]
		if title == "" {
			title = "extra folder " + strings.TrimPrefix(ds.Name, "extra_") + " (" + ds.Images + ")"
		}
		fmt.Fprintf(w, "\n## Phase 2 (seeds %s): %s\n\n", seedRange(st.seeds(2)), title)
		fmt.Fprintf(w, "| metric | baseline | %s | paired difference [95 %% CI] | verdict |\n| --- | --- | --- | --- | --- |\n", best.Name)
		for _, m := range reportMet {
			bv, av := st.values(baselineArm, st.seeds(2), ds.Name, m), st.values(best, st.seeds(2), ds.Name, m)
			d := pairedDiff(av, bv)
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.Name, stats.MeanSD(list(bv)), stats.MeanSD(list(av)), d, m.verdict(d, bv, av))
		}
	}
}

func seedRange(s []int) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) == 1 {
		return fmt.Sprint(s[0])
	}
	return fmt.Sprintf("%d–%d", s[0], s[len(s)-1])
}

// curves plots seed 1 of the baseline, the paper's constants, the
// selected arm and its --projection step variant: loss per step and the
// regularizer's state per epoch (history.RegularizerPanels).
func (st *study) curves(path string, best arm) error {
	var runs []history.Run
	for _, a := range []arm{baselineArm, paperArm, best, stepArm(best)} {
		r := st.results[runKey(a, 1)]
		if r == nil {
			continue
		}
		recs, err := history.Read(filepath.Join(r.Dir, finetune.HistoryFile))
		if err != nil {
			return err
		}
		runs = append(runs, history.Run{Name: a.Name, Records: recs})
	}
	if len(runs) == 0 {
		return nil
	}
	return history.PlotPNG(path, runs, history.PlotOptions{Title: "CamVid person, seed 1, training on " + seqTrain, Metric: "size_f1_train"})
}

// pairedPlot draws phase 2's paired differences (selected − baseline) on
// the report sequence: each seed's difference and the mean with its 95 %
// interval, one column per metric.
func (st *study) pairedPlot(path string, best arm) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s − baseline on %s, paired by seed (95 %% t interval)", best.Name, seqReport)
	p.Y.Label.Text = "difference"
	p.Add(plotter.NewGrid())
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = color.Gray{128}
	p.Add(zero)
	mets := []metric{mIoU, mSmall, mLarge, mGap}
	var names []string
	set := st.sets[1].Name
	for i, m := range mets {
		names = append(names, m.Name)
		a, b := st.values(best, st.seeds(2), set, m), st.values(baselineArm, st.seeds(2), set, m)
		var pts plotter.XYs
		for _, s := range sortedSeeds(a) {
			if bv, ok := b[s]; ok {
				pts = append(pts, plotter.XY{X: float64(i) + 0.15, Y: a[s] - bv})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(1), draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(sc)
		d := pairedDiff(a, b)
		if d.N >= 2 && !math.IsNaN(d.Lo) {
			eb := &errPoints{XYs: plotter.XYs{{X: float64(i), Y: d.Mean}}, YErrors: plotter.YErrors{{Low: d.Mean - d.Lo, High: d.Hi - d.Mean}}}
			bars, err := plotter.NewYErrorBars(eb)
			if err != nil {
				return err
			}
			bars.Color, bars.Width = plotutil.Color(0), vg.Points(2)
			mean, err := plotter.NewScatter(eb.XYs)
			if err != nil {
				return err
			}
			mean.Color, mean.Shape, mean.Radius = plotutil.Color(0), draw.BoxGlyph{}, vg.Points(4)
			p.Add(bars, mean)
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(mets))-0.5
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// errPoints is a plotter.XYer with YErrors.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}
