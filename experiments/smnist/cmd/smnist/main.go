// Command smnist runs the paper's Experiment 1 (S-MNIST, docs/method.md §11)
// with package experiments/smnist and writes the results as JSON, a
// Markdown table and a PNG plot of test accuracy per epoch.
//
//	go run ./experiments/smnist/cmd/smnist --mnist "$(scripts/install-mnist.sh | tail -n1)" --out out/smnist
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/experiments/smnist"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/runtime"
)

func main() {
	mnist := flag.String("mnist", os.Getenv("SEGTUNE_MNIST"), "folder with the four MNIST IDX files (scripts/install-mnist.sh prints it)")
	synthetic := flag.Int("synthetic", 0, "use this many synthetic digit-like images instead of MNIST (tests, smoke runs)")
	trainN := flag.Int("train", 0, "use the first N MNIST training images (0: all 60000; S-MNIST doubles it)")
	testN := flag.Int("test", 0, "use the first N MNIST test images (0: all 10000)")
	epochs := flag.Int("epochs", 40, "epochs")
	batch := flag.Int("batch", 100, "batch size")
	alphas := flag.String("alphas", "0,1e-2,1e-3,1e-4", "comma-separated α values (0: baseline)")
	schedules := flag.String("schedules", "epoch", "comma-separated projection schedules for α > 0: epoch (Algorithm 1), step (full projections)")
	heads := flag.String("heads", "input", "comma-separated S-measure heads: input (sibling unit), logits (on the layer's output)")
	norm := flag.String("norm", "mean", "what α multiplies: mean (L/N, the weight of the F1 term relative to the cross entropy; the default of dual and segtune) or sum (the paper's L: α_sum = α_mean/N)")
	lr := flag.Float64("lr", 1e-2, "Adam step size of the network (the paper's 1e-2)")
	feas := flag.String("feasibility", "", "how (τ, ε) are kept near C between projections: batch, clip or none (default: dual's, batch)")
	lambdaInit := flag.Float64("lambda-init", 0, "initial λ (0: dual's default; negative: 0, the paper's)")
	dualEvery := flag.Int("dual-every", 0, "dual step every K steps as well as at epoch ends (0: dual's default; negative: epoch ends only)")
	cLambda := flag.Float64("c-lambda", 0, "dual step constant for λ (0: dual's default)")
	cMu := flag.Float64("c-mu", 0, "dual step constant for μ (0: dual's default)")
	dualLR := flag.Float64("dual-lr", 0, "Adam step size of τ and ε (0: dual's default)")
	bound := flag.Float64("score-bound", 0, "with --heads logits: |s| ≤ 2R (normalised logits, boxed head); 0: unbounded")
	tag := flag.String("tag", "", "appended to every run's name")
	seed := flag.Uint64("seed", 1, "seed of the weights and the batch order")
	jobs := flag.Int("jobs", 1, "runs in parallel")
	threads := flag.Int("threads", 1, "ONNX Runtime threads per run")
	out := flag.String("out", "out/smnist", "output folder (results.json, table.md, accuracy.png)")
	title := flag.String("title", "S-MNIST: one-layer network, test accuracy per epoch", "plot title")
	replot := flag.String("replot", "", "only redraw the plots and the table from this results.json into --out")
	flag.Parse()

	if *replot != "" {
		if err := replotFrom(*replot, *out, *title); err != nil {
			log.Fatal(err)
		}
		return
	}

	if err := runtime.Init(""); err != nil {
		log.Fatalf("smnist: %v", err)
	}
	var train, test *smnist.Set
	switch {
	case *synthetic > 0:
		train, test = smnist.Synthetic(*synthetic, 1), smnist.Synthetic(max(100, *synthetic/6), 2)
	case *mnist != "":
		var err error
		if train, test, err = smnist.LoadMNIST(*mnist); err != nil {
			log.Fatalf("smnist: %v", err)
		}
	default:
		log.Fatal("smnist: give --mnist DIR (scripts/install-mnist.sh prints it) or --synthetic N")
	}
	d, err := smnist.Prepare(train, test, *trainN, *testN, 0)
	if err != nil {
		log.Fatal(err)
	}
	pos := 0
	for _, c := range d.TrainClass {
		pos += c
	}
	log.Printf("S-MNIST: %d training, %d test examples; mean foreground size %.1f px; |S+| = %d", d.Train.Len(), d.Test.Len(), d.MeanSize, pos)

	var cfgs []smnist.Config
	headList := listflag.Split(*heads)
	for _, h := range headList {
		for _, a := range listflag.Split(*alphas) {
			alpha, err := strconv.ParseFloat(a, 64)
			if err != nil {
				log.Fatalf("smnist: --alphas: %v", err)
			}
			scheds := listflag.Split(*schedules)
			if alpha == 0 {
				scheds = []string{smnist.ScheduleEpoch}
			}
			for _, s := range scheds {
				c := smnist.Config{Alpha: alpha, Schedule: s, Head: h, Epochs: *epochs, Batch: *batch, Seed: *seed,
					Threads: *threads, LR: *lr, Dual: dual.Config{Normalization: dual.Normalization(*norm),
						Feasibility: dual.Feasibility(*feas), LambdaInit: *lambdaInit, DualEvery: *dualEvery,
						CLambda: *cLambda, CMu: *cMu, LR: *dualLR}}
				if h == smnist.HeadLogits {
					c.ScoreBound = *bound
				}
				c.Name = name(c, len(headList) > 1) + *tag
				c.Log = func(s string) { log.Print(s) }
				cfgs = append(cfgs, c)
			}
		}
	}
	results, err := runAll(cfgs, d, *jobs)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	js, err := json.MarshalIndent(map[string]any{
		"train_examples": d.Train.Len(), "test_examples": d.Test.Len(), "mean_size": d.MeanSize, "positives": pos, "runs": results,
	}, "", " ")
	if err != nil {
		log.Fatal(err)
	}
	if err := atomicfile.Write(filepath.Join(*out, "results.json"), js, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := write(*out, *title, results); err != nil {
		log.Fatal(err)
	}
}

// write puts table.md, accuracy.png (every run) and, with several heads,
// accuracy_<head>.png (the runs of one head) into dir.
func write(dir, title string, results []*smnist.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	table := smnist.Table(results)
	if err := atomicfile.Write(filepath.Join(dir, "table.md"), []byte(table), 0o644); err != nil {
		return err
	}
	fmt.Print(table)
	if err := smnist.PlotAccuracy(filepath.Join(dir, "accuracy.png"), title, results); err != nil {
		return err
	}
	byHead := map[string][]*smnist.Results{}
	var order []string
	for _, r := range results {
		if byHead[r.Config.Head] == nil {
			order = append(order, r.Config.Head)
		}
		byHead[r.Config.Head] = append(byHead[r.Config.Head], r)
	}
	if len(order) < 2 {
		return nil
	}
	for _, h := range order {
		t := fmt.Sprintf("%s (S-measure head on %s)", title, h)
		if err := smnist.PlotAccuracy(filepath.Join(dir, "accuracy_"+h+".png"), t, byHead[h]); err != nil {
			return err
		}
	}
	return nil
}

func name(c smnist.Config, withHead bool) string {
	var n string
	switch {
	case c.Alpha == 0:
		n = "baseline α=0"
	case c.Schedule == smnist.ScheduleStep:
		n = fmt.Sprintf("α=%g full proj.", c.Alpha)
	default:
		n = fmt.Sprintf("α=%g Alg. 1", c.Alpha)
	}
	if withHead {
		n += " [" + c.Head + "]"
	}
	return n
}

// replotFrom redraws the plots and the table of a results.json into out.
func replotFrom(path, out, title string) error {
	var saved struct {
		Runs []*smnist.Results `json:"runs"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		return fmt.Errorf("smnist: --replot: %v", err)
	}
	return write(out, title, saved.Runs)
}

// runAll runs every configuration on d, jobs at a time.
func runAll(cfgs []smnist.Config, d *smnist.Data, jobs int) ([]*smnist.Results, error) {
	results := make([]*smnist.Results, len(cfgs))
	var g errgroup.Group
	g.SetLimit(max(1, jobs))
	for i, c := range cfgs {
		g.Go(func() error {
			r, err := smnist.Run(c, d)
			if err != nil {
				return fmt.Errorf("smnist: %s: %v", c.Name, err)
			}
			results[i] = r
			return nil
		})
	}
	return results, g.Wait()
}
