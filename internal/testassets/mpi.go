package testassets

import (
	"os"
	"os/exec"
	"testing"
)

// RequireMPI returns the command that starts an MPI job on this machine —
// mpirun with the options a test needs (--oversubscribe: more ranks than
// cores; --allow-run-as-root as root) — after checking that OpenMPI's
// launcher and its development files (pkg-config ompi-c, which
// `go build -tags mpi` needs) are installed. Without them the test skips,
// or fails under $SEGTUNE_REQUIRE_ASSETS (`make mpi`,
// scripts/install-openmpi.sh, installs them).
func RequireMPI(tb testing.TB) []string {
	tb.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		SkipOrFail(tb, "OpenMPI not installed: no mpirun on PATH (make mpi, or apt-get install openmpi-bin libopenmpi-dev)")
	}
	if out, err := exec.Command("pkg-config", "--exists", "--print-errors", "ompi-c").CombinedOutput(); err != nil {
		SkipOrFail(tb, "OpenMPI's development files not installed: pkg-config ompi-c: %v %s (make mpi, or apt-get install libopenmpi-dev)", err, out)
	}
	cmd := []string{mpirun, "--oversubscribe"}
	if os.Geteuid() == 0 {
		cmd = append(cmd, "--allow-run-as-root")
	}
	return cmd
}
