// Package memlimit estimates the memory that tensors, decoded images and
// batches will take and refuses, before allocating, work that would exceed
// segtune's memory limit, so that a model declaring a 30000x30000 input or
// a batch of 10^9 ends in a clear error instead of Go's "fatal error: out
// of memory".
//
// The limit is $SEGTUNE_MAX_MEMORY (or the --max-memory flag, which sets
// it), in bytes with an optional K, M, G or T suffix (powers of 1024);
// by default three quarters of the machine's memory (the smaller of
// /proc/meminfo's MemTotal and the cgroup's memory.max).
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
)

// EnvVar names the environment variable holding the limit.
const EnvVar = "SEGTUNE_MAX_MEMORY"

var (
	mu       sync.Mutex
	override int64 // set by Set; 0: none
)

// ErrTooLarge is wrapped by the errors Check returns.
var ErrTooLarge = errors.New("over the memory limit")

// fallback is the default when the machine's memory cannot be read.
const fallback = 8 << 30

// Set makes limit the memory limit (0 restores the default).
func Set(limit int64) {
	mu.Lock()
	override = limit
	mu.Unlock()
}

// Limit returns the memory limit in bytes and where it comes from.
func Limit() (int64, string) {
	mu.Lock()
	o := override
	mu.Unlock()
	if o > 0 {
		return o, "--max-memory"
	}
	if v := os.Getenv(EnvVar); v != "" {
		if n, err := ParseBytes(v); err == nil && n > 0 {
			return n, "$" + EnvVar
		}
	}
	return defaultLimit(), "the default, 3/4 of this machine's memory; set --max-memory or $" + EnvVar
}

var defaultOnce = sync.OnceValue(func() int64 {
	total := machineMemory()
	if total <= 0 {
		return fallback
	}
	return total / 4 * 3
})

func defaultLimit() int64 { return defaultOnce() }

func machineMemory() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					total = kb << 10
				}
				break
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
				total = n
			}
		}
	}
	return total
}

// ParseBytes parses a byte count such as 8589934592, 512M or 8G.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	up := strings.TrimSuffix(strings.ToUpper(s), "IB")
	up = strings.TrimSuffix(up, "B")
	if up != "" {
		switch up[len(up)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			up = up[:len(up)-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(up), 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a positive byte count (e.g. 8G, 512M)", s)
	}
	return int64(v * float64(mult)), nil
}

// Product multiplies non-negative factors, saturating at math.MaxInt64
// instead of overflowing (a negative factor counts as 0).
func Product(factors ...int64) int64 {
	p := int64(1)
	for _, f := range factors {
		if f <= 0 {
			return 0
		}
		if p > math.MaxInt64/f {
			return math.MaxInt64
		}
		p *= f
	}
	return p
}

// Exceeds reports whether bytes exceed the memory limit (without
// allocating, for hot paths that format their error only when needed).
func Exceeds(bytes int64) bool {
	limit, _ := Limit()
	return bytes > limit
}

// Check returns an error when bytes exceed the memory limit. what names
// the thing (e.g. "the input tensor of model.onnx, [1000000000,3,512,512]
// float32") and fix says what to change (e.g. "use a model with a smaller
// fixed batch").
func Check(what string, bytes int64, fix string) error {
	limit, from := Limit()
	if bytes <= limit {
		return nil
	}
	msg := fmt.Sprintf("%s would need about %s, more than the memory limit of %s (%s)", what, Human(bytes), Human(limit), from)
	if fix != "" {
		msg += ": " + fix
	}
	return fmt.Errorf("%s: %w", msg, ErrTooLarge)
}

// Human formats a byte count for people.
func Human(n int64) string {
	if n == math.MaxInt64 {
		return "more than 8 EiB"
	}
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"} {
		if f < 1024 || u == "PiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}
