//go:build mpi

package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/testassets"
)

// childEnv marks a test process that mpirun started; its value is the
// scenario to run.
const childEnv = "SEGTUNE_MPI_TEST_CHILD"

// mpirunSelf runs this test binary's TestMPIChild under mpirun with np
// ranks in scenario and returns its output and error.
func mpirunSelf(t *testing.T, np int, scenario string) (string, error) {
	t.Helper()
	launcher := testassets.RequireMPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(launcher[1:], "-np", fmt.Sprint(np), "-x", childEnv+"="+scenario, os.Args[0], "-test.run", "^TestMPIChild$", "-test.v")
	out, err := exec.CommandContext(ctx, launcher[0], args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun did not end within 2 minutes (a rank hangs):\n%s", out)
	}
	return string(out), err
}

// Three real MPI processes: sums, gathers in rank order, broadcasts and
// agreements, every rank checking its own results.
func TestMPICollectives(t *testing.T) {
	out, err := mpirunSelf(t, 3, "collectives")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := range 3 {
		if !strings.Contains(out, fmt.Sprintf("rank %d of 3: collectives ok", r)) {
			t.Errorf("rank %d did not report success:\n%s", r, out)
		}
	}
}

// A rank that aborts while the others wait in a collective ends the job
// with its code instead of leaving them waiting.
func TestMPIAbortEndsTheJob(t *testing.T) {
	start := time.Now()
	out, err := mpirunSelf(t, 2, "abort")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("mpirun after an abort: %v\n%s", err, out)
	}
	if !strings.Contains(out, "rank 1 aborts") {
		t.Fatalf("no abort seen:\n%s", out)
	}
	t.Logf("job ended %v after the start, exit %d", time.Since(start).Round(time.Millisecond), exit.ExitCode())
}

// TestMPIChild is the body that mpirun runs in every rank.
func TestMPIChild(t *testing.T) {
	scenario := os.Getenv(childEnv)
	if scenario == "" {
		t.Skip("run by TestMPICollectives and TestMPIAbortEndsTheJob under mpirun")
	}
	c, err := Init()
	if err != nil {
		t.Fatal(err)
	}
	r, n := c.Rank(), c.Size()
	if c.Launcher() != "mpirun" || c.LocalSize() != n || c.LocalRank() != r {
		t.Errorf("launcher %q, local rank %d of %d, rank %d of %d", c.Launcher(), c.LocalRank(), c.LocalSize(), r, n)
	}
	switch scenario {
	case "abort":
		if r == 1 {
			fmt.Println("rank 1 aborts")
			time.Sleep(200 * time.Millisecond)
			c.Abort(3)
		}
		c.AllreduceFloat32([]float32{1}) // never completes: rank 1 is gone
		t.Fatal("the collective returned after an abort")
	case "collectives":
		f32 := make([]float32, 1000)
		for i := range f32 {
			f32[i] = float32(r*i) + 0.5
		}
		if err := c.AllreduceFloat32(f32); err != nil {
			t.Fatal(err)
		}
		for i, v := range f32 {
			if want := float32(n*(n-1)/2*i) + 0.5*float32(n); v != want {
				t.Fatalf("float32 sum [%d] = %v, want %v", i, v, want)
			}
		}
		f64 := []float64{float64(r), 1}
		if err := c.AllreduceFloat64(f64); err != nil || f64[0] != float64(n*(n-1)/2) || f64[1] != float64(n) {
			t.Fatalf("float64 sums %v (%v)", f64, err)
		}
		g, err := c.AllgatherUint64([]uint64{uint64(r), 1 << 63})
		if err != nil {
			t.Fatal(err)
		}
		for k := range n {
			if g[2*k] != uint64(k) || g[2*k+1] != 1<<63 {
				t.Fatalf("gathered %v", g)
			}
		}
		var data []byte
		if r == n-1 {
			data = []byte(strings.Repeat("checkpoint", 100000))
		}
		got, err := c.Broadcast(data, n-1)
		if err != nil || len(got) != 1000000 || string(got[:10]) != "checkpoint" {
			t.Fatalf("broadcast of %d bytes (%v)", len(got), err)
		}
		if err := c.Agree(nil, false); err != nil {
			t.Fatal(err)
		}
		var bad error
		if r == 1 {
			bad = errors.New("disk full")
		}
		err = c.Agree(bad, false)
		var f *Failure
		if !errors.As(err, &f) || len(f.Ranks) != 1 || f.Ranks[0] != 1 || Reported(err) != (r == 1) {
			t.Fatalf("agreement on rank 1's failure: %v", err)
		}
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("rank %d of %d: %s ok\n", r, n, scenario)
}
