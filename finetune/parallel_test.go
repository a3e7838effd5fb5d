package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// trainRanks trains cfg on a Local world of n ranks (goroutines of this
// process). Rank 0 gets dir; the others a path that must never be created.
func trainRanks(t *testing.T, n int, cfg Config, dir string, resume bool) ([]*Result, []error) {
	t.Helper()
	comms := mpi.Local(n)
	res, errs := make([]*Result, n), make([]error, n)
	elsewhere := filepath.Join(t.TempDir(), "rank-dir-never-written")
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := dir
			if r > 0 {
				d = elsewhere
			}
			res[r], errs[r] = TrainParallel(context.Background(), c, cfg, d, resume, Hooks{})
			if errs[r] != nil && !mpi.Agreed(errs[r]) && !errors.Is(errs[r], ErrInterrupted) {
				c.Abort(1) // as the command does: release the others
			}
		}()
	}
	wg.Wait()
	if _, err := os.Stat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rank other than 0 wrote into its --out (%v)", err)
	}
	return res, errs
}

// maxWeightDiff returns the largest |a−b| over the weights of two
// checkpoints, and its parameter.
func maxWeightDiff(t *testing.T, a, b *checkpoint.Checkpoint) (float64, string) {
	t.Helper()
	if len(a.Weights) != len(b.Weights) {
		t.Fatalf("%d and %d weight tensors", len(a.Weights), len(b.Weights))
	}
	worst, name := 0.0, ""
	for i, w := range a.Weights {
		v := b.Weights[i]
		if w.Name != v.Name || len(w.Data) != len(v.Data) {
			t.Fatalf("tensor %d: %s[%d] vs %s[%d]", i, w.Name, len(w.Data), v.Name, len(v.Data))
		}
		for k := range w.Data {
			if d := math.Abs(float64(w.Data[k] - v.Data[k])); d > worst {
				worst, name = d, w.Name
			}
		}
	}
	return worst, name
}

// dualState reads τ, λ, ε and μ of every term from a checkpoint.
func dualState(t *testing.T, ck *checkpoint.Checkpoint) []float64 {
	t.Helper()
	v, err := trainer.DualVariables(ck)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// parallelTolerance bounds how far the weights of two ranks with batch B
// may end from one process with batch 2B after the toy runs here (12
// steps, Adam at lr 0.02): the sums of the gradients are taken in another
// order, which changes their last bits, and Adam's normalisation can turn
// such a difference in a gradient near zero into one of up to lr in a
// step.
const parallelTolerance = 1e-3

// Two ranks of batch 2 train the weights one process of batch 4 trains:
// the baseline, and the size regularizer under Algorithm 1 and under the
// relu form (the projection in the graph) with its dual state (τ, λ, ε, μ)
// replicated and equal to the one process's. Rank 1
// writes nothing; rank 0 writes what one process writes.
func TestParallelMatchesOneProcess(t *testing.T) {
	runtimetest.Require(t)
	for _, projection := range []string{"", "epoch", "graph"} {
		reg := projection != ""
		name := "baseline"
		if reg {
			name = "regularizer-" + projection
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := toyConfig(t, dir)
			if reg {
				cfg = regularizedToy(t, dir, projection)
			}
			one := filepath.Join(dir, "one")
			if _, err := Train(context.Background(), cfg, one, false, Hooks{}); err != nil {
				t.Fatal(err)
			}
			two := filepath.Join(dir, "two")
			half := cfg
			half.Batch = cfg.Batch / 2
			res, errs := trainRanks(t, 2, half, two, false)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if res[0].Model == "" || res[1].Model != "" || res[0].Steps != 12 || res[1].Steps != 12 {
				t.Fatalf("results %+v %+v: want rank 0 alone exporting, 12 steps each", res[0], res[1])
			}
			a, err := checkpoint.Load(filepath.Join(one, checkpoint.LastName))
			if err != nil {
				t.Fatal(err)
			}
			b, err := checkpoint.Load(filepath.Join(two, checkpoint.LastName))
			if err != nil {
				t.Fatal(err)
			}
			d, param := maxWeightDiff(t, a, b)
			t.Logf("%s: largest weight difference %.3g (%s)", name, d, param)
			if d > parallelTolerance {
				t.Errorf("weights differ by %.3g in %s, over %g", d, param, parallelTolerance)
			}
			if reg {
				da, db := dualState(t, a), dualState(t, b)
				worst := 0.0
				for i := range da {
					worst = max(worst, math.Abs(da[i]-db[i]))
				}
				t.Logf("%s: largest dual-state difference %.3g over %d values", name, worst, len(da))
				if len(da) == 0 || len(da) != len(db) || worst > 1e-4 {
					t.Errorf("dual states differ by %.3g", worst)
				}
			}
			recs, _ := history.Read(filepath.Join(two, HistoryFile))
			if ms, ok := history.Filter(recs, history.KindStep)[0].Value("allreduce_ms"); !ok || !(ms >= 0) {
				t.Errorf("step records lack the time in collectives: %v %v", ms, ok)
			}
			// The losses logged are the whole batch's.
			la, lb := epochLosses(t, one), epochLosses(t, two)
			for i := range la {
				if math.Abs(la[i]-lb[i]) > 1e-3*math.Abs(la[i]) {
					t.Errorf("epoch %d loss %.6g on two ranks, %.6g on one", i, lb[i], la[i])
				}
			}
			var cfg2 Config
			if err := json.Unmarshal(b.Config, &cfg2); err != nil || cfg2.Ranks != 2 || cfg2.Batch != 2 {
				t.Errorf("checkpoint config: ranks %d, batch %d (%v)", cfg2.Ranks, cfg2.Batch, err)
			}
			for _, f := range []string{HistoryFile, PlotFile, ModelFile, ConfigFile, checkpoint.BestName} {
				if _, err := os.Stat(filepath.Join(two, f)); err != nil {
					t.Errorf("rank 0 did not write %s: %v", f, err)
				}
			}
		})
	}
}

// A run of two ranks resumes on two ranks exactly where it stopped, and is
// refused on one with an error that says what to do.
func TestParallelResume(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Batch = 2
	full := filepath.Join(dir, "full")
	if _, errs := trainRanks(t, 2, cfg, full, false); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	part := filepath.Join(dir, "part")
	short := cfg
	short.Epochs = 2
	if _, errs := trainRanks(t, 2, short, part, false); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	_, err := Train(context.Background(), cfg, part, true, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "trained by 2 process") || !strings.Contains(err.Error(), "mpirun -np 2") {
		t.Fatalf("resuming a 2-rank run in one process: %v", err)
	}
	_, errs := trainRanks(t, 3, cfg, part, true)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "this one has 3") || !mpi.Agreed(err) {
			t.Fatalf("rank %d resuming a 2-rank run on 3: %v", r, err)
		}
	}
	if !mpi.Reported(errs[0]) {
		t.Errorf("rank 0 does not report %v", errs[0])
	}
	if _, errs := trainRanks(t, 2, cfg, part, true); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	a, _ := checkpoint.Load(filepath.Join(full, checkpoint.LastName))
	b, _ := checkpoint.Load(filepath.Join(part, checkpoint.LastName))
	if d, p := maxWeightDiff(t, a, b); d != 0 {
		t.Errorf("resumed run ends %.3g away from the uninterrupted one (%s)", d, p)
	}
	ra, _ := history.Read(filepath.Join(full, HistoryFile))
	rb, _ := history.Read(filepath.Join(part, HistoryFile))
	sa, sb := history.Filter(ra, history.KindStep), history.Filter(rb, history.KindStep)
	if len(sa) != 12 || len(sb) != 12 {
		t.Fatalf("%d and %d step records, want 12", len(sa), len(sb))
	}
	for i := range sa {
		if sa[i].Loss != sb[i].Loss {
			t.Errorf("step %d: loss %v resumed, %v uninterrupted", i+1, sb[i].Loss, sa[i].Loss)
		}
	}
}

// A setting every rank refuses is reported once, on rank 0, and needs no
// abort; rank 0's own failure (its folder holds another run) reaches the
// others instead of leaving them waiting for a checkpoint.
func TestParallelFailuresAreAgreed(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Batch = 2
	bad := cfg
	bad.LR = -1
	_, errs := trainRanks(t, 2, bad, filepath.Join(dir, "bad"), false)
	for r, err := range errs {
		if err == nil || !mpi.Agreed(err) || mpi.Reported(err) != (r == 0) || !strings.Contains(err.Error(), "lr -1: must be in (0, 10]") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if strings.Contains(errs[0].Error(), "rank 0") {
		t.Errorf("an error of every rank names a rank: %v", errs[0])
	}
	// Each rank has a different number of examples: not the same run.
	out := filepath.Join(dir, "run")
	if _, errs := trainRanks(t, 2, cfg, out, false); errs[0] != nil {
		t.Fatal(errs)
	}
	_, errs = trainRanks(t, 2, cfg, out, false)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "already holds a run") || !mpi.Reported(errs[0]) ||
		errs[1] == nil || mpi.Reported(errs[1]) {
		t.Fatalf("second run in a used folder: %v / %v", errs[0], errs[1])
	}
}

// Ranks that read different training data refuse to train.
func TestParallelRefusesDifferentData(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Batch = 2
	other := cfg
	other.Train = toyData(t, filepath.Join(dir, "other"), "train", 13, 1)
	comms := mpi.Local(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cf := cfg
			if r == 1 {
				cf = other
			}
			_, errs[r] = TrainParallel(context.Background(), c, cf, filepath.Join(dir, "out"), false, Hooks{})
			if errs[r] != nil && !mpi.Agreed(errs[r]) {
				c.Abort(1)
			}
		}()
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1's training data") || !mpi.Reported(errs[0]) {
		t.Fatalf("different data: %v", errs)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "out")); slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), ".ckpt")
	}) {
		t.Error("a checkpoint was written by ranks that disagree")
	}
}
