package mpi

import (
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
)

// InTurn runs f on one rank at a time, rank 0 first, agreeing on the
// outcome after each turn: every rank returns the first failure, and no
// rank runs f after one. For work that ranks sharing a machine must not
// do at once (filling a shared cache).
func (c *Comm) InTurn(f func() error) error {
	for turn := range c.Size() {
		var err error
		if turn == c.Rank() {
			err = f()
		}
		if err := c.Agree(err, false); err != nil {
			return err
		}
	}
	return nil
}

// PinGPU gives each rank on a machine with several ranks a GPU of its own
// (CUDA_VISIBLE_DEVICES set to its local rank), unless the run is on the
// CPU or the launcher or the scheduler (Slurm's --gpus-per-task, a pod's
// GPU) already chose the devices. It reports whether it pinned.
func (c *Comm) PinGPU(cpuOnly bool) bool {
	if c.LocalSize() < 2 || cpuOnly || os.Getenv("CUDA_VISIBLE_DEVICES") != "" {
		return false
	}
	os.Setenv("CUDA_VISIBLE_DEVICES", strconv.Itoa(c.LocalRank()))
	return true
}

// ThreadShare is the number of threads each rank on this machine should
// use so that together they use its cores once: the cores this process
// may run on where a launcher bound each rank to its own (mpirun's
// default for few ranks), else the machine's online cores divided among
// its ranks.
func (c *Comm) ThreadShare() int {
	mine, all := goruntime.NumCPU(), onlineCPUs()
	if all > 0 && mine >= all { // not bound: every rank sees every core
		return max(1, all/max(1, c.LocalSize()))
	}
	return mine
}

// onlineCPUs counts the machine's online CPUs (0 when unknown), whatever
// this process's affinity.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	return countCPUList(strings.TrimSpace(string(b)))
}

// countCPUList counts the CPUs of a list like "0-3,8,10-11"; 0 when it
// cannot be read.
func countCPUList(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
