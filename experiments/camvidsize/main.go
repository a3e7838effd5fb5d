// Command camvidsize runs the CamVid size-regularizer study of docs/camvid.md:
// for one target class (person or sky) it fine-tunes the shared DeepLabV3+
// person model with and without the F1 size regularizer over several seeds,
// scores every run on CamVid val split into small and large objects, and
// prints the table (mean ± sample std over seeds) as Markdown.
//
// It drives the segtune binary, so what it measures is exactly what a user
// gets from the command line. Finished runs are kept: rerunning the command
// only trains what is missing, and the table is rebuilt from the runs'
// eval.json files; minutes/run is the training time metrics.jsonl records.
//
//	go run ./experiments/camvidsize --class sky --out runs/sky
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/stats"
	"github.com/segtune/segtune/metrics"
)

// target is the class whose object size the study is about.
type target struct {
	labelMap   string
	classNames string
	// extra flags of finetune (sky gets a fresh head: the model's class 1 is person).
	extra []string
}

var targets = map[string]target{
	// Person = CamVid Pedestrian (9) + Bicyclist (10); 11 is Unlabelled.
	"person": {labelMap: "9,10:1;11:255;*:0", classNames: "background,person"},
	// Sky = CamVid class 0, the paper's experiment 2 class.
	"sky": {labelMap: "0:1;11:255;*:0", classNames: "background,sky", extra: []string{"--classes", "2"}},
}

// variant is one row of the table.
type variant struct {
	name  string
	flags []string
}

// regularised is the F1 regularizer with α multiplying the paper's summed
// Lagrangian and the dual step constant c_λ.
func regularised(alpha, projection, cLambda string) variant {
	name := "F1, α = " + alpha
	if projection != "epoch" {
		name += ", --projection " + projection
	}
	if cLambda != "1" {
		name += ", c_λ = " + cLambda
	}
	return variant{name, append([]string{"--alpha", alpha, "--normalization", "sum", "--c-lambda", cLambda, "--projection", projection}, legacyDynamics...)}
}

// legacyDynamics are the settings docs/camvid.md's runs were made with,
// before the defaults of docs/method.md §12: random crops, the paper's
// dual dynamics (absolute τ/ε step 1e-2, c_μ = 1e-5, λ from 0, one dual
// step an epoch, no repair between projections) and an unbounded score.
// The study of those defaults is experiments/sizestudy.
var legacyDynamics = []string{"--train-view", "crop", "--dual-lr", "1e-2", "--c-mu", "1e-5", "--lambda-init", "0",
	"--dual-every", "-1", "--feasibility", "none", "--score-bound", "0"}

// variants are the table's rows. Runs are stored by row index: append new
// rows at the end so that finished runs keep their folders.
var variants = []variant{
	{"baseline, shuffled batches", nil},
	{"baseline, balanced batches", []string{"--balance"}},
	regularised("1e-2", "epoch", "1"),
	regularised("1e-3", "epoch", "1"),
	regularised("1e-4", "epoch", "1"),
	regularised("1e-3", "step", "1"),
	regularised("1e-3", "graph", "1"),
	regularised("1e-3", "epoch", "1e-3"), // the paper's dual step for λ
}

// evalJSON is the part of `segtune eval --json` the table needs.
type evalJSON struct {
	metrics.Report
	Groups    map[string]metrics.Report `json:"groups"`
	SizeGap   *float64                  `json:"size_gap"`
	Threshold float64                   `json:"size_threshold"`
}

// study is what the command line asks for.
type study struct {
	class, out, assets, bin string
	seeds, epochs           int
	crop, plot              string
	rows                    []int // indices into variants
}

func main() {
	var st study
	flag.StringVar(&st.class, "class", "sky", "target class: person or sky")
	flag.StringVar(&st.out, "out", "", "folder for the runs (required)")
	flag.StringVar(&st.assets, "assets", "../shared/assets", "folder holding models/ and data/camvid")
	flag.StringVar(&st.bin, "bin", "bin/segtune", "segtune binary")
	flag.IntVar(&st.seeds, "seeds", 3, "seeds 1..N per variant")
	flag.IntVar(&st.epochs, "epochs", 3, "epochs per run")
	flag.StringVar(&st.crop, "crop", "180x240", "training crop")
	flag.StringVar(&st.plot, "plot", "", "also write seed 1's training curves of every variant to this PNG")
	rows := flag.String("variants", "", "comma-separated rows of the table to run (0-based; default all):\n"+variantList())
	flag.Parse()
	var err error
	if st.rows, err = parseRows(*rows); err == nil {
		err = run(st)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "camvidsize:", err)
		os.Exit(1)
	}
}

func variantList() string {
	var b strings.Builder
	for i, v := range variants {
		fmt.Fprintf(&b, "  %d  %s\n", i, v.name)
	}
	return b.String()
}

func parseRows(spec string) ([]int, error) {
	if spec == "" {
		var rows []int
		for i := range variants {
			rows = append(rows, i)
		}
		return rows, nil
	}
	rows, err := listflag.Ints(spec)
	if err != nil {
		return nil, fmt.Errorf("--variants: %w", err)
	}
	for _, i := range rows {
		if i < 0 || i >= len(variants) {
			return nil, fmt.Errorf("--variants: %d is not a row 0..%d", i, len(variants)-1)
		}
	}
	return rows, nil
}

func run(st study) error {
	class, out, bin, seeds, epochs := st.class, st.out, st.bin, st.seeds, st.epochs
	t, ok := targets[class]
	if !ok {
		return fmt.Errorf("unknown --class %q (person or sky)", class)
	}
	if out == "" {
		return errors.New("--out is required")
	}
	model := filepath.Join(st.assets, "models", "deeplabv3plus_person_dynamic.onnx")
	data := filepath.Join(st.assets, "data", "camvid")
	for _, p := range []string{model, data, bin} {
		if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	pre := []string{"--value-scale", "0.00784313725490196", "--value-offset", "-1"}
	common := append([]string{"--model", model, "--data", data, "--label-map", t.labelMap,
		"--class-names", t.classNames, "--crop", st.crop, "--batch", "4", "--epochs", strconv.Itoa(epochs),
		"--scale-min", "0.75", "--scale-max", "1.5", "--optimizer", "adamw", "--lr", "2e-4",
		"--weight-decay", "1e-4", "--schedule", "poly:0.9", "--size-classes", "1"}, pre...)
	common = append(common, t.extra...)

	results := make([][]evalJSON, len(variants))
	lastResults := make([][]evalJSON, len(variants))
	minutes := make([][]float64, len(variants))
	for _, vi := range st.rows {
		v := variants[vi]
		for seed := 1; seed <= seeds; seed++ {
			dir := filepath.Join(out, fmt.Sprintf("v%d_s%d", vi, seed))
			secs, done := trainedSeconds(dir, epochs)
			if !done {
				if err := os.RemoveAll(dir); err != nil { // an unfinished run: start it again
					return err
				}
				args := append([]string{"finetune", "--out", dir, "--seed", strconv.Itoa(seed)}, common...)
				args = append(args, v.flags...)
				fmt.Fprintf(os.Stderr, "== %s, seed %d: %s %s\n", v.name, seed, bin, strings.Join(args, " "))
				if err := command(bin, args, os.Stderr); err != nil {
					return err
				}
				if secs, done = trainedSeconds(dir, epochs); !done {
					return fmt.Errorf("%s: finetune ended without %d epochs and model.onnx", dir, epochs)
				}
			}
			minutes[vi] = append(minutes[vi], secs/60)
			// model.onnx is the run's best epoch by val mIoU (what finetune
			// exports); last.ckpt is where training ended. Both are scored,
			// the last one with the same small/large threshold.
			evalArgs := append([]string{"eval", "--json",
				"--images", filepath.Join(data, "images", "val"), "--masks", filepath.Join(data, "masks", "val"),
				"--label-map", t.labelMap, "--class-names", t.classNames, "--size-classes", "1"}, pre...)
			e, err := evaluate(bin, filepath.Join(dir, "eval.json"), slices.Concat(evalArgs, []string{"--model", filepath.Join(dir, "model.onnx")}))
			if err != nil {
				return err
			}
			last, err := evaluate(bin, filepath.Join(dir, "eval_last.json"), slices.Concat(evalArgs, []string{
				"--model", filepath.Join(dir, "last.ckpt"), "--size-threshold", strconv.FormatFloat(e.Threshold, 'g', -1, 64)}))
			if err != nil {
				return err
			}
			lastResults[vi] = append(lastResults[vi], last)
			results[vi] = append(results[vi], e)
		}
	}
	fmt.Println("Best epoch by val mIoU (model.onnx, what `segtune finetune` exports):")
	fmt.Println()
	printTable(os.Stdout, class, st.rows, results, minutes)
	fmt.Println()
	fmt.Println("Last epoch (last.ckpt):")
	fmt.Println()
	printTable(os.Stdout, class, st.rows, lastResults, minutes)
	if st.plot == "" {
		return nil
	}
	var runs []history.Run
	for _, vi := range st.rows {
		v := variants[vi]
		recs, err := history.Read(filepath.Join(out, fmt.Sprintf("v%d_s1", vi), finetune.HistoryFile))
		if err != nil {
			return err
		}
		runs = append(runs, history.Run{Name: v.name, Records: recs})
	}
	return history.PlotPNG(st.plot, runs, history.PlotOptions{
		Title:  fmt.Sprintf("CamVid %s, seed 1", class),
		Metric: "val_iou_" + class,
	})
}

// evaluate returns the `segtune eval --json` summary stored at path,
// running eval with args first when there is none.
func evaluate(bin, path string, args []string) (evalJSON, error) {
	var e evalJSON
	if _, err := os.Stat(path); err != nil {
		var buf strings.Builder
		if err := command(bin, args, &buf); err != nil {
			return e, err
		}
		if err := atomicfile.Write(path, []byte(buf.String()), 0o644); err != nil {
			return e, err
		}
	}
	raw, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(raw, &e)
	}
	if err != nil {
		return e, fmt.Errorf("%s: %v", path, err)
	}
	return e, nil
}

// trainedSeconds reports whether dir holds a finished run of the given
// number of epochs (its model.onnx exported, its epochs logged) and the
// training time its metrics.jsonl records.
func trainedSeconds(dir string, epochs int) (float64, bool) {
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		return 0, false
	}
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		return 0, false
	}
	secs, n := 0.0, 0
	for _, line := range strings.Split(string(raw), "\n") {
		var r struct {
			Kind    string  `json:"kind"`
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Kind == "epoch" {
			secs += r.Seconds
			n++
		}
	}
	return secs, n >= epochs
}

func command(bin string, args []string, stdout io.Writer) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v", bin, args[0], err)
	}
	return nil
}

func printTable(w io.Writer, class string, rows []int, results [][]evalJSON, minutes [][]float64) {
	if len(rows) > 0 && len(results[rows[0]]) > 0 {
		fmt.Fprintf(w, "Small/large split at the val mean %s fraction, %.4f.\n\n", class, results[rows[0]][0].Threshold)
	}
	fmt.Fprintf(w, "| run | %[1]s IoU | mean IoU | %[1]s IoU small | %[1]s IoU large | mIoU gap (large − small) | training minutes/run |\n", class)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, vi := range rows {
		v, rs := variants[vi], results[vi]
		col := func(f func(evalJSON) *float64) string {
			var xs []float64
			for _, r := range rs {
				if p := f(r); p != nil {
					xs = append(xs, *p)
				}
			}
			return stats.MeanSD(xs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", v.name,
			col(func(e evalJSON) *float64 { return e.ClassIoU(1) }),
			col(func(e evalJSON) *float64 { return e.MeanIoU }),
			col(func(e evalJSON) *float64 { return e.Groups["small"].ClassIoU(1) }),
			col(func(e evalJSON) *float64 { return e.Groups["large"].ClassIoU(1) }),
			col(func(e evalJSON) *float64 { return e.SizeGap }),
			stats.MeanSD(minutes[vi]))
	}
}
