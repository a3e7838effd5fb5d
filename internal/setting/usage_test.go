package setting

import (
	"errors"
	"fmt"
	"testing"
)

// A usage error exits with status 2 (urfave/cli's ExitCoder), keeps its
// message and cause, and survives Rename and wrapping.
func TestUsageExitsTwo(t *testing.T) {
	if Usage(nil) != nil {
		t.Fatal("Usage(nil) is not nil")
	}
	se := Errorf("lr", "-1", "must be positive")
	err := fmt.Errorf("finetune: %w", Usage(se))
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("%v: no exit status 2", err)
	}
	named := Rename(err, func(key string) string { return "--" + key })
	if got, want := named.Error(), "finetune: --lr -1: must be positive"; got != want {
		t.Errorf("named %q, want %q", got, want)
	}
	if !errors.As(named, &exit) || exit.ExitCode() != 2 || !errors.Is(named, se) {
		t.Errorf("%v: renamed, the status or the cause is lost", named)
	}
	if errors.As(errors.New("plain"), &exit) {
		t.Error("a plain error has an exit status")
	}
	for _, c := range []struct {
		err  error
		want int
	}{{nil, 0}, {errors.New("plain"), 1}, {err, 2}, {named, 2}} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
