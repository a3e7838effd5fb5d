package memlimit

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512M": 512 << 20, "8G": 8 << 30, "8GiB": 8 << 30, "1.5k": 1536, "2T": 2 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "0", "nan", "lots", "1e30G"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestProductSaturates(t *testing.T) {
	if got := Product(1_000_000_000, 3, 30000, 30000, 4); got != math.MaxInt64 {
		t.Errorf("got %d", got)
	}
	if got := Product(2, 3, 4); got != 24 {
		t.Errorf("got %d", got)
	}
}

// Defect: sizes declared by models and flags were allocated without an
// estimate, ending in "fatal error: out of memory".
func TestCheck(t *testing.T) {
	t.Setenv(EnvVar, "1G")
	if err := Check("x", 1<<30, ""); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	err := Check("the input of m.onnx", Product(64, 3, 4096, 4096, 4), "lower --batch")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "the input of m.onnx") ||
		!strings.Contains(err.Error(), "$SEGTUNE_MAX_MEMORY") || !strings.Contains(err.Error(), "lower --batch") {
		t.Errorf("err = %v", err)
	}
	Set(4 << 30)
	defer Set(0)
	if l, from := Limit(); l != 4<<30 || from != "--max-memory" {
		t.Errorf("limit %d from %s", l, from)
	}
	t.Setenv(EnvVar, "")
	Set(0)
	if l, _ := Limit(); l <= 0 {
		t.Errorf("default limit %d", l)
	}
}
