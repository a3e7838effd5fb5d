// Package dataparallel is a fine-tuning run's side of its data-parallel
// ranks (MPI processes, internal/mpi): which rank writes the run's files,
// the outcome of a stage agreed by every rank, rank 0's checkpoint
// broadcast, each rank's share of a step's batch and of its loss, the
// step's one Allreduce of gradients, scores and failures, and the
// comparison of the ranks' replicas. With a world of one every method is
// the identity. finetune's trainer drives it (finetune.TrainParallel).
package dataparallel

import (
	"bytes"
	"fmt"
	"time"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/internal/mpi"
)

// Group is a run's view of its ranks and the state of its step's
// collectives.
type Group struct {
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

// New returns the group of c's ranks; nil is a world of one.
func New(c *mpi.Comm) *Group {
	if c == nil {
		c = mpi.Single()
	}
	return &Group{c: c}
}

// Comm is the ranks' communicator.
func (p *Group) Comm() *mpi.Comm { return p.c }

// Size is the number of ranks.
func (p *Group) Size() int { return p.c.Size() }

// Rank is this rank's number.
func (p *Group) Rank() int { return p.c.Rank() }

// Parallel says whether there is more than one rank.
func (p *Group) Parallel() bool { return p.c.Size() > 1 }

// Writes says whether this rank writes the run's files (rank 0).
func (p *Group) Writes() bool { return p.c.Rank() == 0 }

// Agree turns a stage's outcome into every rank's verdict (see mpi.Agree).
func (p *Group) Agree(err error) error {
	if !p.Parallel() {
		return err
	}
	return p.c.Agree(err, false)
}

// ShareCheckpoint hands rank 0's outcome of opening the run's folder to
// every rank: its failure, or the checkpoint to resume from (broadcast, so
// that the other ranks need not see rank 0's folder).
func (p *Group) ShareCheckpoint(ck *checkpoint.Checkpoint, err error) (*checkpoint.Checkpoint, error) {
	if !p.Parallel() {
		return ck, err
	}
	var buf bytes.Buffer
	if err == nil && p.Writes() && ck != nil {
		err = checkpoint.Write(&buf, ck)
	}
	if err := p.c.Agree(err, false); err != nil {
		return nil, err
	}
	b, err := p.c.Broadcast(buf.Bytes(), 0)
	if err != nil {
		return nil, err
	}
	if p.Writes() || len(b) == 0 {
		return ck, nil
	}
	return checkpoint.Read(bytes.NewReader(b), int64(len(b)))
}

// NewLossScale returns the value to bind to the training graph's
// loss-scale input, 1 until Weigh sets it each step to this rank's share
// of the batch's labelled pixels.
func (p *Group) NewLossScale() []float32 {
	p.scale = []float32{1}
	return p.scale
}

// Weigh sums, over the ranks, the step's labelled pixels (labelled, this
// rank's) and whether a rank is to stop (stop, this rank's). It returns
// true when the ranks stop at this step, on every rank at once; otherwise
// the loss scale (NewLossScale) holds this rank's share of the batch's
// labelled pixels.
func (p *Group) Weigh(stop bool, labelled float64) (stopAll bool, err error) {
	p.counts = [2]float64{labelled, 0}
	if stop {
		p.counts = [2]float64{0, 1}
	}
	mine := p.counts[0]
	t0 := time.Now()
	err = p.c.AllreduceFloat64(p.counts[:])
	p.wait = time.Since(t0)
	if err != nil {
		return false, err
	}
	if p.counts[1] > 0 {
		return true, nil
	}
	p.scale[0] = 0
	if p.counts[0] > 0 {
		p.scale[0] = float32(mine / p.counts[0])
	}
	return false, nil
}

// ShareOf returns this rank's rows of the step's dual.Batch b (b itself
// alone): its examples' coefficients and the slots for their scores.
func (p *Group) ShareOf(b *dual.Batch, n int) *dual.Batch {
	if !p.Parallel() {
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

// Reduce is the step's one collective: it sums every rank's gradients
// (params' Grad, replaced by the sums), gathers the batch's scores into
// scores (this rank's rows in share.Scores) and the loss, and tells every
// rank which ranks' forward pass failed (stepErr, this rank's). It returns
// the whole batch's loss, or the failure, the same on every rank.
func (p *Group) Reduce(params []*optim.Param, loss float64, stepErr error, scores []float64, share *dual.Batch) (float64, error) {
	n := len(scores) + 1 + p.Size()
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
			stepErr = fmt.Errorf("the loss is not finite on rank %v of %d", failed, p.Size())
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

// StepStats adds the step's time in collectives, "allreduce_ms", to a
// step record's extra fields (nothing alone).
func (p *Group) StepStats(extra map[string]float64) map[string]float64 {
	if !p.Parallel() {
		return extra
	}
	if extra == nil {
		extra = map[string]float64{}
	}
	extra["allreduce_ms"] = p.wait.Seconds() * 1e3
	return extra
}

// Differs gathers every rank's fingerprints mine (the same number on
// each) and returns the first rank after 0 whose k-th fingerprint differs
// from rank 0's, or rank 0 when they all agree.
func (p *Group) Differs(mine []uint64) (rank, k int, err error) {
	all, err := p.c.AllgatherUint64(mine)
	if err != nil {
		return 0, 0, err
	}
	n := len(mine)
	for r := 1; r < p.Size(); r++ {
		for k := range n {
			if all[n*r+k] != all[k] {
				return r, k, nil
			}
		}
	}
	return 0, 0, nil
}

// Verdict marks an error that every rank met at the same step (a failed
// forward pass on some rank, told to all by reduce, or a failure of the
// replicated dual state) as every rank's, reported by rank 0, which knows
// the checkpoint to go back to.
func (p *Group) Verdict(err error) error {
	if !p.Parallel() || err == nil {
		return err
	}
	return &mpi.Failure{Err: err, Rank: p.c.Rank(), Size: p.Size(), Report: p.Writes(), Everywhere: true}
}
