package finetune

import (
	"bytes"
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
	"time"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
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

// dataParallel is a run's side of the data-parallel ranks: a world of one
// for an ordinary run, where every method is the identity.
type dataParallel struct {
	c *mpi.Comm
	// scale feeds the training graph's grad.LossScaleName: this rank's
	// share of the step's labelled pixels.
	scale []float32
	// counts is this step's [labelled pixels, stop] before the sum.
	counts [2]float64
	// buf is the step's reduction: gradients, scores, loss, one failure
	// flag per rank.
	buf []float32
	// share is this rank's view of the step's dual.Batch.
	share dual.Batch
	// wait is the time the step spent in its collectives (waiting for the
	// slowest rank included).
	wait time.Duration
}

func newDataParallel(c *mpi.Comm) *dataParallel {
	if c == nil {
		c = mpi.Single()
	}
	return &dataParallel{c: c}
}

func (p *dataParallel) size() int      { return p.c.Size() }
func (p *dataParallel) parallel() bool { return p.c.Size() > 1 }

// writes says whether this rank writes the run's files (rank 0).
func (p *dataParallel) writes() bool { return p.c.Rank() == 0 }

// globalBatch is the number of examples of a step, all ranks together.
//
// With Accumulate > 1 it is the examples of one optimiser step: the
// loader draws them as one batch and each rank's stepper runs its share
// in Accumulate parts of Batch (stepper.stepAccumulated).
func (t *trainer) globalBatch() int { return t.cfg.Batch * t.par.size() * t.accumulate() }

// accumulate is the batches summed in each optimiser step (1: none).
func (t *trainer) accumulate() int { return max(t.cfg.Accumulate, 1) }

// NoBatchError refuses training data too small for one batch: Examples
// examples for a step of Processes processes with Batch examples each.
type NoBatchError struct{ Examples, Batch, Processes int }

func (e *NoBatchError) Error() string {
	msg := fmt.Sprintf("%d training examples make no batch of %d", e.Examples, e.Batch*e.Processes)
	if e.Processes > 1 {
		msg += fmt.Sprintf(" (%d processes × batch %d)", e.Processes, e.Batch)
	}
	return msg
}

// agree turns a stage's outcome into every rank's verdict (see mpi.Agree).
func (p *dataParallel) agree(err error) error {
	if !p.parallel() {
		return err
	}
	return p.c.Agree(err, false)
}

// RunExistsError refuses to start a new run in Dir, which holds a run
// (its last checkpoint) that would be overwritten.
type RunExistsError struct{ Dir string }

func (e *RunExistsError) Error() string {
	return fmt.Sprintf("finetune: %s already holds a run (%s): continue it (resume) or choose another folder", e.Dir, checkpoint.LastName)
}

// openRunDir is the first thing a run does in its folder (on rank 0): lock
// it, refuse to overwrite another run, and load the checkpoint to resume
// from (nil when there is none).
func (t *trainer) openRunDir(resume bool) (*runLock, *checkpoint.Checkpoint, error) {
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

// shareCheckpoint hands rank 0's outcome of openRunDir to every rank: its
// failure, or the checkpoint to resume from (broadcast, so that the other
// ranks need not see rank 0's folder).
func (p *dataParallel) shareCheckpoint(ck *checkpoint.Checkpoint, err error) (*checkpoint.Checkpoint, error) {
	if !p.parallel() {
		return ck, err
	}
	var buf bytes.Buffer
	if err == nil && p.writes() && ck != nil {
		err = checkpoint.Write(&buf, ck)
	}
	if err := p.c.Agree(err, false); err != nil {
		return nil, err
	}
	b, err := p.c.Broadcast(buf.Bytes(), 0)
	if err != nil {
		return nil, err
	}
	if p.writes() || len(b) == 0 {
		return ck, nil
	}
	return checkpoint.Read(bytes.NewReader(b), int64(len(b)))
}

// RanksError refuses to resume the run of Checkpoint, trained by Was
// processes of Batch examples each, with another number (Now): the number
// fixes the batches every epoch is drawn in.
type RanksError struct {
	Checkpoint      string
	Was, Now, Batch int
}

func (e *RanksError) Error() string {
	how := fmt.Sprintf("launch it again with %d processes (mpirun -np %d, srun -n %d)", e.Was, e.Was, e.Was)
	if e.Was == 1 {
		how = "resume it in one process (without mpirun or srun)"
	}
	return fmt.Sprintf("finetune: %s: the run was trained by %d process(es) of batch %d (%d examples a step) and this one has %d: the number of processes fixes the batches the data is drawn in, so %s, or start a new run in another folder",
		e.Checkpoint, e.Was, e.Batch, e.Was*e.Batch, e.Now, how)
}

// checkRanks refuses to resume a run with another number of ranks
// (RanksError).
func (p *dataParallel) checkRanks(old Config, ckpt string) error {
	if was := max(old.Ranks, 1); was != p.size() {
		return &RanksError{Checkpoint: ckpt, Was: was, Now: p.size(), Batch: old.Batch}
	}
	return nil
}

// bind feeds the training graph's loss scale (present when the graph was
// built for several ranks).
func (p *dataParallel) bind(s *stepper) error {
	if !p.parallel() {
		return nil
	}
	i := s.inputIndex(grad.LossScaleName)
	if i < 0 {
		return fmt.Errorf("training graph lacks its %q input", grad.LossScaleName)
	}
	p.scale = []float32{1}
	s.setInput(i, runtime.NewFloat32(s.inputs[i].Shape, p.scale))
	return nil
}

// nextBatch returns this rank's part of the next batch, or errStop when
// the run is to stop at this step: on every rank at once, as soon as one
// of them is interrupted. It also weighs this rank's loss by its share of
// the batch's labelled pixels.
func (t *trainer) nextBatch(ctx context.Context, loader *data.Loader) (*data.Batch, error) {
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
	if !p.parallel() {
		if stop {
			return nil, errStop
		}
		return b, nil
	}
	p.counts = [2]float64{0, 0}
	if stop {
		p.counts[1] = 1
	} else {
		ignore := int64(t.cfg.Ignore)
		for _, m := range b.Masks {
			if m != ignore {
				p.counts[0]++
			}
		}
	}
	mine := p.counts[0]
	t0 := time.Now()
	err := p.c.AllreduceFloat64(p.counts[:])
	p.wait = time.Since(t0)
	if err != nil {
		return nil, err
	}
	if p.counts[1] > 0 {
		return nil, errStop
	}
	p.scale[0] = 0
	if p.counts[0] > 0 {
		p.scale[0] = float32(mine / p.counts[0])
	}
	return b, nil
}

// errStop says the ranks agreed to stop at this step.
var errStop = errors.New("stop")

// shareOf returns this rank's rows of the step's dual.Batch b (b itself
// alone): its examples' coefficients and the slots for their scores.
func (p *dataParallel) shareOf(b *dual.Batch, n int) *dual.Batch {
	if !p.parallel() {
		return b
	}
	lo, hi := p.c.Rank()*n, (p.c.Rank()+1)*n
	s := &p.share
	*s = dual.Batch{IDs: b.IDs[lo:hi], Eps: b.Eps, DScores: nil}
	if b.Scores != nil {
		h := len(b.Scores) / len(b.IDs)
		s.Scores = b.Scores[lo*h : hi*h]
	}
	if b.Pos != nil {
		k := len(b.Pos) / len(b.IDs)
		s.Pos, s.Neg = b.Pos[lo*k:hi*k], b.Neg[lo*k:hi*k]
	}
	return s
}

// reduce is the step's one collective: it sums every rank's gradients
// (params' Grad, replaced by the sums), gathers the batch's scores into
// scores (this rank's rows in share.Scores) and the loss, and tells every
// rank which ranks' forward pass failed (stepErr, this rank's). It returns
// the whole batch's loss, or the failure, the same on every rank.
func (p *dataParallel) reduce(params []*optim.Param, loss float64, stepErr error, scores []float64, share *dual.Batch) (float64, error) {
	n := len(scores) + 1 + p.size()
	for _, q := range params {
		n += len(q.Data)
	}
	if cap(p.buf) < n {
		p.buf = make([]float32, n)
	}
	buf := p.buf[:n]
	off := 0
	for _, q := range params {
		if stepErr == nil {
			copy(buf[off:off+len(q.Data)], q.Grad)
		} else {
			clear(buf[off : off+len(q.Data)])
		}
		off += len(q.Data)
	}
	sc := buf[off : off+len(scores)]
	clear(sc)
	if stepErr == nil && len(share.Scores) > 0 {
		lo := p.c.Rank() * len(share.Scores)
		for i, v := range share.Scores {
			sc[lo+i] = float32(v)
		}
	}
	off += len(scores)
	flags := buf[off+1:]
	clear(flags)
	buf[off] = 0
	if stepErr == nil {
		buf[off] = float32(loss) * p.scale[0]
	} else {
		flags[p.c.Rank()] = 1
	}
	t0 := time.Now()
	err := p.c.AllreduceFloat32(buf)
	p.wait += time.Since(t0)
	if err != nil {
		return 0, err
	}
	var failed []int
	for r, f := range flags {
		if f != 0 {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		if stepErr == nil {
			stepErr = fmt.Errorf("the loss is not finite on rank %v of %d", failed, p.size())
		}
		return 0, stepErr
	}
	off = 0
	for _, q := range params {
		q.Grad = buf[off : off+len(q.Data)]
		off += len(q.Data)
	}
	for i, v := range sc {
		scores[i] = float64(v)
	}
	return float64(buf[off+len(scores)]), nil
}

// stepStats adds the step's time in collectives, "allreduce_ms", to a
// step record's extra fields (nothing alone).
func (p *dataParallel) stepStats(extra map[string]float64) map[string]float64 {
	if !p.parallel() {
		return extra
	}
	if extra == nil {
		extra = map[string]float64{}
	}
	extra["allreduce_ms"] = p.wait.Seconds() * 1e3
	return extra
}

// verdict marks an error that every rank met at the same step (a failed
// forward pass on some rank, told to all by reduce, or a failure of the
// replicated dual state) as every rank's, reported by rank 0, which knows
// the checkpoint to go back to.
func (p *dataParallel) verdict(err error) error {
	if !p.parallel() || err == nil {
		return err
	}
	return &mpi.Failure{Err: err, Rank: p.c.Rank(), Size: p.size(), Report: p.writes(), Everywhere: true}
}

// endEpoch ends an epoch on every rank: rank 0 has validated and saved (its
// outcome is err); the ranks learn it, stop together when it was
// interrupted, and check that their weights and dual states are still the
// same replicas.
func (t *trainer) endEpochRanks(epoch int, err error) error {
	p := t.par
	if !p.parallel() {
		return err
	}
	stop := errors.Is(err, ErrInterrupted)
	if stop {
		err = nil
	}
	var f *mpi.Failure
	if v := p.c.Agree(err, stop); errors.As(v, &f) && f.Stopped {
		return ErrInterrupted
	} else if v != nil {
		return v
	}
	fp, err := t.fingerprint()
	if err != nil {
		return p.c.Agree(err, false)
	}
	all, err := p.c.AllgatherUint64(fp[:])
	if err != nil {
		return err
	}
	for r := 1; r < p.size(); r++ {
		for k, what := range []string{"weights", "size regularizer's state"} {
			if all[2*r+k] != all[k] {
				return &mpi.Failure{Err: fmt.Errorf("after epoch %d the %s on rank %d differ from rank 0's: the ranks no longer train one model (an MPI library whose sums differ between ranks?)",
					epoch+1, what, r), Rank: p.c.Rank(), Size: p.size(), Report: p.writes(), Everywhere: true}
			}
		}
	}
	return nil
}

// fingerprint hashes the weights and the size regularizer's state.
func (t *trainer) fingerprint() ([2]uint64, error) {
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
	if t.reg != nil {
		st, err := t.reg.state()
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

func (e *RankMismatchError) Error() string {
	return fmt.Sprintf("rank %d's %s differ from rank 0's: every process must train the same run on the same files (the same settings, model and data on every machine)", e.Rank, e.What)
}

// checkSameRun makes sure every rank trains the same run: the same
// settings, base model and training data (each rank reads its own copy);
// a difference would silently mix different problems.
func (t *trainer) checkSameRun() error {
	p := t.par
	if !p.parallel() {
		return nil
	}
	cfg := t.cfg
	// Paths may differ between machines, and device and threads do not
	// change the problem.
	cfg.Network.BaseModel, cfg.Train, cfg.Val, cfg.Device, cfg.Threads, cfg.CacheBytes = "", DataSpec{}, DataSpec{}, "", 0, 0
	settings, err := json.Marshal(cfg)
	if err != nil {
		return p.c.Agree(err, false)
	}
	h := sha256.New()
	for id := range t.train.Len() {
		e, _ := t.train.Example(id)
		fmt.Fprintf(h, "%s %s %d %d\n", filepath.Base(e.Image), filepath.Base(e.Mask), e.Width, e.Height)
	}
	sum := func(b []byte) uint64 { s := sha256.Sum256(b); return binary.LittleEndian.Uint64(s[:]) }
	// Data first: the settings include what setup derived from the data.
	mine := []uint64{binary.LittleEndian.Uint64(h.Sum(nil)), sum([]byte(t.baseDigest)), sum(settings)}
	all, err := p.c.AllgatherUint64(mine)
	if err != nil {
		return err
	}
	for r := 1; r < p.size(); r++ {
		for k, what := range []string{"training data (file names or image sizes)", "base model (SHA-256)", "settings"} {
			if all[3*r+k] != all[k] {
				return &mpi.Failure{Err: &RankMismatchError{Rank: r, What: what},
					Rank: p.c.Rank(), Size: p.size(), Report: p.writes(), Everywhere: true}
			}
		}
	}
	return nil
}
