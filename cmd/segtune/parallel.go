package main

import (
	"errors"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/dataparallel"
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
// run (dataparallel.Leave).
func leaveRanks(w *mpi.Comm, err error) error {
	return dataparallel.Leave(w, err, errors.Is(err, finetune.ErrInterrupted), os.Stderr, withFlagNames)
}

// rankThreads gives each rank its share of this machine's cores when the
// user did not set --threads (dataparallel.ThreadShare).
func rankThreads(c *cli.Context, w *mpi.Comm, cfg *finetune.Config) {
	threads, share := dataparallel.ThreadShare(w, c.IsSet("threads"))
	if !share {
		return
	}
	cfg.Threads = threads
	cfg.Explicit = append(cfg.Explicit, "threads")
	notef(c, "segtune: %d processes share this machine: --threads %d each (set --threads to choose)", w.LocalSize(), threads)
}
