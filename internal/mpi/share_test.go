package mpi

import (
	"errors"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
)

// Ranks take their turns one after another, in rank order; a failure on
// one rank is every rank's, and later ranks do not take theirs.
func TestInTurn(t *testing.T) {
	var mu sync.Mutex
	var order []int
	errs := run(3, func(c *Comm) error {
		return c.InTurn(func() error {
			mu.Lock()
			order = append(order, c.Rank())
			mu.Unlock()
			return nil
		})
	})
	if !slices.Equal(order, []int{0, 1, 2}) || errors.Join(errs...) != nil {
		t.Fatalf("turns %v, errors %v", order, errs)
	}
	order = nil
	errs = run(3, func(c *Comm) error {
		return c.InTurn(func() error {
			mu.Lock()
			order = append(order, c.Rank())
			mu.Unlock()
			if c.Rank() == 1 {
				return errors.New("cache full")
			}
			return nil
		})
	})
	if !slices.Equal(order, []int{0, 1}) {
		t.Errorf("turns after a failure: %v", order)
	}
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d did not hear of rank 1's failure", r)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-3": 4, "0-3,8,10-11": 7, "": 0, "3-1": 0, "a-b": 0, "0-": 0} {
		if got := countCPUList(in); got != want {
			t.Errorf("countCPUList(%q) = %d, want %d", in, got, want)
		}
	}
}

// A world of one gets every core it may run on.
func TestThreadShareAlone(t *testing.T) {
	if n := Single().ThreadShare(); n != goruntime.NumCPU() {
		t.Errorf("ThreadShare() = %d, want the %d cores this process may use", n, goruntime.NumCPU())
	}
}

func TestPinGPU(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	ranks := Local(2)
	if Single().PinGPU(false) || os.Getenv("CUDA_VISIBLE_DEVICES") != "" {
		t.Fatal("a process alone pinned a GPU")
	}
	if ranks[1].PinGPU(true) || os.Getenv("CUDA_VISIBLE_DEVICES") != "" {
		t.Fatal("a CPU run pinned a GPU")
	}
	if !ranks[1].PinGPU(false) || os.Getenv("CUDA_VISIBLE_DEVICES") != "1" {
		t.Fatalf("rank 1 of 2 on a machine: CUDA_VISIBLE_DEVICES %q, want 1", os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	if ranks[0].PinGPU(false) || os.Getenv("CUDA_VISIBLE_DEVICES") != "1" {
		t.Fatal("a choice already made was overridden")
	}
}
