package dataparallel

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/segtune/segtune/internal/mpi"
)

// One rank's bad setting stops every rank; ranks that take turns never
// configure at once.
func TestConfigureAgrees(t *testing.T) {
	for _, inTurn := range []bool{false, true} {
		world := mpi.Local(3)
		var running, overlap atomic.Int32
		errs := make([]error, len(world))
		var wg sync.WaitGroup
		for r, w := range world {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[r] = Configure(w, inTurn, func() (int, error) {
					if running.Add(1) > 1 {
						overlap.Add(1)
					}
					defer running.Add(-1)
					if r == 1 {
						return 0, errors.New("bad setting")
					}
					return r, nil
				})
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err == nil {
				t.Errorf("inTurn %v: rank %d went on after rank 1's bad setting", inTurn, r)
			}
		}
		if inTurn && overlap.Load() > 0 {
			t.Errorf("ranks taking turns configured at once")
		}
	}
}
