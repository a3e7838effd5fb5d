//go:build !mpi

package mpi

import "fmt"

// Built says whether this binary was built with MPI (-tags mpi).
const Built = false

// Init returns the world this process belongs to. Built without MPI, that
// is this process alone; a process a launcher started as one of several is
// refused, since it could not reach the others and would train alone.
func Init() (*Comm, error) {
	if l := Detect(); l.Started() {
		of := "several"
		if l.Size > 1 {
			of = fmt.Sprint(l.Size)
		}
		return nil, fmt.Errorf("%s started this process as rank %d of %s, but this segtune was built without MPI and cannot join the others: "+
			"launch bin/segtune-mpi instead (make build-mpi; it needs libopenmpi-dev)", l.Launcher, l.Rank, of)
	}
	return Single(), nil
}
