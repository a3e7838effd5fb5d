//go:build !mpi

package mpi

import (
	"strings"
	"testing"
)

// A binary without MPI that mpirun starts as one of several refuses to
// train alone, and says which binary to launch.
func TestInitWithoutMPIRefusesALaunch(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	_, err := Init()
	if err == nil || !strings.Contains(err.Error(), "rank 1 of 2") || !strings.Contains(err.Error(), "make build-mpi") {
		t.Fatalf("Init under mpirun without MPI: %v", err)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	if c, err := Init(); err != nil || c.Size() != 1 {
		t.Fatalf("mpirun -np 1: %v", err)
	}
}
