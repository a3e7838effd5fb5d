// Package mpi is the communicator of segtune's data-parallel fine-tuning:
// the processes an MPI launcher (mpirun, srun, Kubeflow's MPIJob) started,
// joined through a small cgo layer over the MPI C library when segtune is
// built with -tags mpi (OpenMPI's pkg-config module ompi-c; another MPI
// with -tags 'mpi mpi_custom' and CGO_CFLAGS/CGO_LDFLAGS from its mpicc).
// Without the tag, or when no launcher started the process, the world is
// this one process and every collective is the identity; Local makes a
// world of goroutines in one process, for tests.
//
// Every method that exchanges data is a collective: all ranks call it, in
// the same order, with buffers of the same length. Calls are serialised
// (MPI_THREAD_SERIALIZED): one goroutine at a time.
package mpi

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
)

// transport is one way of exchanging data between the ranks.
type transport interface {
	rank() int
	size() int
	allreduceF32(buf []float32) error // element-wise sum, in place
	allreduceF64(buf []float64) error
	// allgatherU64 returns every rank's in, rank after rank, waiting
	// without spinning the CPU (for points where ranks may wait long).
	allgatherU64(in []uint64) ([]uint64, error)
	bcast(buf []byte, root int) error // root's buf into everyone's (same length)
	abort(code int)
	finalize() error
}

// Comm is a world of ranks training one model.
type Comm struct {
	t                    transport
	localSize, localRank int
	launcher             string
}

// Single returns the world of this process alone.
func Single() *Comm { return &Comm{t: single{}, localSize: 1} }

// Rank is this process's rank, 0 ≤ Rank < Size.
func (c *Comm) Rank() int { return c.t.rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.t.size() }

// LocalSize is the number of ranks on this machine (they share its cores).
func (c *Comm) LocalSize() int { return c.localSize }

// LocalRank is this rank's index among the ranks on its machine.
func (c *Comm) LocalRank() int { return c.localRank }

// Launcher names what started the ranks ("mpirun", "srun", …; "" alone).
func (c *Comm) Launcher() string { return c.launcher }

// Parallel reports whether there is more than one rank.
func (c *Comm) Parallel() bool { return c.Size() > 1 }

// AllreduceFloat32 replaces buf on every rank by the element-wise sum of
// every rank's buf. The summation order is the MPI library's; every rank
// receives the same sum.
func (c *Comm) AllreduceFloat32(buf []float32) error {
	if c.Size() == 1 {
		return nil
	}
	return c.t.allreduceF32(buf)
}

// AllreduceFloat64 is AllreduceFloat32 in float64.
func (c *Comm) AllreduceFloat64(buf []float64) error {
	if c.Size() == 1 {
		return nil
	}
	return c.t.allreduceF64(buf)
}

// AllgatherUint64 returns the concatenation of every rank's in (equal
// lengths), in rank order. Waiting ranks sleep instead of spinning, so a
// rank that works alone meanwhile (rank 0 validating) keeps the cores.
func (c *Comm) AllgatherUint64(in []uint64) ([]uint64, error) {
	if c.Size() == 1 {
		return append([]uint64(nil), in...), nil
	}
	return c.t.allgatherU64(in)
}

// Broadcast returns root's data on every rank (data is ignored elsewhere).
func (c *Comm) Broadcast(data []byte, root int) ([]byte, error) {
	if c.Size() == 1 {
		return data, nil
	}
	n := []uint64{0}
	if c.Rank() == root {
		n[0] = uint64(len(data))
	}
	b := make([]byte, 8)
	if c.Rank() == root {
		putU64(b, n[0])
	}
	if err := c.t.bcast(b, root); err != nil {
		return nil, err
	}
	size := getU64(b)
	if c.Rank() != root {
		data = make([]byte, size)
	}
	if size == 0 {
		return data, nil
	}
	if err := c.t.bcast(data, root); err != nil {
		return nil, err
	}
	return data, nil
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getU64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// Abort ends every rank of the job with code (MPI_Abort): for a failure
// the other ranks do not know about, which would otherwise leave them
// waiting in their next collective. It does not return on an MPI world;
// alone, it returns and the caller exits.
func (c *Comm) Abort(code int) { c.t.abort(code) }

// Finalize leaves the world (MPI_Finalize); every rank calls it once, last.
func (c *Comm) Finalize() error { return c.t.finalize() }

// Outcome codes exchanged by Agree.
const (
	outcomeOK uint64 = iota
	outcomeStop
	outcomeFailed
)

// Agree is a collective by which the ranks learn each other's outcome of a
// stage: every rank passes its own error (nil for success) and whether it
// was asked to stop (an interrupt) instead. It returns nil when every rank
// succeeded and none stopped; otherwise a *Failure, the same verdict on
// every rank.
func (c *Comm) Agree(err error, stop bool) error {
	if c.Size() == 1 {
		if err != nil {
			return err
		}
		if stop {
			return &Failure{Stopped: true, Report: true, Size: 1, StopRanks: []int{0}}
		}
		return nil
	}
	code, msg := outcomeOK, uint64(0)
	switch {
	case err != nil:
		code, msg = outcomeFailed, hashString(err.Error())
	case stop:
		code = outcomeStop
	}
	all, gerr := c.AllgatherUint64([]uint64{code, msg})
	if gerr != nil {
		return gerr
	}
	f := &Failure{Err: err, Rank: c.Rank(), Size: c.Size()}
	same := 0
	first := -1
	for r := 0; r < c.Size(); r++ {
		switch all[2*r] {
		case outcomeFailed:
			f.Ranks = append(f.Ranks, r)
			if err != nil && all[2*r+1] == msg {
				same++
				if first < 0 {
					first = r
				}
			}
		case outcomeStop:
			f.StopRanks = append(f.StopRanks, r)
		}
	}
	if len(f.Ranks) == 0 && len(f.StopRanks) == 0 {
		return nil
	}
	f.Stopped = len(f.Ranks) == 0
	// A failing rank reports its error unless a lower rank failed with
	// the same message; a stop is reported by rank 0.
	f.Report = (err != nil && first == c.Rank()) || (f.Stopped && c.Rank() == 0)
	f.Everywhere = err != nil && same == c.Size()
	return f
}

// Failure is Agree's verdict when a rank failed or stopped.
type Failure struct {
	// Err is this rank's own error; nil when only other ranks failed.
	Err error
	// Ranks failed; StopRanks stopped (when none failed, Stopped is set).
	Ranks, StopRanks []int
	Stopped          bool
	Rank, Size       int
	// Report says this rank should print the failure: it is the lowest
	// rank that failed with its message (or rank 0, for a stop).
	Report bool
	// Everywhere says every rank failed with this message.
	Everywhere bool
}

func (f *Failure) Error() string {
	switch {
	case f.Err != nil && (f.Everywhere || f.Size == 1):
		return f.Err.Error()
	case f.Err != nil:
		return fmt.Sprintf("rank %d of %d: %v", f.Rank, f.Size, f.Err)
	case f.Stopped:
		return fmt.Sprintf("stopped on rank %s of %d", rankList(f.StopRanks), f.Size)
	default:
		return fmt.Sprintf("failed on rank %s of %d (the error is on that rank's standard error)", rankList(f.Ranks), f.Size)
	}
}

// Unwrap returns this rank's own error.
func (f *Failure) Unwrap() error { return f.Err }

func rankList(rs []int) string {
	sort.Ints(rs)
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ", ")
}

// Reported says whether err should be printed by this rank: every error but
// a Failure that another rank reports.
func Reported(err error) bool {
	var f *Failure
	if errors.As(err, &f) {
		return f.Report
	}
	return true
}

// Agreed says whether err is a verdict every rank reached (Agree's): the
// ranks can leave the world in order instead of aborting it.
func Agreed(err error) bool {
	var f *Failure
	return errors.As(err, &f)
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// single is the world of one process.
type single struct{}

func (single) rank() int                                  { return 0 }
func (single) size() int                                  { return 1 }
func (single) allreduceF32([]float32) error               { return nil }
func (single) allreduceF64([]float64) error               { return nil }
func (single) allgatherU64(in []uint64) ([]uint64, error) { return append([]uint64(nil), in...), nil }
func (single) bcast([]byte, int) error                    { return nil }
func (single) abort(int)                                  {}
func (single) finalize() error                            { return nil }
