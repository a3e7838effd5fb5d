package dataparallel

import (
	"errors"
	"fmt"
	"io"

	"github.com/segtune/segtune/internal/mpi"
)

// ExitError ends the process with Code, printing Msg unless empty; it is
// an exit coder to the CLI (ExitCode), which prints and exits.
type ExitError struct {
	Msg  string
	Code int
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode is the process's exit status.
func (e *ExitError) ExitCode() int { return e.Code }

// interruptedExit is a run stopped by a signal with its checkpoint saved.
const interruptedExit = 130

// Leave ends this rank's part in the job with err, the outcome of its run
// (interrupted: a signal stopped it). An outcome every rank knows
// (success, an interrupt, an agreed failure) leaves MPI in order, reported
// by one rank; an error of this rank alone is written to stderr with its
// rank (as describe words it) and ends the whole job (MPI_Abort), since
// the other ranks would wait for it in their next collective.
func Leave(w *mpi.Comm, err error, interrupted bool, stderr io.Writer, describe func(error) error) error {
	if w.Size() == 1 { // no MPI, or mpirun -np 1
		if w.Launcher() != "" {
			if ferr := w.Finalize(); ferr != nil && err == nil {
				err = ferr
			}
		}
		if interrupted {
			return &ExitError{"interrupted; checkpoint saved", interruptedExit}
		}
		return err
	}
	code := 1
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	if err != nil && !interrupted && !mpi.Agreed(err) {
		fmt.Fprintf(stderr, "segtune: rank %d of %d: %v\n", w.Rank(), w.Size(), describe(err))
		w.Abort(code)
		return &ExitError{"", code} // a world of one returns from Abort
	}
	if ferr := w.Finalize(); ferr != nil && err == nil {
		return ferr
	}
	switch {
	case err == nil:
		return nil
	case interrupted && w.Rank() == 0:
		return &ExitError{"interrupted; checkpoint saved", interruptedExit}
	case interrupted:
		return &ExitError{"", interruptedExit}
	case !mpi.Reported(err):
		return &ExitError{"", code}
	}
	return err
}

// ThreadShare is each rank's share of this machine's cores, and whether
// to use it: where threadsSet (the user chose) or the rank is alone on its
// machine, ONNX Runtime's own choice stands; otherwise it would start a
// thread per core in every rank. A launcher that bound each rank to its
// own cores (mpirun's default for few ranks) already shared them out.
func ThreadShare(w *mpi.Comm, threadsSet bool) (int, bool) {
	if threadsSet || w.LocalSize() < 2 {
		return 0, false
	}
	return w.ThreadShare(), true
}
