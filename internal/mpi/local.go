package mpi

import (
	"errors"
	"fmt"
	"sync"
)

// ErrAborted is what a collective of a Local world returns once a rank
// called Abort.
var ErrAborted = errors.New("mpi: the world was aborted")

// Local returns a world of n ranks that live in this process (one
// goroutine each, Comm i being rank i): the same collectives as MPI, sums
// taken in rank order. For tests of code that runs on several ranks.
func Local(n int) []*Comm {
	if n < 1 {
		panic(fmt.Sprintf("mpi: Local(%d)", n))
	}
	w := &localWorld{n: n, cur: make([]any, n)}
	w.cond = sync.NewCond(&w.mu)
	cs := make([]*Comm, n)
	for r := range cs {
		cs[r] = &Comm{t: &localRank{w: w, r: r}, localSize: n, localRank: r, launcher: "local"}
	}
	return cs
}

type localWorld struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	cur     []any // this round's contributions
	arrived int
	round   int
	aborted bool
}

// exchange deposits v for this round and returns every rank's value once
// all have arrived. Each round has its own slice, so no rank overwrites a
// value another has yet to read.
func (w *localWorld) exchange(rank int, v any) ([]any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		return nil, ErrAborted
	}
	mine, round := w.cur, w.round
	mine[rank] = v
	w.arrived++
	if w.arrived == w.n {
		w.cur, w.arrived = make([]any, w.n), 0
		w.round++
		w.cond.Broadcast()
		return mine, nil
	}
	for w.round == round && !w.aborted {
		w.cond.Wait()
	}
	if w.round == round {
		return nil, ErrAborted
	}
	return mine, nil
}

type localRank struct {
	w *localWorld
	r int
}

func (l *localRank) rank() int { return l.r }
func (l *localRank) size() int { return l.w.n }

func (l *localRank) allreduceF32(buf []float32) error {
	all, err := l.w.exchange(l.r, append([]float32(nil), buf...))
	if err != nil {
		return err
	}
	for i := range buf {
		var s float32
		for _, v := range all {
			s += v.([]float32)[i]
		}
		buf[i] = s
	}
	return nil
}

func (l *localRank) allreduceF64(buf []float64) error {
	all, err := l.w.exchange(l.r, append([]float64(nil), buf...))
	if err != nil {
		return err
	}
	for i := range buf {
		var s float64
		for _, v := range all {
			s += v.([]float64)[i]
		}
		buf[i] = s
	}
	return nil
}

func (l *localRank) allgatherU64(in []uint64) ([]uint64, error) {
	all, err := l.w.exchange(l.r, append([]uint64(nil), in...))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, v := range all {
		out = append(out, v.([]uint64)...)
	}
	return out, nil
}

func (l *localRank) bcast(buf []byte, root int) error {
	var v []byte
	if l.r == root {
		v = append([]byte(nil), buf...)
	}
	all, err := l.w.exchange(l.r, v)
	if err != nil {
		return err
	}
	copy(buf, all[root].([]byte))
	return nil
}

func (l *localRank) abort(int) {
	l.w.mu.Lock()
	l.w.aborted = true
	l.w.cond.Broadcast()
	l.w.mu.Unlock()
}

func (l *localRank) finalize() error { return nil }
