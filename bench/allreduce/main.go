// Command allreduce measures what data-parallel fine-tuning over MPI costs
// a step: it fine-tunes segtune-synth on the synthetic data set in one
// process, and with `mpirun -np P` where every rank does the same work
// (the same --batch and --threads), and compares the medians of the
// per-step times in metrics.jsonl. Every rank's step also records
// allreduce_ms, the time it spent in the step's two collectives (the
// gradient sum and the count of labelled pixels, waiting for the slowest
// rank included). Last, it times MPI_Allreduce alone on a buffer of the
// model's trainable parameters (ranks started by mpirun running this
// program again): the cost of the sum without any waiting.
//
//	make bench-allreduce    # = make build-mpi; go run -tags mpi ./bench/allreduce -bin bin/segtune-mpi
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/mpi"
)

func main() {
	if mpi.Detect().Started() {
		raw() // a rank of the last measurement
		return
	}
	bin := flag.String("bin", "bin/segtune-mpi", "segtune built with -tags mpi (make build-mpi)")
	np := flag.Int("np", 2, "MPI ranks")
	batch := flag.Int("batch", 2, "images per rank and step")
	crop := flag.String("crop", "96x128", "training crop")
	epochs := flag.Int("epochs", 4, "epochs of each run (64 training images)")
	alpha := flag.String("alpha", "0", "size regularizer weight (0: baseline)")
	warm := flag.Int("warmup", 3, "steps of each run left out")
	flag.Parse()
	dir, err := os.MkdirTemp("", "segtune-allreduce-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func(name string, argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	data := filepath.Join(dir, "synth")
	run("data", *bin, "data", "synth", "--out", data, "--train", "64", "--val", "8")
	args := []string{"--quiet", "finetune", "--model", "segtune-synth", "--data", data, "--crop", *crop, "--batch", strconv.Itoa(*batch),
		"--epochs", strconv.Itoa(*epochs), "--threads", "1", "--alpha", *alpha}
	one, many := filepath.Join(dir, "one"), filepath.Join(dir, "many")
	run("one process", append(append([]string{*bin}, args...), "--out", one)...)
	// P independent processes at once: the ranks' competition for cores
	// and memory, without their communication.
	var apart []*exec.Cmd
	for k := range *np {
		cmd := exec.Command(*bin, append(slices.Clone(args), "--out", filepath.Join(dir, fmt.Sprint("apart", k)))...)
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		apart = append(apart, cmd)
	}
	for _, cmd := range apart {
		if err := cmd.Wait(); err != nil {
			log.Fatalf("independent process: %v", err)
		}
	}
	mpirun := []string{"mpirun", "--oversubscribe", "-np", strconv.Itoa(*np)}
	if os.Geteuid() == 0 {
		mpirun = append(mpirun, "--allow-run-as-root")
	}
	run("mpirun", append(append(append(mpirun, *bin), args...), "--out", many)...)

	steps := func(d string) (secs, wait []float64) {
		recs, err := history.Read(filepath.Join(d, "metrics.jsonl"))
		if err != nil {
			log.Fatal(err)
		}
		for i, r := range history.Filter(recs, history.KindStep) {
			if i < *warm {
				continue
			}
			secs = append(secs, r.Seconds)
			if v, ok := r.Value("allreduce_ms"); ok {
				wait = append(wait, v)
			}
		}
		return secs, wait
	}
	s1, _ := steps(one)
	sa, _ := steps(filepath.Join(dir, "apart0"))
	sn, wn := steps(many)
	m1, ma, mn, mw := median(s1), median(sa), median(sn), median(wn)
	fmt.Printf("segtune-synth, crop %s, --batch %d per process, --threads 1, alpha %s, %d and %d steps after %d of warm-up\n",
		*crop, *batch, *alpha, len(s1), len(sn), *warm)
	fmt.Printf("one process alone:                %7.1f ms/step\n", m1*1e3)
	fmt.Printf("%d independent processes at once:  %7.1f ms/step\n", *np, ma*1e3)
	fmt.Printf("mpirun -np %d:                     %7.1f ms/step (global batch %d)\n", *np, mn*1e3, *np**batch)
	fmt.Printf("  of which in collectives:        %7.2f ms/step (%.1f %%, waiting for the slowest rank included)\n", mw, 100*mw/(mn*1e3))
	fmt.Printf("overhead over independent runs:   %+7.1f %% of the step\n", 100*(mn-ma)/ma)

	ck, err := checkpoint.Load(filepath.Join(one, "last.ckpt"))
	if err != nil {
		log.Fatal(err)
	}
	floats := 0
	for _, w := range ck.Weights {
		floats += len(w.Data)
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(mpirun[0], append(mpirun[1:], self, "-floats", strconv.Itoa(floats))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("mpirun %s: %v\n%s", self, err, out)
	}
	fmt.Print(string(out[strings.Index(string(out), "MPI_Allreduce"):]))
}

// raw times MPI_Allreduce of -floats float32 values on every rank and
// prints rank 0's median.
func raw() {
	floats := flag.Int("floats", 1<<20, "")
	flag.Parse()
	c, err := mpi.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Finalize()
	buf := make([]float32, *floats)
	var ts []float64
	for i := range 60 {
		t0 := time.Now()
		if err := c.AllreduceFloat32(buf); err != nil {
			log.Fatal(err)
		}
		if i >= 10 {
			ts = append(ts, time.Since(t0).Seconds())
		}
	}
	if c.Rank() == 0 {
		fmt.Printf("MPI_Allreduce alone, %d float32 (%.1f MB, the trainable parameters) on %d ranks: %.2f ms (median of %d)\n",
			*floats, float64(*floats)*4/1e6, c.Size(), median(ts)*1e3, len(ts))
	}
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}
