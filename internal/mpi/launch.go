package mpi

import (
	"os"
	"strconv"
)

// Launch is what the environment says about how this process was started.
type Launch struct {
	// Launcher is "mpirun" (OpenMPI, also under Kubeflow's MPIJob),
	// "hydra" (MPICH and Intel MPI's mpiexec), "pmix" (a PMIx launcher:
	// srun --mpi=pmix, prterun) or "srun"; "" when no launcher started it.
	Launcher string
	// Rank and Size as the launcher announced them; Size 0 when it did not
	// say (PMIx tells the library, not the environment).
	Rank, Size int
}

// Detect reads the launcher's variables from the environment.
func Detect() Launch { return detect(os.Getenv) }

func detect(env func(string) string) Launch {
	num := func(name string) (int, bool) {
		v, err := strconv.Atoi(env(name))
		return v, err == nil
	}
	if s, ok := num("OMPI_COMM_WORLD_SIZE"); ok {
		r, _ := num("OMPI_COMM_WORLD_RANK")
		return Launch{Launcher: "mpirun", Rank: r, Size: s}
	}
	if s, ok := num("PMI_SIZE"); ok {
		r, _ := num("PMI_RANK")
		return Launch{Launcher: "hydra", Rank: r, Size: s}
	}
	// srun sets SLURM_STEP_NUM_TASKS for the tasks of a job step (not in
	// the batch script itself); with --mpi=pmix the library joins them.
	if s, ok := num("SLURM_STEP_NUM_TASKS"); ok && env("SLURM_STEP_ID") != "" {
		r, _ := num("SLURM_PROCID")
		l := Launch{Launcher: "srun", Rank: r, Size: s}
		if env("PMIX_RANK") != "" {
			l.Launcher = "pmix"
		}
		return l
	}
	if r, ok := num("PMIX_RANK"); ok {
		return Launch{Launcher: "pmix", Rank: r}
	}
	return Launch{}
}

// Started says whether a launcher started this process as one of several
// (or of an unknown number).
func (l Launch) Started() bool { return l.Launcher != "" && l.Size != 1 }
