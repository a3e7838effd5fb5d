//go:build mpi && !mpi_custom

package mpi

// OpenMPI's flags come from its pkg-config module (Debian: libopenmpi-dev).
// For another MPI build with -tags 'mpi mpi_custom' and set CGO_CFLAGS and
// CGO_LDFLAGS to what its `mpicc -show` prints.

// #cgo pkg-config: ompi-c
import "C"
