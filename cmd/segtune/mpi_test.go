package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// mpiTolerance bounds |w₂ − w₁| over every weight after the runs below:
// two MPI ranks of --batch 2 against one process of --batch 4, same seed.
// The gradients are the same sums taken in another order (per rank, then
// across ranks), which changes their last float32 bits; AdamW at lr 1e-4
// turns a relative difference δ in a gradient into about lr·δ in a step,
// more for gradients near zero, where its normalisation magnifies it. The
// orders differ more since onnx/grad picks a Conv weight gradient's form
// by size (foldBatch: the batch folded into one product or summed image by
// image), so the batch-2 and batch-4 graphs may compute it differently:
// measured 6e-8 (baseline) and 3.3e-6 (regularizer, on one weight of 124
// tensors; 6.9e-7 with one form for every batch), the dual state within
// 6e-8, against weights of order 1e-1.
const mpiTolerance = 1e-5

// mpiBinary builds segtune with MPI (-tags mpi) for the tests that launch
// it with mpirun, and returns it with the launcher's command.
func mpiBinary(t *testing.T) (bin string, mpirun []string) {
	t.Helper()
	mpirun = testassets.RequireMPI(t)
	runtimetest.Require(t)
	return buildSegtune(t, "segtune-mpi", "mpi"), mpirun
}

// runJob runs argv (a command line) within limit and returns its combined
// output and exit code; a job still running then is a hang.
func runJob(t *testing.T, limit time.Duration, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within %v (a rank hangs?):\n%s", strings.Join(argv, " "), limit, out)
	}
	code := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		code = exit.ExitCode()
	}
	return string(out), code
}

func loadCkpt(t *testing.T, path string) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// The acceptance test of data-parallel fine-tuning: `mpirun -np 2` with
// --batch 2 ends with the weights of one process with --batch 4 and the
// same seed, within mpiTolerance, for the baseline and for the size
// regularizer (whose dual state, τ, λ, ε and μ, must match too); rank 0
// alone writes, and prints the run once.
func TestMPIFinetuneMatchesOneProcess(t *testing.T) {
	bin, mpirun := mpiBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "16", "--val", "4", "--size", "48x64", "--seed", "4"); err != nil {
		t.Fatal(err)
	}
	common := []string{"finetune", "--model", "segtune-synth", "--data", data, "--crop", "48x64", "--epochs", "2", "--seed", "9", "--threads", "1"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"baseline", nil},
		{"regularizer", []string{"--alpha", "0.05", "--projection", "epoch"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, two := filepath.Join(dir, c.name+"-one"), filepath.Join(dir, c.name+"-two")
			args := append(slices.Clone(common), c.args...)
			if out, code := runJob(t, 3*time.Minute, append(append([]string{bin}, args...), "--out", one, "--batch", "4")...); code != 0 {
				t.Fatalf("one process: exit %d\n%s", code, out)
			}
			job := append(append(slices.Clone(mpirun), "-np", "2", bin), args...)
			out, code := runJob(t, 3*time.Minute, append(job, "--out", two, "--batch", "2")...)
			if code != 0 {
				t.Fatalf("mpirun -np 2: exit %d\n%s", code, out)
			}
			if n := strings.Count(out, "best val mIoU"); n != 1 {
				t.Errorf("the run's summary printed %d times, want once (rank 0):\n%s", n, out)
			}
			a, b := loadCkpt(t, filepath.Join(one, "last.ckpt")), loadCkpt(t, filepath.Join(two, "last.ckpt"))
			if a.Step != 8 || b.Step != 8 {
				t.Fatalf("steps %d and %d, want 8 (16 images, 4 a step, 2 epochs)", a.Step, b.Step)
			}
			worst, where := 0.0, ""
			for i, w := range a.Weights {
				v := b.Weights[i]
				if v.Name != w.Name || len(v.Data) != len(w.Data) {
					t.Fatalf("weights %s and %s", w.Name, v.Name)
				}
				for k := range w.Data {
					if d := math.Abs(float64(w.Data[k]) - float64(v.Data[k])); d > worst {
						worst, where = d, w.Name
					}
				}
			}
			t.Logf("%s: largest |weight difference| %.3g (%s) over %d tensors", c.name, worst, where, len(a.Weights))
			if worst > mpiTolerance {
				t.Errorf("weights differ by %.3g in %s, over the tolerance %g", worst, where, mpiTolerance)
			}
			if c.args != nil {
				da, db := dualValues(t, a), dualValues(t, b)
				if len(da) == 0 || len(da) != len(db) {
					t.Fatalf("dual states of %d and %d values", len(da), len(db))
				}
				moved := 0.0
				for i := range da {
					moved = max(moved, math.Abs(da[i]-db[i]))
				}
				t.Logf("%s: largest dual-state difference %.3g over %d values", c.name, moved, len(da))
				if moved > 1e-5 {
					t.Errorf("dual states differ by %.3g", moved)
				}
			}
			// Rank 1 wrote nothing beside rank 0's files.
			list := func(d string) []string {
				es, _ := os.ReadDir(d)
				var names []string
				for _, e := range es {
					names = append(names, e.Name())
				}
				return names
			}
			if la, lb := list(one), list(two); !slices.Equal(la, lb) {
				t.Errorf("files of the MPI run %v, of one process %v", lb, la)
			}
			var cfg struct {
				Ranks, Batch int
			}
			json.Unmarshal(b.Config, &cfg)
			if cfg.Ranks != 2 || cfg.Batch != 2 {
				t.Errorf("the checkpoint records ranks %d, batch %d", cfg.Ranks, cfg.Batch)
			}
			if c.args == nil {
				// Resuming needs as many processes.
				out, code := runJob(t, time.Minute, bin, "finetune", "--out", two, "--resume", "--epochs", "3")
				if code == 0 || !strings.Contains(out, "trained by 2 process") || !strings.Contains(out, "mpirun -np 2") {
					t.Errorf("resuming a 2-process run in one: exit %d\n%s", code, out)
				}
			}
		})
	}
}

// dualValues reads τ, λ, ε and μ of every term from a checkpoint.
func dualValues(t *testing.T, ck *checkpoint.Checkpoint) []float64 {
	t.Helper()
	v, err := trainer.DualVariables(ck)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A flag every rank refuses is reported once; a failure of one rank alone
// (its machine's copy of the data is broken) is reported by that rank and
// ends every rank, none left waiting for it.
func TestMPIFailuresEndTheJob(t *testing.T) {
	bin, mpirun := mpiBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "8", "--val", "2", "--size", "48x64"); err != nil {
		t.Fatal(err)
	}
	job := append(slices.Clone(mpirun), "-np", "2", bin)
	args := []string{"finetune", "--model", "segtune-synth", "--data", data, "--epochs", "2", "--batch", "2", "--threads", "1"}
	out, code := runJob(t, 2*time.Minute, append(append(slices.Clone(job), args...), "--out", filepath.Join(dir, "a"), "--crop", "48xabc")...)
	if code == 0 || strings.Count(out, "--crop") != 1 || strings.Contains(out, "rank 0") {
		t.Errorf("a bad --crop on every rank: exit %d, want one message naming the flag:\n%s", code, out)
	}

	// Rank 1 reads a copy of the data whose image 00003 is cut short (MPMD:
	// mpirun -np 1 A : -np 1 B).
	broken := filepath.Join(dir, "broken")
	if err := os.CopyFS(broken, os.DirFS(data)); err != nil {
		t.Fatal(err)
	}
	imgs, _ := filepath.Glob(filepath.Join(broken, "images", "train", "*"))
	slices.Sort(imgs)
	victim := imgs[3]
	raw, _ := os.ReadFile(victim)
	if err := os.WriteFile(victim, raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "b")
	rank := func(d string) []string {
		return append(append([]string{"-np", "1", bin}, args...), "--data", d, "--out", run, "--crop", "48x64")
	}
	mpmd := append(append(append(slices.Clone(mpirun), rank(data)...), ":"), rank(broken)...)
	start := time.Now()
	out, code = runJob(t, 2*time.Minute, mpmd...)
	t.Logf("job ended %v after its start, exit %d:\n%s", time.Since(start).Round(time.Millisecond), code, out)
	if code == 0 || !strings.Contains(out, "rank 1 of 2") || !strings.Contains(out, filepath.Base(victim)) {
		t.Fatalf("rank 1's broken image: exit %d, want its message:\n%s", code, out)
	}
}

// An error of one rank alone during training (say its disk fails) is
// printed with its rank and aborts the job, which releases the ranks that
// wait for it in a collective; an error every rank agreed on leaves in
// order, reported once.
func TestLeaveRanks(t *testing.T) {
	w := mpi.Local(2)
	released := make(chan error)
	go func() { released <- w[0].AllreduceFloat32([]float32{1}) }()
	err := leaveRanks(w[1], errors.New("write /scratch/x: no space left on device"))
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || err.Error() != "" {
		t.Fatalf("a local error leaves with %v", err)
	}
	select {
	case err := <-released:
		if !errors.Is(err, mpi.ErrAborted) {
			t.Fatalf("the waiting rank got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other rank still waits after the abort")
	}
	agreed := mpi.Local(2)
	errs := make([]error, 2)
	done := make(chan bool)
	for r := range 2 {
		go func() {
			errs[r] = leaveRanks(agreed[r], agreed[r].Agree(cli.Exit("--crop: want HxW", 2), false))
			done <- true
		}()
	}
	<-done
	<-done
	for r, err := range errs {
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || (err.Error() != "") != (r == 0) {
			t.Errorf("rank %d leaves with %q (exit %v)", r, err, exit)
		}
	}
	if errs[0].Error() != "--crop: want HxW" {
		t.Errorf("rank 0 reports %q", errs[0])
	}
	single := leaveRanks(mpi.Single(), finetune.ErrInterrupted)
	if !errors.As(single, &exit) || exit.ExitCode() != 130 {
		t.Errorf("one process interrupted: %v", single)
	}
}

// SIGTERM to mpirun (what Ctrl-C, scancel and a deleted MPIJob do) stops
// both ranks at the same step with one checkpoint, and `mpirun -np 2
// --resume` continues to exactly the weights of an uninterrupted run.
func TestMPIInterruptAndResume(t *testing.T) {
	bin, mpirun := mpiBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "16", "--val", "2", "--size", "48x64", "--seed", "6"); err != nil {
		t.Fatal(err)
	}
	job := append(append(slices.Clone(mpirun), "-np", "2", bin), "finetune", "--model", "segtune-synth", "--data", data,
		"--crop", "48x64", "--batch", "2", "--epochs", "25", "--threads", "1", "--alpha", "0.05", "--lr", "1e-3")
	full, part := filepath.Join(dir, "full"), filepath.Join(dir, "part")
	if out, code := runJob(t, 4*time.Minute, append(slices.Clone(job), "--out", full)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, out)
	}
	cmd := exec.Command(job[0], append(job[1:], "--out", part)...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(part, "metrics.jsonl"))
		if strings.Count(string(b), `"kind":"step"`) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no 6 steps within 2 minutes:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("mpirun still running a minute after SIGTERM:\n%s", log.String())
	}
	ck := loadCkpt(t, filepath.Join(part, "last.ckpt"))
	if ck.Step < 6 || ck.Step >= 100 {
		t.Fatalf("interrupted at step %d, want between 6 and 99:\n%s", ck.Step, log.String())
	}
	if n := strings.Count(log.String(), "interrupted: saved"); n != 1 {
		t.Errorf("%d ranks saved a checkpoint, want rank 0 alone:\n%s", n, log.String())
	}
	t.Logf("interrupted at step %d of 100", ck.Step)
	if out, code := runJob(t, 4*time.Minute, append(slices.Clone(mpirun), "-np", "2", bin, "finetune", "--out", part, "--resume")...); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, out)
	}
	a, b := loadCkpt(t, filepath.Join(full, "last.ckpt")), loadCkpt(t, filepath.Join(part, "last.ckpt"))
	if a.Step != 100 || b.Step != 100 {
		t.Fatalf("steps %d and %d, want 100", a.Step, b.Step)
	}
	for i, w := range a.Weights {
		if !slices.Equal(w.Data, b.Weights[i].Data) {
			t.Fatalf("%s differs between the resumed and the uninterrupted run", w.Name)
		}
	}
	if da := dualValues(t, a); len(da) == 0 || !slices.Equal(da, dualValues(t, b)) {
		t.Error("the dual state differs between the resumed and the uninterrupted run")
	}
}

// The ordinary build, started by mpirun as one of several processes,
// refuses before touching anything, naming the build to use.
func TestFinetuneWithoutMPIRefusesALaunch(t *testing.T) {
	if mpi.Built {
		t.Skip("this test binary has MPI")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	out := filepath.Join(t.TempDir(), "run")
	_, err := runCLI(t, "finetune", "--model", "segtune-synth", "--data", t.TempDir(), "--out", out)
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(err.Error(), "built without MPI") ||
		!strings.Contains(err.Error(), "make build-mpi") || strings.HasPrefix(err.Error(), "segtune:") {
		t.Fatalf("finetune under mpirun without MPI: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out was created (%v)", err)
	}
}
