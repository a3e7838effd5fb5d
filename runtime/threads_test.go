package runtime

import (
	"errors"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

func TestOptionsValidateThreads(t *testing.T) {
	for _, n := range []int{0, 1, MaxThreads()} {
		if err := (Options{Threads: n}).Validate(); err != nil {
			t.Errorf("threads %d: %v", n, err)
		}
	}
	for _, n := range []int{-1, MaxThreads() + 1} {
		var se *setting.Error
		if err := (Options{Threads: n}).Validate(); !errors.As(err, &se) || se.Setting != "threads" {
			t.Errorf("threads %d: %v, want a setting error of threads", n, err)
		}
	}
}
