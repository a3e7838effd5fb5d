package dataparallel

import "github.com/segtune/segtune/internal/mpi"

// Configure runs configure (reading a run's settings) on every rank of w
// and agrees on the outcome, so that every rank stops on one rank's bad
// setting. Ranks that fetch remote data into a cache take turns (inTurn):
// the ranks on one machine share its cache, and a fetch removes the files
// it did not fetch, another rank's half-written ones included.
func Configure[T any](w *mpi.Comm, inTurn bool, configure func() (T, error)) (T, error) {
	if !inTurn || !w.Parallel() {
		cfg, err := configure()
		return cfg, w.Agree(err, false)
	}
	var cfg T
	err := w.InTurn(func() error {
		var err error
		cfg, err = configure()
		return err
	})
	return cfg, err
}
