package mpi

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// run calls f on every rank of a Local world of n, concurrently, and
// returns their results in rank order.
func run[T any](n int, f func(c *Comm) T) []T {
	cs := Local(n)
	out := make([]T, n)
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r] = f(c)
		}()
	}
	wg.Wait()
	return out
}

func TestLocalCollectives(t *testing.T) {
	type res struct {
		f32    []float32
		f64    []float64
		gather []uint64
		bcast  []byte
		err    error
	}
	got := run(3, func(c *Comm) res {
		r := c.Rank()
		var o res
		o.f32 = []float32{float32(r), 1, float32(10 * r)}
		if o.err = c.AllreduceFloat32(o.f32); o.err != nil {
			return o
		}
		o.f64 = []float64{float64(r) / 4, 1e300}
		if o.err = c.AllreduceFloat64(o.f64); o.err != nil {
			return o
		}
		if o.gather, o.err = c.AllgatherUint64([]uint64{uint64(r), uint64(100 + r)}); o.err != nil {
			return o
		}
		var data []byte
		if r == 1 {
			data = []byte("from rank one")
		}
		o.bcast, o.err = c.Broadcast(data, 1)
		return o
	})
	for r, o := range got {
		if o.err != nil {
			t.Fatalf("rank %d: %v", r, o.err)
		}
		if fmt.Sprint(o.f32) != "[3 3 30]" || fmt.Sprint(o.f64) != "[0.75 3e+300]" {
			t.Errorf("rank %d: sums %v %v", r, o.f32, o.f64)
		}
		if fmt.Sprint(o.gather) != "[0 100 1 101 2 102]" {
			t.Errorf("rank %d: gathered %v, want rank order", r, o.gather)
		}
		if string(o.bcast) != "from rank one" {
			t.Errorf("rank %d: broadcast %q", r, o.bcast)
		}
	}
}

func TestSingleIsIdentity(t *testing.T) {
	c := Single()
	buf := []float32{1.5, -2}
	if err := c.AllreduceFloat32(buf); err != nil || buf[0] != 1.5 || buf[1] != -2 || c.Parallel() {
		t.Fatalf("single world changed %v (%v)", buf, err)
	}
	if b, err := c.Broadcast([]byte("x"), 0); err != nil || string(b) != "x" {
		t.Fatalf("broadcast %q %v", b, err)
	}
	boom := errors.New("boom")
	if err := c.Agree(boom, false); err != boom {
		t.Fatalf("Agree alone returned %v, want the error itself", err)
	}
	var f *Failure
	if err := c.Agree(nil, true); !errors.As(err, &f) || !f.Stopped {
		t.Fatalf("Agree(stop) alone: %v", err)
	}
}

func TestAgree(t *testing.T) {
	// Everyone fine.
	for r, err := range run(3, func(c *Comm) error { return c.Agree(nil, false) }) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// Rank 1 fails alone: it reports, naming itself; the others learn of
	// it without reporting.
	errs := run(3, func(c *Comm) error {
		var err error
		if c.Rank() == 1 {
			err = errors.New("cannot read data/x.png")
		}
		return c.Agree(err, false)
	})
	for r, err := range errs {
		var f *Failure
		if !errors.As(err, &f) || len(f.Ranks) != 1 || f.Ranks[0] != 1 || f.Stopped || !Agreed(err) {
			t.Fatalf("rank %d: %#v", r, err)
		}
		if Reported(err) != (r == 1) {
			t.Errorf("rank %d reports: %v", r, Reported(err))
		}
	}
	if msg := errs[1].Error(); msg != "rank 1 of 3: cannot read data/x.png" {
		t.Errorf("failing rank's message %q", msg)
	}
	if msg := errs[0].Error(); !strings.Contains(msg, "rank 1 of 3") {
		t.Errorf("other rank's message %q", msg)
	}
	// Every rank fails the same way (a bad flag): one report, no rank prefix.
	errs = run(3, func(c *Comm) error { return c.Agree(errors.New("--crop: bad size"), false) })
	reports := 0
	for _, err := range errs {
		if Reported(err) {
			reports++
			if err.Error() != "--crop: bad size" {
				t.Errorf("message %q", err)
			}
		}
	}
	if reports != 1 || !Reported(errs[0]) {
		t.Errorf("%d ranks report the same error, want rank 0 alone", reports)
	}
	// A stop on rank 2 (Ctrl-C seen there first) stops everyone.
	errs = run(3, func(c *Comm) error { return c.Agree(nil, c.Rank() == 2) })
	for r, err := range errs {
		var f *Failure
		if !errors.As(err, &f) || !f.Stopped || Reported(err) != (r == 0) {
			t.Fatalf("rank %d: %#v", r, err)
		}
	}
}

// A rank that aborts releases the others from the collective they wait in.
func TestLocalAbortReleasesWaiters(t *testing.T) {
	done := make(chan []error)
	go func() {
		done <- run(3, func(c *Comm) error {
			if c.Rank() == 2 {
				time.Sleep(10 * time.Millisecond)
				c.Abort(1)
				return nil
			}
			return c.AllreduceFloat32([]float32{1})
		})
	}()
	select {
	case errs := <-done:
		if !errors.Is(errs[0], ErrAborted) || !errors.Is(errs[1], ErrAborted) {
			t.Fatalf("waiters returned %v", errs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ranks still waiting after an abort")
	}
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want Launch
		on   bool
	}{
		{nil, Launch{}, false},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3", "PMIX_RANK": "3"}, Launch{"mpirun", 3, 4}, true},
		{map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, Launch{"mpirun", 0, 1}, false},
		{map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}, Launch{"hydra", 1, 2}, true},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5"}, Launch{"srun", 5, 8}, true},
		{map[string]string{"SLURM_STEP_NUM_TASKS": "8", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "PMIX_RANK": "5"}, Launch{"pmix", 5, 8}, true},
		// The batch script itself: Slurm's job variables, no step.
		{map[string]string{"SLURM_NTASKS": "8", "SLURM_JOB_ID": "17"}, Launch{}, false},
		{map[string]string{"PMIX_RANK": "0"}, Launch{"pmix", 0, 0}, true},
	} {
		got := detect(func(k string) string { return c.env[k] })
		if got != c.want || got.Started() != c.on {
			t.Errorf("%v: %+v (started %v), want %+v (%v)", c.env, got, got.Started(), c.want, c.on)
		}
	}
}
