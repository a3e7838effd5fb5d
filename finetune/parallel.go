package finetune

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/setting"
)

// TrainParallel is Train for data-parallel training on the ranks of comm
// (MPI processes, see internal/mpi), every rank calling it with the same
// configuration and dir; with a world of one it is Train.
//
// A step's global batch is Size()·cfg.Batch examples, drawn as one process
// drawing batches of that size would (same order, same augmentation of
// each example, same balanced sampling): rank r trains on its r-th
// consecutive share of cfg.Batch. Each rank computes its share's loss,
// gradients and size scores; one MPI_Allreduce a step sums the gradients
// (each rank's cross-entropy weighted by its share of the batch's labelled
// pixels, so the sum is the gradient of the whole batch's mean loss) and
// gathers the scores. Every rank then holds the whole batch's scores and
// runs Algorithm 1's dual side (τ, ε, λ, μ, the score cache, the
// projection and dual step) on them, so those small per-example states
// stay identical replicas, as do the weights the identical summed
// gradients step; the end of every epoch checks that they are.
//
// Rank 0 alone reads and writes dir (lock, checkpoints, metrics, curves,
// config, export) and validates; a resumed run's checkpoint is broadcast
// from it. Resuming needs the number of ranks the run was trained with.
// A failure every rank knows of (a bad setting, a diverged loss, rank 0's
// failed checkpoint, an interrupt) is returned on every rank as an
// *mpi.Failure (or ErrInterrupted), reported by one; any other error is
// this rank's alone, and the caller should end the job (mpi.Comm.Abort)
// rather than leave the others waiting.
func TrainParallel(ctx context.Context, comm *mpi.Comm, cfg Config, dir string, resume bool, hooks Hooks) (*Result, error) {
	return train(ctx, comm, cfg, dir, resume, hooks)
}

// globalBatch is the number of examples of a step, all ranks together.
//
// With Accumulate > 1 it is the examples of one optimiser step: the
// loader draws them as one batch and each rank's stepper runs its share
// in Accumulate parts of Batch (stepper.stepAccumulated).
func (t *runner) globalBatch() int { return t.cfg.Batch * t.par.Size() * t.accumulate() }

// accumulate is the batches summed in each optimiser step (1: none).
func (t *runner) accumulate() int { return max(t.cfg.Accumulate, 1) }

// NoBatchError refuses training data too small for one batch: Examples
// examples for a step of Processes processes with Batch examples each.
type NoBatchError struct{ Examples, Batch, Processes int }

func (e *NoBatchError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *NoBatchError) Named(name func(key string) string) string {
	msg := fmt.Sprintf("%d training examples make no batch of %d", e.Examples, e.Batch*e.Processes)
	if e.Processes > 1 {
		msg += setting.Sprintf(name, " (%d processes × {batch} %d)", e.Processes, e.Batch)
	}
	return msg
}

// RunExistsError refuses to start a new run in Dir, which holds a run
// (its last checkpoint) that would be overwritten.
type RunExistsError struct{ Dir string }

func (e *RunExistsError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *RunExistsError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "finetune: %s already holds a run (%s): continue it ({resume}) or choose another folder", e.Dir, checkpoint.LastName)
}

// openRunDir is the first thing a run does in its folder (on rank 0): lock
// it, refuse to overwrite another run, and load the checkpoint to resume
// from (nil when there is none).
func (t *runner) openRunDir(resume bool) (*runLock, *checkpoint.Checkpoint, error) {
	lock, err := lockRunDir(t.dir) // one run per folder, from the first file it reads
	if err != nil {
		return nil, nil, err
	}
	if !resume {
		if _, err := os.Stat(t.keeper.LastPath()); err == nil {
			// Never overwrite an earlier run's checkpoints by accident.
			lock.release()
			return nil, nil, &RunExistsError{Dir: t.dir}
		}
		return lock, nil, nil
	}
	c, err := t.keeper.LoadLast()
	switch {
	case err == nil:
		return lock, c, nil
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(t.hooks.Log, "no checkpoint in %s: starting afresh\n", t.dir)
		return lock, nil, nil
	default:
		lock.release()
		return nil, nil, err
	}
}

// RanksError refuses to resume the run of Checkpoint, trained by Was
// processes of Batch examples each, with another number (Now): the number
// fixes the batches every epoch is drawn in.
type RanksError struct {
	Checkpoint      string
	Was, Now, Batch int
}

func (e *RanksError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *RanksError) Named(name func(key string) string) string {
	how := fmt.Sprintf("launch it again with %d processes (mpirun -np %d, srun -n %d)", e.Was, e.Was, e.Was)
	if e.Was == 1 {
		how = "resume it in one process (without mpirun or srun)"
	}
	return setting.Sprintf(name, "finetune: %s: the run was trained by %d process(es) of {batch} %d (%d examples a step) and this one has %d: the number of processes fixes the batches the data is drawn in, so %s, or start a new run in another {run_dir}",
		e.Checkpoint, e.Was, e.Batch, e.Was*e.Batch, e.Now, how)
}

// checkRanks refuses to resume a run with another number of ranks
// (RanksError).
func checkRanks(p *dataparallel.Group, old Config, ckpt string) error {
	if was := max(old.Ranks, 1); was != p.Size() {
		return &RanksError{Checkpoint: ckpt, Was: was, Now: p.Size(), Batch: old.Batch}
	}
	return nil
}

// nextBatch returns this rank's part of the next batch, or errStop when
// the run is to stop at this step: on every rank at once, as soon as one
// of them is interrupted. It also weighs this rank's loss by its share of
// the batch's labelled pixels.
func (t *runner) nextBatch(ctx context.Context, loader *data.Loader) (*data.Batch, error) {
	p := t.par
	var b *data.Batch
	stop := ctx.Err() != nil
	if !stop {
		var err error
		if b, err = loader.Next(ctx); err != nil {
			if ctx.Err() == nil {
				return nil, err
			}
			stop = true
		}
	}
	if !p.Parallel() {
		if stop {
			return nil, errStop
		}
		return b, nil
	}
	labelled := 0.0
	if !stop {
		ignore := int64(t.cfg.Ignore)
		for _, m := range b.Masks {
			if m != ignore {
				labelled++
			}
		}
	}
	stopAll, err := p.Weigh(stop, labelled)
	if err != nil {
		return nil, err
	}
	if stopAll {
		return nil, errStop
	}
	return b, nil
}

// errStop says the ranks agreed to stop at this step.
var errStop = errors.New("stop")

// endEpoch ends an epoch on every rank: rank 0 has validated and saved (its
// outcome is err); the ranks learn it, stop together when it was
// interrupted, and check that their weights and dual states are still the
// same replicas.
func (t *runner) endEpochRanks(epoch int, err error) error {
	p := t.par
	if !p.Parallel() {
		return err
	}
	stop := errors.Is(err, ErrInterrupted)
	if stop {
		err = nil
	}
	var f *mpi.Failure
	if v := p.Comm().Agree(err, stop); errors.As(v, &f) && f.Stopped {
		return ErrInterrupted
	} else if v != nil {
		return v
	}
	fp, err := t.fingerprint()
	if err != nil {
		return p.Agree(err)
	}
	r, k, err := p.Differs(fp[:])
	if err != nil {
		return err
	}
	if r > 0 {
		what := []string{"weights", "size regularizer's state"}[k]
		return p.Verdict(fmt.Errorf("after epoch %d the %s on rank %d differ from rank 0's: the ranks no longer train one model (an MPI library whose sums differ between ranks?)",
			epoch+1, what, r))
	}
	return nil
}

// fingerprint hashes the weights and the size regularizer's state.
func (t *runner) fingerprint() ([2]uint64, error) {
	var out [2]uint64
	h := sha256.New()
	var b [4]byte
	for _, q := range t.params {
		io.WriteString(h, q.Name)
		for _, v := range q.Data {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	out[0] = binary.LittleEndian.Uint64(h.Sum(nil))
	if t.net.Regularized() {
		st, err := t.net.RegularizerState()
		if err != nil {
			return out, err
		}
		sum := sha256.Sum256(st)
		out[1] = binary.LittleEndian.Uint64(sum[:])
	}
	return out, nil
}

// RankMismatchError refuses a data-parallel run whose rank Rank has What
// (its training data, base model or settings) other than rank 0's.
type RankMismatchError struct {
	Rank int
	What string
}

func (e *RankMismatchError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *RankMismatchError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "rank %d's %s differ from rank 0's: every process must train the same run on the same files (the same settings, model and {train.data} on every machine)", e.Rank, e.What)
}

// checkSameRun makes sure every rank trains the same run: the same
// settings, base model and training data (each rank reads its own copy);
// a difference would silently mix different problems.
func (t *runner) checkSameRun() error {
	p := t.par
	if !p.Parallel() {
		return nil
	}
	cfg := t.cfg
	// Paths may differ between machines, and device and threads do not
	// change the problem.
	cfg.Network.BaseModel, cfg.Train, cfg.Val, cfg.Device, cfg.Threads, cfg.CacheBytes = "", DataSpec{}, DataSpec{}, "", 0, 0
	settings, err := json.Marshal(cfg)
	if err != nil {
		return p.Agree(err)
	}
	h := sha256.New()
	for id := range t.train.Len() {
		e, _ := t.train.Example(id)
		fmt.Fprintf(h, "%s %s %d %d\n", filepath.Base(e.Image), filepath.Base(e.Mask), e.Width, e.Height)
	}
	sum := func(b []byte) uint64 { s := sha256.Sum256(b); return binary.LittleEndian.Uint64(s[:]) }
	// Data first: the settings include what setup derived from the data.
	mine := []uint64{binary.LittleEndian.Uint64(h.Sum(nil)), sum([]byte(t.baseDigest)), sum(settings)}
	r, k, err := p.Differs(mine)
	if err != nil {
		return err
	}
	if r > 0 {
		what := []string{"training data (file names or image sizes)", "base model (SHA-256)", "settings"}[k]
		return p.Verdict(&RankMismatchError{Rank: r, What: what})
	}
	return nil
}
