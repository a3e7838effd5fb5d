// Command smniststudy runs the S-MNIST half of the size study
// (docs/study.md): the baseline and the F1 regulariser at the same learning
// rate, for each of several learning rates; phase A picks α per learning
// rate by the final accuracy on held-out training pairs (MNIST training
// images kept out of training together with their rescaled copies); phase
// B trains fresh seeds of the baseline and the chosen α, paired by seed,
// and scores them on the S-MNIST test set with mean paired differences and
// 95 % t intervals. Every run is experiments/smnist.Run. The study is
// resumable: finished runs (OUT/runs/*.json) and the selection
// (OUT/selection.json) are read back, not redone.
//
//	go run ./experiments/smnist/cmd/smniststudy --mnist "$(scripts/install-mnist.sh | tail -n1)" --out out/smnist-study
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/experiments/smnist"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/runtime"
)

func main() {
	mnist := flag.String("mnist", os.Getenv("SEGTUNE_MNIST"), "folder with the four MNIST IDX files (scripts/install-mnist.sh prints it)")
	synthetic := flag.Int("synthetic", 0, "use this many synthetic digit-like training images instead of MNIST (smoke runs)")
	trainN := flag.Int("train", 0, "use the first N MNIST training images (0: all 60000), before holding out")
	testN := flag.Int("test", 0, "use the first N MNIST test images (0: all 10000)")
	hold := flag.Int("hold", 10000, "MNIST training images held out for selection, with their rescaled copies")
	splitSeed := flag.Uint64("split-seed", 17, "seed of the held-out split")
	epochs := flag.Int("epochs", 40, "epochs of every run (the paper's 40)")
	batch := flag.Int("batch", 100, "batch size")
	lrs := flag.String("lrs", "1e-3,1e-2", "network learning rates; baseline and F1 run at each")
	alphas := flag.String("alphas", "0.01,0.1,1", "F1 strengths α (mean normalisation: the F1 term's weight relative to the cross entropy) tried in phase A")
	selSeeds := flag.String("select-seeds", "1,2", "phase A seeds")
	repSeeds := flag.String("report-seeds", "3,4,5,6,7", "phase B seeds (fresh: not among --select-seeds)")
	head := flag.String("head", smnist.HeadLogits, "S-measure head: logits (reaches the classifier) or input")
	sched := flag.String("schedule", smnist.ScheduleEpoch, "projection schedule: epoch (Algorithm 1) or step")
	bound := flag.Float64("score-bound", 1, "|s| ≤ 2R with head logits (segtune finetune's default 1); 0: unbounded")
	lambdaInit := flag.Float64("lambda-init", 0.01, "initial λ (segtune finetune's default 0.01)")
	// 10, the library's default when the S-MNIST half ran (docs/study.md); the
	// CamVid half later moved the default to 1.
	cLambda := flag.Float64("c-lambda", 10, "c_λ of the dual step")
	cMu := flag.Float64("c-mu", dual.DefaultCMu, "c_μ of the dual step")
	jobs := flag.Int("jobs", 1, "runs in parallel")
	threads := flag.Int("threads", 1, "ONNX Runtime threads per run")
	out := flag.String("out", "out/smnist-study", "output folder: study.json, runs/, selection.json, results.json, tables.md, accuracy.png")
	verbose := flag.Bool("v", false, "log every epoch of every run")
	selectOnly := flag.Bool("select-only", false, "stop after phase A and the selection (a supplementary sweep of α)")
	flag.Parse()

	cfg := smnist.StudyConfig{
		Base: smnist.Config{Schedule: *sched, Head: *head, Epochs: *epochs, Batch: *batch, Threads: *threads,
			Dual: dual.Config{Normalization: dual.NormMean, LambdaInit: *lambdaInit, CLambda: *cLambda, CMu: *cMu}},
		LRs: floats(*lrs, "--lrs"), Alphas: floats(*alphas, "--alphas"),
		SelectSeeds: seeds(*selSeeds, "--select-seeds"), ReportSeeds: seeds(*repSeeds, "--report-seeds"),
		TrainN: *trainN, TestN: *testN, HoldN: *hold, SplitSeed: *splitSeed,
	}
	if *head == smnist.HeadLogits {
		cfg.Base.ScoreBound = *bound
	}
	if *verbose {
		cfg.Base.Log = func(s string) { log.Print(s) }
	}

	if err := runtime.Init(""); err != nil {
		log.Fatalf("smniststudy: %v", err)
	}
	var train, test *smnist.Set
	switch {
	case *synthetic > 0:
		train, test = smnist.Synthetic(*synthetic, 1), smnist.Synthetic(max(100, *synthetic/6), 2)
		cfg.TrainN = -*synthetic // recorded, so a synthetic study never mixes with a real one
	case *mnist != "":
		var err error
		if train, test, err = smnist.LoadMNIST(*mnist); err != nil {
			log.Fatalf("smniststudy: %v", err)
		}
	default:
		log.Fatal("smniststudy: give --mnist DIR (scripts/install-mnist.sh prints it) or --synthetic N")
	}
	d, err := smnist.PrepareStudy(train, test, *trainN, *testN, *hold, *splitSeed)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("S-MNIST study: %d training, %d held-out, %d test examples; threshold %.1f px",
		d.Select.Train.Len(), d.Select.Test.Len(), d.Report.Test.Len(), d.Select.MeanSize)

	t0 := time.Now()
	st := &smnist.Study{Cfg: cfg, Out: *out, Jobs: *jobs, Log: func(s string) { log.Print(s) }, SelectOnly: *selectOnly}
	res, err := st.Run(d)
	if err != nil {
		log.Fatal(err)
	}
	if len(res.Report) == 0 {
		fmt.Print(res.Tables())
		return
	}
	if err := res.PlotMeans(filepath.Join(*out, "accuracy.png"), "S-MNIST study, phase B: test accuracy per epoch"); err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Tables())
	log.Printf("done in %s (summed training time of all runs, this and earlier invocations: %.0f s)", time.Since(t0).Round(time.Second), res.WallS)
}

func floats(s, flagName string) []float64 {
	var out []float64
	for _, f := range listflag.Split(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			log.Fatalf("smniststudy: %s: %v", flagName, err)
		}
		out = append(out, v)
	}
	return out
}

func seeds(s, flagName string) []uint64 {
	var out []uint64
	for _, f := range listflag.Split(s) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			log.Fatalf("smniststudy: %s: %v", flagName, err)
		}
		out = append(out, v)
	}
	return out
}
