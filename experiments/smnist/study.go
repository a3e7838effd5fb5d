package smnist

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/stats"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// The S-MNIST half of the size study (docs/study.md): baseline and F1 at
// the same learning rate, α chosen per learning rate on held-out training
// pairs (phase A), then fresh seeds paired with the baseline by seed and
// scored on the MNIST test set (phase B). Every run is Run; this file only
// splits the data, schedules the runs, keeps their results on disk so that
// a rerun does only what is missing, and computes the paired statistics.

// HoldOut splits an MNIST training set: n images chosen by a permutation
// seeded with seed are held out, the others are the training part, both in
// their original order. heldIdx lists the held-out images' indices into
// mnist. S-MNIST built from each part (SMNIST) keeps every image together
// with its rescaled copy, so no copy of a held-out image is trained on.
func HoldOut(mnist *Set, n int, seed uint64) (train, held *Set, heldIdx []int, err error) {
	if err := mnist.check("training"); err != nil {
		return nil, nil, nil, err
	}
	if n <= 0 || n >= mnist.Len() {
		return nil, nil, nil, fmt.Errorf("smnist: hold out %d of %d images: want 0 < n < %d", n, mnist.Len(), mnist.Len())
	}
	perm := rand.New(rand.NewPCG(seed, 0x401d)).Perm(mnist.Len())
	heldIdx = perm[:n]
	slices.Sort(heldIdx)
	isHeld := make([]bool, mnist.Len())
	for _, i := range heldIdx {
		isHeld[i] = true
	}
	train, held = &Set{}, &Set{}
	for i := range mnist.Len() {
		dst := train
		if isHeld[i] {
			dst = held
		}
		dst.Pixels = append(dst.Pixels, mnist.Image(i)...)
		dst.Labels = append(dst.Labels, mnist.Labels[i])
	}
	return train, held, heldIdx, nil
}

// StudyData is S-MNIST split for the study: one training set, and two
// evaluation sets sharing it — Select.Test is the held-out training pairs
// (phase A), Report.Test the S-MNIST test set (phase B). The size threshold
// is the training part's mean, for all three.
type StudyData struct {
	Select, Report *Data
	// HeldIdx are the held-out MNIST training images (indices into the
	// MNIST training set given to PrepareStudy).
	HeldIdx []int
}

// PrepareStudy holds out holdN of the first trainN MNIST training images
// (trainN ≤ 0: all) with split seed splitSeed, and builds S-MNIST of the
// rest (training), of the held-out images (selection) and of the first
// testN MNIST test images (≤ 0: all; reporting).
func PrepareStudy(mnistTrain, mnistTest *Set, trainN, testN, holdN int, splitSeed uint64) (*StudyData, error) {
	if err := mnistTest.check("test"); err != nil {
		return nil, err
	}
	tr, held, idx, err := HoldOut(mnistTrain.Head(trainN), holdN, splitSeed)
	if err != nil {
		return nil, err
	}
	sel := &Data{Train: SMNIST(tr, 0), Test: SMNIST(held, 0)}
	sizes := sel.Train.Sizes()
	sel.MeanSize = MeanSize(sizes)
	sel.TrainClass = SizeClasses(sizes, sel.MeanSize)
	sel.TestClass = SizeClasses(sel.Test.Sizes(), sel.MeanSize)
	rep := *sel
	rep.Test = SMNIST(mnistTest.Head(testN), 0)
	rep.TestClass = SizeClasses(rep.Test.Sizes(), sel.MeanSize)
	return &StudyData{Select: sel, Report: &rep, HeldIdx: idx}, nil
}

// StudyConfig is what the study runs; it is stored in OUT/study.json and a
// rerun into the same folder must give the same.
type StudyConfig struct {
	// Base is every run's configuration; Alpha, LR, Seed and Name are set
	// per run.
	Base Config `json:"base"`
	// LRs are the network's learning rates; at each, the baseline and the
	// F1 arms run at the same one.
	LRs []float64 `json:"lrs"`
	// Alphas are the F1 strengths of phase A (all > 0; the baseline α = 0
	// runs anyway).
	Alphas []float64 `json:"alphas"`
	// SelectSeeds are phase A's seeds, ReportSeeds phase B's (disjoint).
	SelectSeeds []uint64 `json:"select_seeds"`
	ReportSeeds []uint64 `json:"report_seeds"`
	// Data describes the split (recorded, checked on reruns).
	TrainN    int    `json:"train_n"`
	TestN     int    `json:"test_n"`
	HoldN     int    `json:"hold_n"`
	SplitSeed uint64 `json:"split_seed"`
}

func (c StudyConfig) validate() error {
	if len(c.LRs) == 0 || len(c.Alphas) == 0 || len(c.SelectSeeds) == 0 || len(c.ReportSeeds) == 0 {
		return errors.New("smnist study: need learning rates, α values, selection seeds and report seeds")
	}
	for _, a := range c.Alphas {
		if !(a > 0) {
			return fmt.Errorf("smnist study: α %g: the F1 arms need α > 0 (the baseline runs anyway)", a)
		}
	}
	for _, lr := range c.LRs {
		if !(lr > 0) {
			return fmt.Errorf("smnist study: learning rate %g must be > 0", lr)
		}
	}
	for _, s := range c.ReportSeeds {
		if slices.Contains(c.SelectSeeds, s) {
			return fmt.Errorf("smnist study: seed %d is both a selection and a report seed; phase B needs fresh seeds", s)
		}
	}
	return nil
}

// Phases of the study.
const (
	PhaseSelect = "A" // held-out training pairs, every α
	PhaseReport = "B" // MNIST test pairs, baseline and the chosen α
)

// StudyRun identifies one run of the study.
type StudyRun struct {
	Phase string  `json:"phase"`
	LR    float64 `json:"lr"`
	Alpha float64 `json:"alpha"`
	Seed  uint64  `json:"seed"`
}

// Key is the run's file name stem in OUT/runs.
func (r StudyRun) Key() string {
	return fmt.Sprintf("%s_lr%g_a%g_s%d", r.Phase, r.LR, r.Alpha, r.Seed)
}

// Arm names an arm in tables: "baseline" or "F1 α=…".
func Arm(alpha float64) string {
	if alpha == 0 {
		return "baseline"
	}
	return fmt.Sprintf("F1 α=%g", alpha)
}

// Selection is phase A's choice of α per learning rate.
type Selection struct {
	LR    float64 `json:"lr"`
	Alpha float64 `json:"alpha"`
	// Score is the chosen arm's mean held-out final accuracy over the
	// selection seeds; Baseline the baseline's.
	Score    float64 `json:"score"`
	Baseline float64 `json:"baseline"`
}

// Study runs the study into Out.
type Study struct {
	Cfg StudyConfig
	Out string
	// Jobs is how many runs train at once (≤ 0: 1).
	Jobs int
	// Train trains one run (nil: Run). Tests replace it.
	Train func(Config, *Data) (*Results, error)
	// Log receives progress lines (nil: none).
	Log func(string)
	// SelectOnly stops after phase A and the selection (a supplementary
	// sweep of α; the results hold no phase B).
	SelectOnly bool
}

func (s *Study) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log(fmt.Sprintf(format, args...))
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// checkConfig stores the study's configuration in Out, or, when one is
// there, refuses a different one (a rerun must not mix settings).
func (s *Study) checkConfig() error {
	if err := os.MkdirAll(filepath.Join(s.Out, "runs"), 0o755); err != nil {
		return err
	}
	path := filepath.Join(s.Out, "study.json")
	cur, err := json.Marshal(s.Cfg)
	if err != nil {
		return err
	}
	var saved json.RawMessage
	ok, err := readJSON(path, &saved)
	if err != nil {
		return err
	}
	if !ok {
		return writeJSON(path, s.Cfg)
	}
	var a, b any
	if err := json.Unmarshal(saved, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(cur, &b); err != nil {
		return err
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("smnist study: %s holds a study with other settings; use another --out or the same flags", path)
	}
	return nil
}

// config returns run r's configuration.
func (s *Study) config(r StudyRun) Config {
	c := s.Cfg.Base
	c.Alpha, c.LR, c.Seed = r.Alpha, r.LR, r.Seed
	c.Name = fmt.Sprintf("%s lr=%g %s seed %d", r.Phase, r.LR, Arm(r.Alpha), r.Seed)
	return c
}

// runAll returns the results of runs in order: a run whose file is in
// Out/runs is read back, the others are trained (Jobs at a time) on d and
// written there as soon as each finishes.
func (s *Study) runAll(runs []StudyRun, d *Data) ([]*Results, error) {
	out := make([]*Results, len(runs))
	var todo []int
	for i, r := range runs {
		var res Results
		ok, err := readJSON(filepath.Join(s.Out, "runs", r.Key()+".json"), &res)
		if err != nil {
			return nil, err
		}
		if ok {
			out[i] = &res
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) > 0 {
		s.logf("%d of %d runs to train", len(todo), len(runs))
	}
	train := s.Train
	if train == nil {
		train = Run
	}
	sem := make(chan struct{}, max(1, s.Jobs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := runs[i]
			res, err := train(s.config(r), d)
			if err == nil {
				err = writeJSON(filepath.Join(s.Out, "runs", r.Key()+".json"), res)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", r.Key(), err)
				return
			}
			out[i] = res
			s.logf("%s: final acc %.4f, last-10 %.4f, size F1 %.3f, %.0f s", r.Key(), res.FinalAcc, res.MeanLast, res.SizeF1Test, res.WallS)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// SelectRuns are phase A's runs: at every learning rate the baseline and
// every α, each with every selection seed.
func (c StudyConfig) SelectRuns() []StudyRun {
	var runs []StudyRun
	for _, lr := range c.LRs {
		for _, a := range append([]float64{0}, c.Alphas...) {
			for _, seed := range c.SelectSeeds {
				runs = append(runs, StudyRun{PhaseSelect, lr, a, seed})
			}
		}
	}
	return runs
}

// ReportRuns are phase B's runs for the selections: at every learning
// rate the baseline and the chosen α, each with every report seed.
func (c StudyConfig) ReportRuns(sel []Selection) []StudyRun {
	var runs []StudyRun
	for _, sl := range sel {
		for _, a := range []float64{0, sl.Alpha} {
			for _, seed := range c.ReportSeeds {
				runs = append(runs, StudyRun{PhaseReport, sl.LR, a, seed})
			}
		}
	}
	return runs
}

// Choose picks, per learning rate, the α > 0 with the best mean final
// accuracy on the held-out pairs over the selection seeds (ties: the
// smaller α). results are SelectRuns' in order.
func (c StudyConfig) Choose(runs []StudyRun, results []*Results) []Selection {
	mean := func(lr, a float64) float64 {
		var t float64
		var n int
		for i, r := range runs {
			if r.LR == lr && r.Alpha == a {
				t += results[i].FinalAcc
				n++
			}
		}
		return t / float64(n)
	}
	var out []Selection
	for _, lr := range c.LRs {
		best := Selection{LR: lr, Score: math.Inf(-1), Baseline: mean(lr, 0)}
		for _, a := range c.Alphas {
			if m := mean(lr, a); m > best.Score || (m == best.Score && a < best.Alpha) {
				best.Alpha, best.Score = a, m
			}
		}
		out = append(out, best)
	}
	return out
}

// StudyResults is what Study.Run returns and writes to OUT/results.json.
type StudyResults struct {
	Config    StudyConfig `json:"config"`
	Selection []Selection `json:"selection"`
	// Select and Report summarise every run of phases A and B.
	Select []RunSummary `json:"select"`
	Report []RunSummary `json:"report"`
	// Paired holds phase B's paired differences (chosen α − baseline) per
	// learning rate and metric.
	Paired []PairedMetric `json:"paired"`
	// TrainExamples, SelectExamples, TestExamples and Positives describe
	// the data; WallS is the summed training time of every run.
	TrainExamples  int     `json:"train_examples"`
	SelectExamples int     `json:"select_examples"`
	TestExamples   int     `json:"test_examples"`
	Positives      int     `json:"positives"`
	MeanSize       float64 `json:"mean_size"`
	WallS          float64 `json:"wall_s"`

	selectRes, reportRes []*Results
}

// RunSummary is one run's numbers on its evaluation set (held-out pairs in
// phase A, the test set in phase B).
type RunSummary struct {
	StudyRun
	FinalAcc    float64 `json:"final_acc"`
	MeanLast    float64 `json:"mean_last10_acc"`
	AccOriginal float64 `json:"acc_original"`
	AccDoubled  float64 `json:"acc_doubled"`
	SizeF1      float64 `json:"size_f1"`
	SizeF1Train float64 `json:"size_f1_train"`
	TrainLoss   float64 `json:"train_loss"`
	Epochs      int     `json:"epochs"`
	WallS       float64 `json:"wall_s"`
}

func summarise(r StudyRun, res *Results) RunSummary {
	last := res.Epochs[len(res.Epochs)-1]
	return RunSummary{StudyRun: r, FinalAcc: res.FinalAcc, MeanLast: res.MeanLast, AccOriginal: last.TestAccOriginal,
		AccDoubled: last.TestAccDoubled, SizeF1: res.SizeF1Test, SizeF1Train: last.SizeF1Train, TrainLoss: last.TrainLoss,
		Epochs: len(res.Epochs), WallS: res.WallS}
}

// Metrics are the per-run numbers the paired table reports, by name.
// A metric with LowerBetter set (the training loss) has its verdict
// turned round: an interval above zero is a "loss".
var Metrics = []struct {
	Name        string
	Get         func(RunSummary) float64
	LowerBetter bool
}{
	{"test accuracy, last epoch", func(r RunSummary) float64 { return r.FinalAcc }, false},
	{"test accuracy, mean of last 10 epochs", func(r RunSummary) float64 { return r.MeanLast }, false},
	{"accuracy on the original half", func(r RunSummary) float64 { return r.AccOriginal }, false},
	{"accuracy on the doubled half", func(r RunSummary) float64 { return r.AccDoubled }, false},
	{"size F1 (test)", func(r RunSummary) float64 { return r.SizeF1 }, false},
	{"training cross entropy, last epoch", func(r RunSummary) float64 { return r.TrainLoss }, true},
}

// PairedMetric is one metric's comparison at one learning rate.
type PairedMetric struct {
	LR       float64   `json:"lr"`
	Alpha    float64   `json:"alpha"`
	Metric   string    `json:"metric"`
	Base     []float64 `json:"baseline"` // per seed, in seed order
	Arm      []float64 `json:"arm"`
	Seeds    []uint64  `json:"seeds"`
	BaseMean Num       `json:"baseline_mean"`
	BaseSD   Num       `json:"baseline_sd"`
	ArmMean  Num       `json:"arm_mean"`
	ArmSD    Num       `json:"arm_sd"`
	Diff     Paired    `json:"diff"`
}

// Num is a float64 that JSON writes as null when it is not finite (a
// standard deviation of one seed).
type Num float64

// MarshalJSON writes NaN and ±Inf as null.
func (x Num) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(x))
}

// Paired is a mean paired difference with its 95 % interval
// (stats.TInterval) and the verdict for the metric: "gain" or "loss" only
// when the interval excludes zero, "loss" for a rise of a metric where
// lower is better.
type Paired struct {
	stats.Interval
	Verdict string
}

// TInterval is stats.TInterval with its verdict, higher being better.
func TInterval(xs []float64) Paired {
	iv := stats.TInterval(xs)
	return Paired{Interval: iv, Verdict: iv.Verdict()}
}

// MarshalJSON writes NaN (fewer than two pairs) as null.
func (p Paired) MarshalJSON() ([]byte, error) {
	f := func(x float64) any {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	}
	return json.Marshal(map[string]any{"n": p.N, "mean": f(p.Mean), "sd": f(p.SD), "lo": f(p.Lo), "hi": f(p.Hi), "verdict": p.Verdict})
}

// PairBySeed matches arm and baseline runs by seed (only seeds both have,
// in increasing order) and returns their values of get.
func PairBySeed(arm, base []RunSummary, get func(RunSummary) float64) (seeds []uint64, a, b []float64) {
	bySeed := map[uint64]RunSummary{}
	for _, r := range base {
		bySeed[r.Seed] = r
	}
	sorted := slices.Clone(arm)
	slices.SortFunc(sorted, func(x, y RunSummary) int { return int(x.Seed) - int(y.Seed) })
	for _, r := range sorted {
		if q, ok := bySeed[r.Seed]; ok {
			seeds = append(seeds, r.Seed)
			a, b = append(a, get(r)), append(b, get(q))
		}
	}
	return seeds, a, b
}

func diffs(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

// Run runs (or reads back) phase A, chooses α per learning rate (kept in
// OUT/selection.json once made), runs (or reads back) phase B and writes
// OUT/results.json and OUT/tables.md.
func (s *Study) Run(d *StudyData) (*StudyResults, error) {
	if err := s.Cfg.validate(); err != nil {
		return nil, err
	}
	if err := s.checkConfig(); err != nil {
		return nil, err
	}
	aRuns := s.Cfg.SelectRuns()
	s.logf("phase A: %d runs on the held-out pairs (%d examples)", len(aRuns), d.Select.Test.Len())
	aRes, err := s.runAll(aRuns, d.Select)
	if err != nil {
		return nil, err
	}
	var sel []Selection
	selPath := filepath.Join(s.Out, "selection.json")
	ok, err := readJSON(selPath, &sel)
	if err != nil {
		return nil, err
	}
	if !ok {
		sel = s.Cfg.Choose(aRuns, aRes)
		if err := writeJSON(selPath, sel); err != nil {
			return nil, err
		}
	}
	for _, sl := range sel {
		s.logf("selection: lr %g: α = %g (held-out accuracy %.4f, baseline %.4f)", sl.LR, sl.Alpha, sl.Score, sl.Baseline)
	}
	var bRuns []StudyRun
	if !s.SelectOnly {
		bRuns = s.Cfg.ReportRuns(sel)
	}
	s.logf("phase B: %d runs on the test pairs (%d examples)", len(bRuns), d.Report.Test.Len())
	bRes, err := s.runAll(bRuns, d.Report)
	if err != nil {
		return nil, err
	}
	out := &StudyResults{Config: s.Cfg, Selection: sel, TrainExamples: d.Select.Train.Len(),
		SelectExamples: d.Select.Test.Len(), TestExamples: d.Report.Test.Len(), MeanSize: d.Select.MeanSize,
		selectRes: aRes, reportRes: bRes}
	for _, c := range d.Select.TrainClass {
		out.Positives += c
	}
	for i, r := range aRuns {
		out.Select = append(out.Select, summarise(r, aRes[i]))
		out.WallS += aRes[i].WallS
	}
	for i, r := range bRuns {
		out.Report = append(out.Report, summarise(r, bRes[i]))
		out.WallS += bRes[i].WallS
	}
	if len(out.Report) > 0 {
		out.Paired = pairAll(sel, out.Report)
	}
	if err := writeJSON(filepath.Join(s.Out, "results.json"), out); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(s.Out, "tables.md"), []byte(out.Tables()), 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

func pairAll(sel []Selection, report []RunSummary) []PairedMetric {
	var out []PairedMetric
	for _, sl := range sel {
		var arm, base []RunSummary
		for _, r := range report {
			switch {
			case r.LR != sl.LR:
			case r.Alpha == 0:
				base = append(base, r)
			case r.Alpha == sl.Alpha:
				arm = append(arm, r)
			}
		}
		for _, m := range Metrics {
			seeds, a, b := PairBySeed(arm, base, m.Get)
			pa, pb, d := TInterval(a), TInterval(b), TInterval(diffs(a, b))
			if m.LowerBetter {
				switch d.Verdict {
				case "gain":
					d.Verdict = "loss"
				case "loss":
					d.Verdict = "gain"
				}
			}
			out = append(out, PairedMetric{LR: sl.LR, Alpha: sl.Alpha, Metric: m.Name, Seeds: seeds, Arm: a, Base: b,
				ArmMean: Num(pa.Mean), ArmSD: Num(pa.SD), BaseMean: Num(pb.Mean), BaseSD: Num(pb.SD), Diff: d})
		}
	}
	return out
}

// Tables renders phase A's selection table and phase B's paired table.
func (r *StudyResults) Tables() string {
	var b strings.Builder
	ms := func(xs []float64, prec int) string {
		p := TInterval(xs)
		switch p.N {
		case 0:
			return "—"
		case 1:
			return fmt.Sprintf("%.*f", prec, p.Mean)
		}
		return fmt.Sprintf("%.*f ± %.*f", prec, p.Mean, prec, p.SD)
	}
	fmt.Fprintf(&b, "Phase A: held-out training pairs (%d examples), seeds %v, mean ± sd over seeds\n\n", r.SelectExamples, r.Config.SelectSeeds)
	b.WriteString("| lr | arm | held-out acc, last epoch | mean of last 10 epochs | size F1 (held-out) | training CE, last epoch | chosen |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|:---:|\n")
	for _, lr := range r.Config.LRs {
		for _, a := range append([]float64{0}, r.Config.Alphas...) {
			var acc, last10, f1, ce []float64
			for _, s := range r.Select {
				if s.LR == lr && s.Alpha == a {
					acc, last10 = append(acc, s.FinalAcc), append(last10, s.MeanLast)
					f1, ce = append(f1, s.SizeF1), append(ce, s.TrainLoss)
				}
			}
			chosen := ""
			for _, sl := range r.Selection {
				if sl.LR == lr && sl.Alpha == a && a > 0 {
					chosen = "✓"
				}
			}
			fmt.Fprintf(&b, "| %g | %s | %s | %s | %s | %s | %s |\n", lr, Arm(a), ms(acc, 4), ms(last10, 4), ms(f1, 3), ms(ce, 4), chosen)
		}
	}
	if len(r.Report) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\nPhase B: S-MNIST test set (%d examples), seeds %v, paired by seed; difference = F1 − baseline, 95 %% t interval\n\n", r.TestExamples, r.Config.ReportSeeds)
	b.WriteString("| lr | arm | metric | baseline | F1 | mean paired difference [95 % interval] | verdict |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---|\n")
	for _, p := range r.Paired {
		prec := 4
		if strings.HasPrefix(p.Metric, "size") {
			prec = 3
		}
		// One more decimal for the differences: one test example of 20 000
		// is 0.00005.
		d, dp := p.Diff, prec+1
		diff := "—"
		switch {
		case d.N == 1:
			diff = fmt.Sprintf("%+.*f (1 pair)", dp, d.Mean)
		case d.N > 1:
			diff = fmt.Sprintf("%+.*f [%+.*f, %+.*f]", dp, d.Mean, dp, d.Lo, dp, d.Hi)
		}
		fmt.Fprintf(&b, "| %g | %s | %s | %s | %s | %s | %s |\n", p.LR, Arm(p.Alpha), p.Metric, ms(p.Base, prec), ms(p.Arm, prec), diff, d.Verdict)
	}
	return b.String()
}

// PlotMeans draws phase B's test accuracy per epoch averaged over the
// report seeds, one line per learning rate and arm, to path.
func (r *StudyResults) PlotMeans(path, title string) error {
	if len(r.Report) == 0 {
		return errors.New("smnist study: no phase B runs to plot")
	}
	type key struct{ lr, a float64 }
	sums := map[key][]float64{}
	counts := map[key]int{}
	var order []key
	for i, s := range r.Report {
		res := r.reportRes[i]
		k := key{s.LR, s.Alpha}
		if sums[k] == nil {
			sums[k] = make([]float64, len(res.Epochs))
			order = append(order, k)
		}
		for j, e := range res.Epochs {
			if j < len(sums[k]) {
				sums[k][j] += e.TestAcc
			}
		}
		counts[k]++
	}
	var runs []*Results
	for _, k := range order {
		res := &Results{Config: Config{Name: fmt.Sprintf("lr %g, %s (mean of %d seeds)", k.lr, Arm(k.a), counts[k])}}
		for j, v := range sums[k] {
			res.Epochs = append(res.Epochs, Epoch{Epoch: j + 1, TestAcc: v / float64(counts[k])})
		}
		res.FinalAcc = res.Epochs[len(res.Epochs)-1].TestAcc
		runs = append(runs, res)
	}
	return PlotAccuracy(path, title, runs)
}
