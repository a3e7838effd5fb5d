package smnist

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/segtune/segtune/runtime/runtimetest"
)

func TestHoldOutDisjoint(t *testing.T) {
	mnist := Synthetic(600, 3)
	test := Synthetic(120, 4)
	d, err := PrepareStudy(mnist, test, 0, 0, 100, 17)
	if err != nil {
		t.Fatal(err)
	}
	if d.Select.Train.Len() != 1000 || d.Select.Test.Len() != 200 || d.Report.Test.Len() != 240 || len(d.HeldIdx) != 100 {
		t.Fatalf("sizes: train %d, held-out %d, test %d, held indices %d; want 1000, 200, 240, 100",
			d.Select.Train.Len(), d.Select.Test.Len(), d.Report.Test.Len(), len(d.HeldIdx))
	}
	if d.Report.Train != d.Select.Train || d.Report.MeanSize != d.Select.MeanSize {
		t.Error("the two phases do not share the training set and its threshold")
	}
	// The split partitions the MNIST indices.
	held := map[int]bool{}
	for _, i := range d.HeldIdx {
		if i < 0 || i >= 600 || held[i] {
			t.Fatalf("held-out index %d out of range or repeated", i)
		}
		held[i] = true
	}
	// No held-out image, original or rescaled copy, is a training image:
	// compare the images themselves.
	hash := func(s *Set, i int) [32]byte { return sha256.Sum256(s.Image(i)) }
	inTrain := map[[32]byte]bool{}
	for i := range d.Select.Train.Len() {
		inTrain[hash(d.Select.Train, i)] = true
	}
	for i := range d.Select.Test.Len() {
		if inTrain[hash(d.Select.Test, i)] {
			t.Fatalf("held-out example %d (doubled %v) is also a training example", i, d.Select.Test.Doubled[i])
		}
	}
	// Every MNIST image lands on exactly one side, with its label, and its
	// copy on the same side.
	tr, ho := 0, 0
	for i := range 600 {
		img := sha256.Sum256(mnist.Image(i))
		dst, k := d.Select.Train, tr
		if held[i] {
			dst, k = d.Select.Test, ho
			ho++
		} else {
			tr++
		}
		if sha256.Sum256(dst.Image(k)) != img || dst.Labels[k] != mnist.Labels[i] {
			t.Fatalf("MNIST image %d is not example %d of its side", i, k)
		}
		if half := dst.Len() / 2; !dst.Doubled[half+k] || dst.Labels[half+k] != mnist.Labels[i] {
			t.Fatalf("the copy of MNIST image %d is not on its side", i)
		}
	}
	// The same seed gives the same split, another seed another one.
	_, _, again, _ := HoldOut(mnist, 100, 17)
	_, _, other, _ := HoldOut(mnist, 100, 18)
	if !equalInts(again, d.HeldIdx) || equalInts(other, d.HeldIdx) {
		t.Error("the split is not a function of its seed")
	}
	for _, n := range []int{0, 600, -1} {
		if _, _, _, err := HoldOut(mnist, n, 1); err == nil {
			t.Errorf("holding out %d of 600 accepted", n)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTInterval(t *testing.T) {
	// Differences 1..5: mean 3, sample sd √2.5, t(0.975, 4) = 2.7764451.
	p := TInterval([]float64{1, 2, 3, 4, 5})
	h := 2.7764451051977987 * math.Sqrt(2.5) / math.Sqrt(5)
	if math.Abs(p.Mean-3) > 1e-12 || math.Abs(p.SD-math.Sqrt(2.5)) > 1e-12 ||
		math.Abs(p.Lo-(3-h)) > 1e-9 || math.Abs(p.Hi-(3+h)) > 1e-9 || p.Verdict != "gain" {
		t.Fatalf("interval %+v, want 3 ± %v, gain", p, h)
	}
	// A hand-computed case in accuracy units: differences 0.004, −0.002,
	// 0.001, 0.003, −0.001: mean 0.001, squared deviations (9+9+0+4+4)e-6,
	// sd √(26e-6/4) = 0.0025495, half-width 2.7764451·0.0025495/√5 =
	// 0.0031656: [−0.0021656, 0.0041656].
	p = TInterval([]float64{0.004, -0.002, 0.001, 0.003, -0.001})
	if math.Abs(p.Mean-0.001) > 1e-12 || math.Abs(p.Lo+0.0021656) > 1e-7 || math.Abs(p.Hi-0.0041656) > 1e-7 ||
		p.Verdict != "no detectable difference" {
		t.Fatalf("interval %+v, want 0.001 [−0.0021656, 0.0041656], no detectable difference", p)
	}
	if v := TInterval([]float64{-1, -1.2, -0.9}).Verdict; v != "loss" {
		t.Errorf("verdict %q for an interval below 0", v)
	}
	if p := TInterval([]float64{2}); p.Verdict != "too few pairs" || !math.IsNaN(p.Lo) {
		t.Errorf("one pair: %+v", p)
	}
	if b, err := json.Marshal(TInterval([]float64{2})); err != nil || !strings.Contains(string(b), `"lo":null`) {
		t.Errorf("one pair as JSON: %s, %v", b, err)
	}
}

func TestPairBySeed(t *testing.T) {
	run := func(seed uint64, acc float64) RunSummary {
		return RunSummary{StudyRun: StudyRun{Seed: seed}, FinalAcc: acc}
	}
	arm := []RunSummary{run(5, 0.95), run(3, 0.93), run(4, 0.94), run(9, 0.99)}
	base := []RunSummary{run(4, 0.84), run(3, 0.83), run(5, 0.85), run(6, 0.86)}
	seeds, a, b := PairBySeed(arm, base, func(r RunSummary) float64 { return r.FinalAcc })
	if len(seeds) != 3 || seeds[0] != 3 || seeds[1] != 4 || seeds[2] != 5 {
		t.Fatalf("paired seeds %v, want [3 4 5] (only seeds both arms ran, in order)", seeds)
	}
	for i := range seeds {
		if math.Abs(a[i]-b[i]-0.1) > 1e-12 {
			t.Errorf("seed %d: arm %.2f paired with baseline %.2f, want the same seed's", seeds[i], a[i], b[i])
		}
	}
}

// fakeTrain stands in for Run: accuracy is a function of the run's
// configuration and data (so the selection is known), and calls are
// counted per run name.
type fakeTrain struct {
	mu    sync.Mutex
	calls map[string]int
	fail  string // a run name that fails
}

func (f *fakeTrain) train(c Config, d *Data) (*Results, error) {
	f.mu.Lock()
	f.calls[c.Name]++
	f.mu.Unlock()
	if c.Name == f.fail {
		return nil, os.ErrDeadlineExceeded
	}
	// α = 0.1 is best at lr 1e-3, α = 1 at 1e-2; the F1 arm at the best α
	// gains 0.01 on the test set over the baseline, seed noise ±0.002.
	acc := 0.9 - 0.01*math.Abs(math.Log10(c.Alpha+1e-9)-math.Log10(0.1*(1+9*boolf(c.LR > 5e-3))))
	if c.Alpha == 0 {
		acc = 0.85
	}
	acc += 0.002 * float64(int(c.Seed%3)-1)
	return &Results{Config: c, FinalAcc: acc, MeanLast: acc, SizeF1Test: 0.5 + c.Alpha/10,
		Epochs: []Epoch{{Epoch: 1, TestAcc: acc, SizeF1Test: 0.5, TrainLoss: 0.4}}, WallS: 1}, nil
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestStudyResumes(t *testing.T) {
	d := &StudyData{Select: &Data{Train: Synthetic(4, 1), Test: Synthetic(5, 2)}}
	d.Report = &Data{Train: d.Select.Train, Test: Synthetic(7, 3)}
	cfg := StudyConfig{Base: Config{Head: HeadLogits, Epochs: 1}, LRs: []float64{1e-3, 1e-2}, Alphas: []float64{0.01, 0.1, 1},
		SelectSeeds: []uint64{1, 2}, ReportSeeds: []uint64{3, 4, 5, 6, 7}, HoldN: 2}
	out := t.TempDir()
	f := &fakeTrain{calls: map[string]int{}}
	st := &Study{Cfg: cfg, Out: out, Jobs: 2, Train: f.train}

	// A first invocation fails in phase B: what finished is kept.
	f.fail = "B lr=0.01 baseline seed 5"
	if _, err := st.Run(d); err == nil || !strings.Contains(err.Error(), "B_lr0.01_a0_s5") {
		t.Fatalf("failing run: error %v", err)
	}
	total := 0
	for _, n := range f.calls {
		total += n
	}
	if want := 2*4*2 + 2*2*5; total != want {
		t.Fatalf("first invocation trained %d runs, want %d", total, want)
	}
	f.fail = ""
	f.calls = map[string]int{}
	res, err := st.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || f.calls["B lr=0.01 baseline seed 5"] != 1 {
		t.Fatalf("rerun trained %v, want only the failed run", f.calls)
	}
	// The selection follows the held-out accuracies.
	if len(res.Selection) != 2 || res.Selection[0].Alpha != 0.1 || res.Selection[1].Alpha != 1 {
		t.Fatalf("selection %+v, want α 0.1 at lr 1e-3 and 1 at lr 1e-2", res.Selection)
	}
	if len(res.Select) != 16 || len(res.Report) != 20 {
		t.Fatalf("%d phase A and %d phase B summaries, want 16 and 20", len(res.Select), len(res.Report))
	}
	p := res.Paired[0]
	if p.Metric != Metrics[0].Name || p.Diff.N != 5 || math.Abs(p.Diff.Mean-0.05) > 1e-9 || p.Diff.Verdict != "gain" {
		t.Fatalf("paired %+v, want 5 pairs, +0.05, gain", p)
	}
	// A higher training loss is a loss, not a gain (two seeds, both +0.1).
	for _, q := range res.Paired {
		if q.Metric == "training cross entropy, last epoch" && q.Diff.Verdict != "no detectable difference" {
			t.Errorf("equal losses: verdict %q", q.Diff.Verdict)
		}
	}
	lossy := pairAll([]Selection{{LR: 1, Alpha: 1}}, []RunSummary{
		{StudyRun: StudyRun{LR: 1, Alpha: 0, Seed: 1}, TrainLoss: 0.4}, {StudyRun: StudyRun{LR: 1, Alpha: 1, Seed: 1}, TrainLoss: 0.5},
		{StudyRun: StudyRun{LR: 1, Alpha: 0, Seed: 2}, TrainLoss: 0.4}, {StudyRun: StudyRun{LR: 1, Alpha: 1, Seed: 2}, TrainLoss: 0.5}})
	if v := lossy[len(lossy)-1].Diff.Verdict; v != "loss" {
		t.Errorf("training loss higher in both seeds: verdict %q, want loss", v)
	}
	// A third invocation trains nothing and reports the same.
	f.calls = map[string]int{}
	again, err := st.Run(d)
	if err != nil || len(f.calls) != 0 {
		t.Fatalf("third invocation: trained %v, error %v", f.calls, err)
	}
	if again.Tables() != res.Tables() {
		t.Error("a rerun's tables differ")
	}
	for _, name := range []string{"study.json", "selection.json", "results.json", "tables.md", "runs/A_lr0.001_a0.1_s2.json"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	// The stored selection is kept even if phase A's files change.
	os.Remove(filepath.Join(out, "runs", "A_lr0.01_a1_s1.json"))
	f.calls = map[string]int{}
	if r, err := st.Run(d); err != nil || len(f.calls) != 1 || r.Selection[1].Alpha != 1 {
		t.Fatalf("after removing a phase A run: trained %v, error %v", f.calls, err)
	}
	// Other settings into the same folder are refused.
	other := *st
	other.Cfg.Alphas = []float64{0.5}
	if _, err := other.Run(d); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("a study with other α into the same folder: error %v", err)
	}
	// A supplementary sweep stops after the selection.
	f.calls = map[string]int{}
	sweep := *st
	sweep.Out, sweep.SelectOnly = t.TempDir(), true
	r, err := sweep.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 16 || len(r.Report) != 0 || strings.Contains(r.Tables(), "Phase B") {
		t.Fatalf("select-only: trained %d runs, %d phase B summaries", len(f.calls), len(r.Report))
	}
	// Phase B needs fresh seeds.
	other = *st
	other.Cfg.ReportSeeds = []uint64{2, 3}
	other.Out = t.TempDir()
	if _, err := other.Run(d); err == nil {
		t.Error("a report seed reused from phase A accepted")
	}
}

// TestStudyShort runs the real training for a tiny study end to end.
func TestStudyShort(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 6 small runs")
	}
	runtimetest.Require(t)
	d, err := PrepareStudy(Synthetic(600, 1), Synthetic(100, 2), 0, 0, 100, 17)
	if err != nil {
		t.Fatal(err)
	}
	cfg := StudyConfig{Base: Config{Head: HeadLogits, Epochs: 1, ScoreBound: 1}, LRs: []float64{1e-2}, Alphas: []float64{0.1, 1},
		SelectSeeds: []uint64{1}, ReportSeeds: []uint64{2, 3}}
	res, err := (&Study{Cfg: cfg, Out: t.TempDir()}).Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Select) != 3 || len(res.Report) != 4 || res.Paired[0].Diff.N != 2 {
		t.Fatalf("%d + %d runs, %d pairs", len(res.Select), len(res.Report), res.Paired[0].Diff.N)
	}
	if err := res.PlotMeans(filepath.Join(t.TempDir(), "a.png"), "t"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Tables())
}
