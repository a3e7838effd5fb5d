package finetune

import (
	"errors"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/memlimit"
)

// withAddressSpace makes memlimit read limit as RLIMIT_AS (0: none) and
// the memory limit large, for the test's duration.
func withAddressSpace(t *testing.T, limit uint64) {
	t.Helper()
	old := memlimit.System.AddressSpace
	memlimit.System.AddressSpace = func() (uint64, error) {
		if limit == 0 {
			return ^uint64(0), nil
		}
		return limit, nil
	}
	memlimit.Set(64 << 30)
	t.Cleanup(func() { memlimit.System.AddressSpace = old; memlimit.Set(0) })
}

// Under an address-space limit, a fine-tune that would map more than it
// (threads' stacks and arenas on top of its memory) is refused before any
// work, naming the limit and what to lower; one that fits, or any run
// without such a limit, is not.
func TestCheckMemoryAddressSpace(t *testing.T) {
	cfg := func(batch, threads int) *Config {
		return &Config{Batch: batch, Height: 320, Width: 320, Threads: threads, Device: "cpu"}
	}
	withAddressSpace(t, 4_000_000_000)
	// 16 threads and batches of 2: killed by Go's runtime at 3.9 GB before.
	err := cfg(2, 16).checkMemory()
	if !errors.Is(err, memlimit.ErrTooLarge) {
		t.Fatalf("batch 2 on 16 threads under a 4 GB RLIMIT_AS: %v", err)
	}
	var tl *memlimit.TooLargeError
	if !errors.As(err, &tl) || !tl.AddressSpace || tl.Fix != FixAddressSpace {
		t.Fatalf("refusal %#v: want an address-space TooLargeError with FixAddressSpace", err)
	}
	for _, want := range []string{"address-space limit of 3.7 GiB", "RLIMIT_AS", "lower batch, crop or threads", "16 threads"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not say %q", err, want)
		}
	}
	// Batches of 2 on 2 threads peaked at 3.6 GB and fit.
	if err := cfg(2, 2).checkMemory(); err != nil {
		t.Fatalf("batch 2 on 2 threads: %v", err)
	}
	withAddressSpace(t, 0)
	if err := cfg(2, 64).checkMemory(); err != nil {
		t.Fatalf("no address-space limit: %v", err)
	}
	// A tiny limit refuses even one image on one thread.
	withAddressSpace(t, 1<<30)
	if err := cfg(1, 1).checkMemory(); !errors.Is(err, memlimit.ErrTooLarge) {
		t.Fatalf("1 GiB RLIMIT_AS: %v", err)
	}
	// With glibc's malloc arenas capped (as every command does under an
	// RLIMIT_AS) a thread maps only its stack: batches of 2 on 16 threads
	// fit 4 GB (3.1 GB measured); batches of 3 do not.
	withAddressSpace(t, 4_000_000_000)
	memlimit.FitAddressSpace()
	if memlimit.ThreadAddressSpace() != 72<<20 { // capped: glibc took it
		if err := cfg(2, 16).checkMemory(); err != nil {
			t.Fatalf("arenas capped, batch 2 on 16 threads: %v", err)
		}
		if err := cfg(3, 16).checkMemory(); !errors.Is(err, memlimit.ErrTooLarge) {
			t.Fatalf("arenas capped, batch 3 on 16 threads: %v", err)
		}
	}
}
