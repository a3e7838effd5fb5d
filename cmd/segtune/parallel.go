package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/mpi"
)

// joinRanks joins the MPI world a launcher started this process in (alone
// without one). Ranks other than 0 go quiet: rank 0 prints the run.
func joinRanks(c *cli.Context, device string) (*mpi.Comm, error) {
	w, err := mpi.Init()
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	if w.Rank() != 0 {
		if err := c.Set("quiet", "true"); err != nil {
			return w, err
		}
	}
	w.PinGPU(device == "cpu")
	return w, nil
}

// leaveRanks ends this rank's part in the job with err, the outcome of its
// run. An outcome every rank knows (success, an interrupt, an agreed
// failure) leaves MPI in order, reported by one rank; an error of this rank
// alone is printed with its rank and ends the whole job (MPI_Abort), since
// the other ranks would wait for it in their next collective.
func leaveRanks(w *mpi.Comm, err error) error {
	interrupted := errors.Is(err, finetune.ErrInterrupted)
	if w.Size() == 1 { // no MPI, or mpirun -np 1
		if w.Launcher() != "" {
			if ferr := w.Finalize(); ferr != nil && err == nil {
				err = ferr
			}
		}
		if interrupted {
			return cli.Exit("interrupted; checkpoint saved", 130)
		}
		return err
	}
	code := 1
	var exit cli.ExitCoder
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	if err != nil && !interrupted && !mpi.Agreed(err) {
		fmt.Fprintf(os.Stderr, "segtune: rank %d of %d: %v\n", w.Rank(), w.Size(), withFlagNames(err))
		w.Abort(code)
		return cli.Exit("", code) // a world of one returns from Abort
	}
	if ferr := w.Finalize(); ferr != nil && err == nil {
		return ferr
	}
	switch {
	case err == nil:
		return nil
	case interrupted && w.Rank() == 0:
		return cli.Exit("interrupted; checkpoint saved", 130)
	case interrupted:
		return cli.Exit("", 130)
	case !mpi.Reported(err):
		return cli.Exit("", code)
	}
	return err
}

// rankThreads gives each rank its share of this machine's cores when the
// user did not set --threads: ONNX Runtime would otherwise start a thread
// per core in every rank. A launcher that bound each rank to its own cores
// (mpirun's default for few ranks) already shared them out.
func rankThreads(c *cli.Context, w *mpi.Comm, cfg *finetune.Config) {
	if c.IsSet("threads") || w.LocalSize() < 2 {
		return
	}
	threads := w.ThreadShare()
	cfg.Threads = threads
	cfg.Explicit = append(cfg.Explicit, "threads")
	notef(c, "segtune: %d processes share this machine: --threads %d each (set --threads to choose)", w.LocalSize(), threads)
}
