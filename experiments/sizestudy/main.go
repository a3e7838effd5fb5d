// Command sizestudy runs the CamVid study of the size regularizer
// (docs/study.md): person with the shared DeepLabV3+ person
// model, sequences kept apart — training on 0016E5, selection on 0001TP,
// reporting on 0006R0 (all three from CamVid's training folder), CamVid
// val (0016E5 again) as a sanity check — whole frames, balanced batches
// for every arm, AdamW with poly decay, the last epoch scored (no
// best-epoch picking).
//
// Phase 1 (seeds 1..--seeds1): the baseline, the paper's constants, a grid
// of α × c_λ with segtune's dynamics, then the arm selected on 0001TP with
// --projection step. Phase 2 (the next --seeds2 seeds): the baseline and
// the selected arm, paired by seed; the report gives the mean paired
// difference with its 95 % t interval and claims a gain only when the
// interval excludes zero.
//
// The command drives the segtune binary, keeps every finished run and
// score, resumes an interrupted run (finetune --resume) and keeps the
// selection in OUT/selection.json, so rerunning it only does what is left.
// It writes OUT/results.json, OUT/tables.md, OUT/curves.png (phase 1, seed
// 1: loss, λ, Στ, ε, hinges, size F1) and OUT/paired.png.
//
//	make build
//	go run ./experiments/sizestudy --out runs/study --assets ../shared/assets
//	go run ./experiments/sizestudy --out runs/study --plan   # what is left, and how long
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/segtune/segtune/internal/listflag"
)

// extraFlag collects --extra NAME=IMAGES:MASKS.
type extraFlag []dataSet

func (e *extraFlag) String() string { return fmt.Sprint(*e) }

func (e *extraFlag) Set(v string) error {
	name, dirs, ok := strings.Cut(v, "=")
	images, masks, ok2 := strings.Cut(dirs, ":")
	if !ok || !ok2 || name == "" || images == "" || masks == "" || strings.ContainsAny(name, "/\\ ") {
		return fmt.Errorf("%q: want NAME=IMAGES:MASKS", v)
	}
	for _, d := range *e {
		if d.Name == "extra_"+name {
			return fmt.Errorf("extra set %q given twice", name)
		}
	}
	*e = append(*e, dataSet{Name: "extra_" + name, Images: images, Masks: masks})
	return nil
}

func main() {
	var c config
	var extra extraFlag
	flag.StringVar(&c.Out, "out", "", "folder for the study (required): data links, runs, selection, results, tables, plots")
	flag.StringVar(&c.Assets, "assets", "../shared/assets", "folder holding models/deeplabv3plus_person_dynamic.onnx and data/camvid")
	flag.StringVar(&c.Bin, "bin", "bin/segtune", "segtune binary")
	flag.IntVar(&c.Epochs, "epochs", 10, "epochs per run (≥ 10 gives Algorithm 1 ≥ 10 epoch-end dual steps)")
	flag.IntVar(&c.Seeds1, "seeds1", 2, "phase 1 seeds (1..N)")
	flag.IntVar(&c.Seeds2, "seeds2", 5, "phase 2 seeds (fresh: after phase 1's)")
	flag.StringVar(&c.Crop, "crop", "180x240", "training size HxW: whole 360×480 frames are resized into it")
	flag.IntVar(&c.Batch, "batch", 4, "images per step")
	flag.IntVar(&c.Threads, "threads", 0, "ONNX Runtime threads of every segtune call (0: one per core)")
	flag.IntVar(&c.Limit, "limit", 0, "use only the first N frames of every sequence (0: all; for smoke tests)")
	alphas := flag.String("alphas", "0.3,1,3", "grid: α, the F1 term's weight relative to the cross entropy")
	cl := flag.String("c-lambdas", "1,10", "grid: c_λ of the dual step")
	flag.Var(&extra, "extra", "NAME=IMAGES:MASKS: also score every run on this labelled folder (repeatable)")
	flag.StringVar(&c.Phase, "phase", "all", "1 (phase 1 and the selection only) or all")
	flag.BoolVar(&c.Plan, "plan", false, "only print the plan: runs left and the time they take")
	flag.Float64Var(&c.EpochSeconds, "epoch-seconds", 45, "seconds an epoch takes, for --plan before any run finished (measured: 42 s on the shared 2-core VM)")
	flag.Float64Var(&c.EvalSecondsPerImg, "eval-seconds", 0.5, "seconds to score one image, for --plan")
	flag.Parse()
	c.Alphas, c.CLambdas, c.Extra, c.Log, c.Stdout = listflag.Split(*alphas), listflag.Split(*cl), extra, os.Stderr, os.Stdout
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "sizestudy:", err)
		os.Exit(1)
	}
}

// run is the whole command: phase 1, selection, phase 2, report.
func run(c config) error {
	if c.Phase != "1" && c.Phase != "all" {
		return fmt.Errorf("--phase %q: want 1 or all", c.Phase)
	}
	if c.Epochs < 1 || c.Seeds1 < 1 || c.Seeds2 < 0 || len(c.Alphas) == 0 || len(c.CLambdas) == 0 {
		return fmt.Errorf("need ≥ 1 epoch, ≥ 1 phase-1 seed and a non-empty grid")
	}
	st, err := newStudy(c)
	if err != nil {
		return err
	}
	if c.Plan {
		st.estimate(c.Stdout, st.storedBest())
		return nil
	}
	st.estimate(c.Log, st.storedBest())
	for _, a := range st.phase1Arms() {
		for _, s := range st.seeds(1) {
			if _, err := st.train(a, s, 1); err != nil {
				return err
			}
		}
	}
	sel, err := st.loadOrSelect()
	if err != nil {
		return err
	}
	best, _ := st.armByKey(sel.Best)
	fmt.Fprintf(c.Log, "selected on %s: %s\n", seqSelect, best.Name)
	for _, s := range st.seeds(1) {
		if _, err := st.train(stepArm(best), s, 1); err != nil {
			return err
		}
	}
	if c.Phase != "1" {
		for _, s := range st.seeds(2) {
			for _, a := range []arm{baselineArm, best} {
				if _, err := st.train(a, s, 2); err != nil {
					return err
				}
			}
		}
	}
	return st.report(sel, best)
}

// storedBest is the arm an earlier invocation selected for this grid and
// these seeds, if any.
func (st *study) storedBest() *arm {
	sel, _ := st.storedSelection()
	if sel == nil {
		return nil
	}
	if a, ok := st.armByKey(sel.Best); ok {
		return &a
	}
	return nil
}
