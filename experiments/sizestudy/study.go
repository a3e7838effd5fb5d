package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/stats"
	"github.com/segtune/segtune/metrics"
)

// Sequences of CamVid's training folder that the study keeps apart: the
// network trains on one, the hyper-parameters are chosen on another and
// the results are reported on the third (file names start with them).
const (
	seqTrain  = "0016E5" // 204 frames
	seqSelect = "0001TP" // 62
	seqReport = "0006R0" // 101
)

// The person task on CamVid: Pedestrian (9) + Bicyclist (10), Unlabelled
// (11) ignored, the shared person model's normalisation.
var (
	labelMap   = "9,10:1;11:255;*:0"
	classNames = "background,person"
	preprocess = []string{"--value-scale", "0.00784313725490196", "--value-offset", "-1"}
)

// arm is one training configuration of the study.
type arm struct {
	Key   string   `json:"key"` // folder-safe identifier
	Name  string   `json:"name"`
	Flags []string `json:"flags"` // added to the common finetune flags
	// Grid marks the arms selection chooses from.
	Grid bool `json:"grid,omitempty"`
}

var (
	baselineArm = arm{Key: "baseline", Name: "baseline (α = 0)"}
	// paperArm is the paper's Algorithm 1 with its constants: α = 1e-3 on
	// the summed Lagrangian, c_λ = 1e-3, c_μ = 1e-5, Adam 1e-2 on τ and ε,
	// one dual step an epoch, no repair between projections, no bound on
	// the score.
	paperArm = arm{Key: "paper", Name: "paper's constants (α_sum = 1e-3, c_λ = 1e-3)", Flags: []string{
		"--alpha", "1e-3", "--normalization", "sum", "--c-lambda", "1e-3", "--c-mu", "1e-5", "--dual-lr", "1e-2",
		"--feasibility", "none", "--dual-every", "-1", "--score-bound", "0", "--lambda-init", "0"}}
)

// gridArm is F1 with the new dynamics (segtune's defaults) at α (relative
// to the cross entropy) and c_λ.
func gridArm(alpha, cLambda string) arm {
	return arm{Key: "a" + alpha + "_c" + cLambda, Name: fmt.Sprintf("F1, α = %s, c_λ = %s", alpha, cLambda),
		Flags: []string{"--alpha", alpha, "--c-lambda", cLambda}, Grid: true}
}

// stepArm is a with the full-projections schedule: it isolates what the
// per-step projection adds to the repairs between projections.
func stepArm(a arm) arm {
	return arm{Key: a.Key + "_step", Name: a.Name + ", --projection step", Flags: append(slices.Clone(a.Flags), "--projection", "step")}
}

// dataSet is a labelled folder every run is scored on.
type dataSet struct {
	Name, Images, Masks string
}

// config is what the command line asks for.
type config struct {
	Out, Assets, Bin  string
	Epochs            int
	Seeds1, Seeds2    int
	Crop              string
	Batch             int
	Threads           int
	Limit             int // frames per sequence (0: all); tests and smoke runs
	Alphas, CLambdas  []string
	Extra             []dataSet
	Phase             string // "1" or "all"
	Plan              bool   // print the plan and the time estimate only
	EpochSeconds      float64
	EvalSecondsPerImg float64
	Log               io.Writer // progress
	Stdout            io.Writer // tables and the plan
}

// study is one invocation's state.
type study struct {
	cfg  config
	sets []dataSet // select, report, val, extras
	// train folders
	trainImages, trainMasks string
	model                   string
	results                 map[string]*runResult // by run key
	evalScale               float64               // evalScale(cfg.Crop)
}

// scores are one run's scores on one labelled folder (last.ckpt, the
// last epoch: no best-epoch picking), small and large at the training
// set's threshold.
type scores struct {
	IoU      *float64 `json:"person_iou"`
	IoUSmall *float64 `json:"person_iou_small"`
	IoULarge *float64 `json:"person_iou_large"`
	Gap      *float64 `json:"person_iou_gap"` // large − small
	MeanIoU  *float64 `json:"mean_iou"`
	Seconds  float64  `json:"seconds"`
	Images   int      `json:"images"`
}

// runResult is what the tables read of a run.
type runResult struct {
	Arm     string  `json:"arm"`
	Seed    int     `json:"seed"`
	Phase   int     `json:"phase"`
	Dir     string  `json:"dir"`
	Seconds float64 `json:"train_seconds"`
	// Last epoch of metrics.jsonl: the mean training loss (cross entropy)
	// and the regularizer's state.
	TrainLoss float64            `json:"train_loss"`
	LastEpoch map[string]float64 `json:"last_epoch"`
	Scores    map[string]scores  `json:"scores"`
}

func runKey(a arm, seed int) string { return fmt.Sprintf("%s_s%d", a.Key, seed) }

// camvidHeight×camvidWidth is CamVid's frame size.
const camvidHeight, camvidWidth = 360, 480

// evalScale is the factor that takes a CamVid frame to the training view
// of --crop HxW (whole frames resized into it): the scale every run is
// scored at. The crop must keep the frame's 3:4 shape.
func evalScale(crop string) (float64, error) {
	var h, w int
	if _, err := fmt.Sscanf(crop, "%dx%d", &h, &w); err != nil || h <= 0 || w <= 0 {
		return 0, fmt.Errorf("--crop %q: want HxW", crop)
	}
	if h*camvidWidth != w*camvidHeight {
		return 0, fmt.Errorf("--crop %q: want the shape of CamVid's %dx%d frames (3:4), so that a whole frame is resized without distortion", crop, camvidHeight, camvidWidth)
	}
	return float64(h) / camvidHeight, nil
}

// newStudy checks the inputs and prepares the sequence folders.
func newStudy(cfg config) (*study, error) {
	if cfg.Out == "" {
		return nil, errors.New("--out is required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	st := &study{cfg: cfg, results: map[string]*runResult{}}
	var err error
	if st.evalScale, err = evalScale(cfg.Crop); err != nil {
		return nil, err
	}
	st.model = filepath.Join(cfg.Assets, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := filepath.Join(cfg.Assets, "data", "camvid")
	for _, p := range []string{st.model, camvid} {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	if !cfg.Plan {
		if _, err := os.Stat(cfg.Bin); err != nil {
			return nil, fmt.Errorf("segtune binary: %w (make build)", err)
		}
	}
	dataDir := filepath.Join(cfg.Out, "data")
	split := func(name, from, prefix string) (dataSet, error) {
		ds := dataSet{Name: name, Images: filepath.Join(dataDir, name, "images"), Masks: filepath.Join(dataDir, name, "masks")}
		return ds, linkSequence(filepath.Join(camvid, "images", from), filepath.Join(camvid, "masks", from), ds, prefix, cfg.Limit)
	}
	train, err := split("train_"+seqTrain, "train", seqTrain)
	if err != nil {
		return nil, err
	}
	st.trainImages, st.trainMasks = train.Images, train.Masks
	sel, err := split("select_"+seqSelect, "train", seqSelect)
	if err != nil {
		return nil, err
	}
	rep, err := split("report_"+seqReport, "train", seqReport)
	if err != nil {
		return nil, err
	}
	val, err := split("val", "val", "")
	if err != nil {
		return nil, err
	}
	st.sets = append([]dataSet{sel, rep, val}, cfg.Extra...)
	return st, nil
}

// linkSequence fills ds's folders with links to the images of src whose
// names start with prefix (and their masks), the first limit of them in
// name order when limit > 0. It is idempotent.
func linkSequence(srcImages, srcMasks string, ds dataSet, prefix string, limit int) error {
	entries, err := os.ReadDir(srcImages)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(strings.ToLower(e.Name()), ".png") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	if len(names) == 0 {
		return fmt.Errorf("no %s*.png in %s", prefix, srcImages)
	}
	for _, d := range []string{ds.Images, ds.Masks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, n := range names {
		for _, p := range [][2]string{{filepath.Join(srcImages, n), filepath.Join(ds.Images, n)}, {filepath.Join(srcMasks, n), filepath.Join(ds.Masks, n)}} {
			abs, err := filepath.Abs(p[0])
			if err != nil {
				return err
			}
			if cur, err := os.Readlink(p[1]); err == nil && cur == abs {
				continue
			}
			os.Remove(p[1])
			if err := os.Symlink(abs, p[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// commonFlags are every run's finetune flags: the training sequence at
// whole frames, balanced batches for every arm, AdamW with poly decay.
func (st *study) commonFlags(seed int) []string {
	c := st.cfg
	f := []string{"--model", st.model, "--train-images", st.trainImages, "--train-masks", st.trainMasks,
		"--label-map", labelMap, "--class-names", classNames, "--crop", c.Crop, "--batch", strconv.Itoa(c.Batch),
		"--epochs", strconv.Itoa(c.Epochs), "--optimizer", "adamw", "--lr", "2e-4", "--weight-decay", "1e-4",
		"--schedule", "poly:0.9", "--size-classes", "1", "--balance", "--train-view", "whole",
		"--seed", strconv.Itoa(seed), "--json"}
	if c.Threads > 0 {
		f = append(f, "--threads", strconv.Itoa(c.Threads))
	}
	return append(f, preprocess...)
}

// finished reports whether dir holds a run of all its epochs.
func (st *study) finished(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "last.ckpt")); err != nil {
		return false
	}
	recs, err := history.Read(filepath.Join(dir, finetune.HistoryFile))
	return err == nil && len(history.Filter(recs, history.KindEpoch)) >= st.cfg.Epochs
}

// train runs (or resumes, or keeps) one run.
func (st *study) train(a arm, seed, phase int) (*runResult, error) {
	key := runKey(a, seed)
	if r := st.results[key]; r != nil {
		return r, nil
	}
	dir := filepath.Join(st.cfg.Out, "runs", key)
	if !st.finished(dir) {
		args := append([]string{"finetune", "--out", dir}, st.commonFlags(seed)...)
		args = append(args, a.Flags...)
		if _, err := os.Stat(filepath.Join(dir, "last.ckpt")); err == nil {
			// An interrupted run goes on where it stopped, with the settings
			// its checkpoint records (finetune refuses others).
			args = []string{"finetune", "--out", dir, "--resume", "--epochs", strconv.Itoa(st.cfg.Epochs), "--json"}
			if st.cfg.Threads > 0 {
				args = append(args, "--threads", strconv.Itoa(st.cfg.Threads))
			}
		} else if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(st.cfg.Log, "== %s, seed %d: %s %s\n", a.Name, seed, st.cfg.Bin, strings.Join(args, " "))
		if err := command(st.cfg.Bin, args, io.Discard, st.cfg.Log); err != nil {
			return nil, err
		}
		if !st.finished(dir) {
			return nil, fmt.Errorf("%s: finetune ended without %d epochs", dir, st.cfg.Epochs)
		}
	}
	r := &runResult{Arm: a.Key, Seed: seed, Phase: phase, Dir: dir, Scores: map[string]scores{}}
	recs, err := history.Read(filepath.Join(dir, finetune.HistoryFile))
	if err != nil {
		return nil, err
	}
	epochs := history.Filter(recs, history.KindEpoch)
	for _, e := range epochs {
		r.Seconds += e.Seconds
	}
	last := epochs[len(epochs)-1]
	r.TrainLoss, r.LastEpoch = last.Loss, last.Extra
	for _, ds := range st.sets {
		sc, err := st.evaluate(dir, ds)
		if err != nil {
			return nil, err
		}
		r.Scores[ds.Name] = sc
	}
	st.results[key] = r
	return r, nil
}

// evalJSON is the part of `segtune eval --json` the study reads.
type evalJSON struct {
	metrics.Report
	Groups  map[string]metrics.Report `json:"groups"`
	Images  int                       `json:"images"`
	Seconds float64                   `json:"seconds"`
}

// evaluate scores dir's last.ckpt on ds (cached in dir/eval_NAME.json):
// small and large at the checkpoint's (the training set's) threshold.
func (st *study) evaluate(dir string, ds dataSet) (scores, error) {
	path := filepath.Join(dir, "eval_"+ds.Name+".json")
	if _, err := os.Stat(path); err != nil {
		args := []string{"eval", "--json", "--model", filepath.Join(dir, "last.ckpt"), "--images", ds.Images, "--masks", ds.Masks,
			"--label-map", labelMap, "--class-names", classNames, "--size-classes", "1"}
		if st.cfg.Threads > 0 {
			args = append(args, "--threads", strconv.Itoa(st.cfg.Threads))
		}
		// Scored at the scale the network was trained at (whole frames
		// resized into --crop), not at the pretrained model's own (×2):
		// a baseline trained at 180×240 scored person IoU 0.19 on val at
		// ×2 and 0.40 at ×0.5.
		args = append(args, "--scale", strconv.FormatFloat(st.evalScale, 'g', -1, 64), "--multiple-of", "8", "--plus-one")
		var out strings.Builder
		if err := command(st.cfg.Bin, append(args, preprocess...), &out, st.cfg.Log); err != nil {
			return scores{}, err
		}
		if err := atomicfile.Write(path, []byte(out.String()), 0o644); err != nil {
			return scores{}, err
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return scores{}, err
	}
	var e evalJSON
	if err := json.Unmarshal(raw, &e); err != nil {
		return scores{}, fmt.Errorf("%s: %v", path, err)
	}
	const person = 1
	s := scores{IoU: e.ClassIoU(person), MeanIoU: e.MeanIoU, Seconds: e.Seconds, Images: e.Images,
		IoUSmall: e.Groups["small"].ClassIoU(person), IoULarge: e.Groups["large"].ClassIoU(person)}
	if s.IoUSmall != nil && s.IoULarge != nil {
		gap := *s.IoULarge - *s.IoUSmall
		s.Gap = &gap
	}
	return s, nil
}

func command(bin string, args []string, stdout, stderr io.Writer) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v", bin, args[0], err)
	}
	return nil
}

// phase1Arms are the arms of phase 1 before selection.
func (st *study) phase1Arms() []arm {
	arms := []arm{baselineArm, paperArm}
	for _, a := range st.cfg.Alphas {
		for _, c := range st.cfg.CLambdas {
			arms = append(arms, gridArm(a, c))
		}
	}
	return arms
}

func (st *study) seeds(phase int) []int {
	if phase == 1 {
		return seq(1, st.cfg.Seeds1)
	}
	return seq(st.cfg.Seeds1+1, st.cfg.Seeds2)
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// selection is phase 1's choice, kept in OUT/selection.json so that a
// resumed study keeps it.
type selection struct {
	Best      string             `json:"best"` // arm key
	Criterion string             `json:"criterion"`
	Scores    map[string]float64 `json:"scores"` // mean selection IoU per eligible arm
	Collapsed []string           `json:"collapsed,omitempty"`
	// Arms and Seeds are the grid and the phase 1 seeds it was made from:
	// a rerun with another grid or more seeds selects again.
	Arms  []string `json:"arms"`
	Seeds []int    `json:"seeds"`
}

// collapseFactor: a run collapsed when its last epoch's training loss is
// above this multiple of the baseline's with the same seed.
const collapseFactor = 3

// collapsed reports whether run r collapsed against the baseline run of
// its seed.
func (st *study) collapsed(r *runResult) bool {
	b := st.results[runKey(baselineArm, r.Seed)]
	return b != nil && r.TrainLoss > collapseFactor*b.TrainLoss
}

// selectArm picks the grid arm with the best mean person IoU on the
// selection sequence over phase 1's seeds, leaving out arms that
// collapsed in any seed.
func (st *study) selectArm() (*selection, error) {
	sel := &selection{Criterion: "mean person IoU on " + seqSelect + " over phase 1 seeds, last epoch; arms that collapsed in a seed (training loss > 3× the baseline's) left out",
		Scores: map[string]float64{}, Arms: st.gridKeys(), Seeds: st.seeds(1)}
	best := math.Inf(-1)
	for _, a := range st.phase1Arms() {
		if !a.Grid {
			continue
		}
		var xs []float64
		bad := false
		for _, s := range st.seeds(1) {
			r := st.results[runKey(a, s)]
			if r == nil {
				return nil, fmt.Errorf("selection: run %s missing", runKey(a, s))
			}
			if st.collapsed(r) {
				bad = true
			}
			if v := r.Scores[st.sets[0].Name].IoU; v != nil {
				xs = append(xs, *v)
			}
		}
		if bad {
			sel.Collapsed = append(sel.Collapsed, a.Key)
			continue
		}
		if len(xs) == 0 {
			continue
		}
		m := stats.TInterval(xs).Mean
		sel.Scores[a.Key] = m
		if m > best {
			best, sel.Best = m, a.Key
		}
	}
	if sel.Best == "" {
		return nil, errors.New("selection: no grid arm without a collapse")
	}
	return sel, nil
}

// gridKeys are the keys of the arms selection chooses from.
func (st *study) gridKeys() []string {
	var keys []string
	for _, a := range st.phase1Arms() {
		if a.Grid {
			keys = append(keys, a.Key)
		}
	}
	return keys
}

func (st *study) armByKey(key string) (arm, bool) {
	for _, a := range st.phase1Arms() {
		if a.Key == key {
			return a, true
		}
	}
	return arm{}, false
}

// loadOrSelect returns the stored selection, or selects and stores it.
func (st *study) loadOrSelect() (*selection, error) {
	sel, stale := st.storedSelection()
	if sel != nil {
		return sel, nil
	}
	if stale != "" {
		fmt.Fprintln(st.cfg.Log, stale)
	}
	sel, err := st.selectArm()
	if err != nil {
		return nil, err
	}
	js, _ := json.MarshalIndent(sel, "", "  ")
	return sel, atomicfile.Write(filepath.Join(st.cfg.Out, "selection.json"), append(js, '\n'), 0o644)
}

// storedSelection is OUT/selection.json when it was made from this
// study's grid and phase 1 seeds; otherwise nil, and why it is not used
// when there is one.
func (st *study) storedSelection() (*selection, string) {
	path := filepath.Join(st.cfg.Out, "selection.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, ""
	}
	var sel selection
	if err := json.Unmarshal(raw, &sel); err != nil {
		return nil, fmt.Sprintf("%s: %v: selecting again", path, err)
	}
	if _, ok := st.armByKey(sel.Best); !ok || !slices.Equal(sel.Arms, st.gridKeys()) || !slices.Equal(sel.Seeds, st.seeds(1)) {
		return nil, fmt.Sprintf("%s was made from arms %v and seeds %v, this study has %v and %v: selecting again",
			path, sel.Arms, sel.Seeds, st.gridKeys(), st.seeds(1))
	}
	return &sel, ""
}

// planned lists the runs of the study in order, for the plan and the
// estimate; phase 2's arm is the selection's when known.
func (st *study) planned(best *arm) []struct {
	a           arm
	seed, phase int
} {
	var out []struct {
		a           arm
		seed, phase int
	}
	add := func(a arm, seeds []int, phase int) {
		for _, s := range seeds {
			out = append(out, struct {
				a           arm
				seed, phase int
			}{a, s, phase})
		}
	}
	for _, a := range st.phase1Arms() {
		add(a, st.seeds(1), 1)
	}
	step := arm{Key: "BEST_step", Name: "the selected arm, --projection step"}
	p2 := arm{Key: "BEST", Name: "the selected arm"}
	if best != nil {
		step, p2 = stepArm(*best), *best
	}
	add(step, st.seeds(1), 1)
	add(baselineArm, st.seeds(2), 2)
	add(p2, st.seeds(2), 2)
	return out
}

// estimate prints the plan with the runs left and their time.
func (st *study) estimate(w io.Writer, best *arm) {
	perEpoch := st.cfg.EpochSeconds
	var measured []float64
	for _, p := range st.planned(best) {
		recs, err := history.Read(filepath.Join(st.cfg.Out, "runs", runKey(p.a, p.seed), finetune.HistoryFile))
		if err != nil {
			continue
		}
		for _, e := range history.Filter(recs, history.KindEpoch) {
			measured = append(measured, e.Seconds)
		}
	}
	if len(measured) > 0 {
		slices.Sort(measured)
		perEpoch = measured[len(measured)/2]
	}
	images := 0
	for _, ds := range st.sets {
		if es, err := os.ReadDir(ds.Images); err == nil {
			images += len(es)
		}
	}
	evalSecs := float64(images) * st.cfg.EvalSecondsPerImg
	left, total := 0, 0
	for _, p := range st.planned(best) {
		total++
		if !st.finished(filepath.Join(st.cfg.Out, "runs", runKey(p.a, p.seed))) {
			left++
		}
	}
	secs := float64(left) * (perEpoch*float64(st.cfg.Epochs) + evalSecs)
	fmt.Fprintf(w, "plan: %d runs (%d left) of %d epochs; %.0f s an epoch (%s), %.0f s of scoring a run (%d images): about %s left\n",
		total, left, st.cfg.Epochs, perEpoch, map[bool]string{true: "median of the epochs run", false: "--epoch-seconds"}[len(measured) > 0],
		evalSecs, images, time.Duration(secs*float64(time.Second)).Round(time.Minute))
}
