// Package memlimit estimates the memory that tensors, decoded images and
// batches will take and refuses, before allocating, work that would exceed
// segtune's memory limit, so that a model declaring a 30000x30000 input or
// a batch of 10^9 ends in a clear error instead of Go's "fatal error: out
// of memory".
//
// The limit is $SEGTUNE_MAX_MEMORY (or what the program gives to Set), in
// bytes with an optional K, M, G or T suffix (powers of 1024); by default three quarters of the smallest bound the environment sets
// (see [Sources.Default]). It is also Go's soft memory limit ([SetGoLimit]).
package memlimit

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/segtune/segtune/internal/setting"
)

// EnvVar names the environment variable holding the limit.
const EnvVar = "SEGTUNE_MAX_MEMORY"

// Key is the setting that sets the limit (Set), as a message names it:
// {max_memory} (setting.Advice), which a program names its own way.
const Key = "max_memory"

var (
	mu       sync.Mutex
	override int64 // set by Set; 0: none
)

// HowToSet says how a user sets the limit, naming the setting by {key}
// (setting.Advice).
func HowToSet() setting.Advice { return "{" + Key + "} or $" + EnvVar }

// ErrTooLarge is wrapped by the errors Check returns.
var ErrTooLarge = errors.New("over the memory limit")

// fallback is the default when no bound can be read.
const fallback = 8 << 30

// Set makes limit the memory limit (0 restores the default).
func Set(limit int64) {
	mu.Lock()
	override = limit
	mu.Unlock()
}

// Configure makes the user's limit v (ParseBytes; "": the default) the
// memory limit of this process: Go's soft limit (SetGoLimit) and, where
// the address space allows, the process's (FitAddressSpace). A value that
// does not parse is ParseBytes's error, the limit left at the default.
func Configure(v string) error {
	Set(0)
	if v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			return err
		}
		Set(n)
	}
	SetGoLimit()
	FitAddressSpace()
	return nil
}

// Limit returns the memory limit in bytes and where it comes from, naming
// the setting by {key} (setting.Advice).
func Limit() (int64, setting.Advice) {
	mu.Lock()
	o := override
	mu.Unlock()
	if o > 0 {
		return o, "{" + Key + "}"
	}
	if v := os.Getenv(EnvVar); v != "" {
		if n, err := ParseBytes(v); err == nil && n > 0 {
			return n, "$" + EnvVar
		}
	}
	return defaultLimit()
}

// SetGoLimit makes the memory limit Go's soft memory limit, so that the
// garbage collector works harder before the heap outgrows it, unless
// $GOMEMLIMIT already sets one.
func SetGoLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, _ := Limit()
	debug.SetMemoryLimit(limit)
}

// Bound is a memory bound the environment sets, and where it comes from.
type Bound struct {
	Bytes int64
	From  string // e.g. "the cgroup's memory.max (4.0 GiB)"
}

// Sources are the files and the call the default limit is read from.
type Sources struct {
	Meminfo    string // /proc/meminfo
	SelfCgroup string // /proc/self/cgroup
	CgroupRoot string // /sys/fs/cgroup
	// AddressSpace returns the soft RLIMIT_AS (RLIM_INFINITY: none).
	AddressSpace func() (uint64, error)
}

// System reads this process's bounds.
var System = Sources{
	Meminfo:    "/proc/meminfo",
	SelfCgroup: "/proc/self/cgroup",
	CgroupRoot: "/sys/fs/cgroup",
	AddressSpace: func() (uint64, error) {
		var r unix.Rlimit
		err := unix.Getrlimit(unix.RLIMIT_AS, &r)
		return r.Cur, err
	},
}

// defaultLimit is read once, its description built once: Limit is called
// on paths that must not allocate (imageio's Tensor).
var defaultLimit = sync.OnceValues(func() (int64, setting.Advice) {
	d := System.Default()
	return d.Bytes, setting.Advice("the default, 3/4 of " + d.From + "; set " + string(HowToSet()))
})

// Default is three quarters of the smallest bound on this process's
// memory: the machine's (MemTotal), its cgroup's (v2 memory.max or v1
// memory.limit_in_bytes, of its own cgroup or any above it) and a share
// of its address-space limit (RLIMIT_AS, see addressSpaceShare).
func (s Sources) Default() Bound {
	var bounds []Bound
	if n := s.memTotal(); n > 0 {
		bounds = append(bounds, Bound{n, "this machine's memory"})
	}
	if b, ok := s.cgroupLimit(); ok {
		bounds = append(bounds, b)
	}
	if as, ok := s.addressSpace(); ok {
		bounds = append(bounds, Bound{as / addressSpaceShare, fmt.Sprintf("half the address-space limit (RLIMIT_AS %s)", Human(as))})
	}
	if len(bounds) == 0 {
		return Bound{fallback / 4 * 3, "8 GiB (no memory size could be read)"}
	}
	least := bounds[0]
	for _, b := range bounds[1:] {
		if b.Bytes < least.Bytes {
			least = b
		}
	}
	if least.From == "this machine's memory" {
		least.From += " (" + Human(least.Bytes) + ")"
	}
	least.Bytes = least.Bytes / 4 * 3
	return least
}

// addressSpaceShare divides RLIMIT_AS into the memory segtune may count
// on: address space is not memory in use. ONNX Runtime's and glibc's
// per-thread arenas, thread stacks and Go's heap reservations take address
// space that is never touched; a person-model fine-tune (batch 4, 240x320
// crops) peaked at 5.0 GB of address space for 2.2 GB resident (VmPeak
// against VmHWM), and started at 2.0 GB for 0.1 GB.
const addressSpaceShare = 2

func (s Sources) memTotal() int64 {
	b, err := readSmall(s.Meminfo)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 && kb < math.MaxInt64>>10 {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupLimit returns the smallest memory limit of this process's cgroup
// and the cgroups above it (a parent's limit bounds its children), in the
// v2 hierarchy (memory.max) and the v1 memory controller's
// (memory.limit_in_bytes). Where /proc/self/cgroup names a path that the
// mount does not show (a container that sees its own cgroup as the root),
// the root's files are the container's.
func (s Sources) cgroupLimit() (Bound, bool) {
	type hierarchy struct{ dir, path, file, name string }
	var hs []hierarchy
	if b, err := readSmall(s.SelfCgroup); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			id, rest, ok := strings.Cut(line, ":")
			controllers, path, ok2 := strings.Cut(rest, ":")
			switch {
			case !ok || !ok2:
			case id == "0" && controllers == "":
				hs = append(hs, hierarchy{s.CgroupRoot, path, "memory.max", "the cgroup's memory.max"})
			case slices.Contains(strings.Split(controllers, ","), "memory"):
				hs = append(hs, hierarchy{filepath.Join(s.CgroupRoot, "memory"), path, "memory.limit_in_bytes", "the cgroup's memory.limit_in_bytes"})
			}
		}
	}
	if len(hs) == 0 {
		hs = []hierarchy{
			{s.CgroupRoot, "/", "memory.max", "the cgroup's memory.max"},
			{filepath.Join(s.CgroupRoot, "memory"), "/", "memory.limit_in_bytes", "the cgroup's memory.limit_in_bytes"},
		}
	}
	var least Bound
	for _, h := range hs {
		for rel := filepath.Clean("/" + h.path); ; rel = filepath.Dir(rel) {
			if n := readLimit(filepath.Join(h.dir, rel, h.file)); n > 0 && (least.Bytes == 0 || n < least.Bytes) {
				least = Bound{n, fmt.Sprintf("%s (%s)", h.name, Human(n))}
			}
			if rel == "/" {
				break
			}
		}
	}
	return least, least.Bytes > 0
}

// readLimit reads a cgroup limit file: a byte count, or "max" (none: 0).
func readLimit(p string) int64 {
	b, err := readSmall(p)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// readSmall reads the first 64 KiB of a /proc or /sys file (their sizes
// are not known before reading).
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
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
	// Under one byte is refused too: 0 would mean "the default".
	if err != nil || math.IsNaN(v) || v*float64(mult) < 1 || v*float64(mult) > math.MaxInt64/2 {
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

// TooLargeError is work refused because it would need more memory, or
// more address space, than this process may take. It matches ErrTooLarge.
type TooLargeError struct {
	What         string         // the work
	Need, Limit  int64          // bytes
	From         setting.Advice // where Limit comes from, naming the setting by {key}
	AddressSpace bool           // Limit is RLIMIT_AS, not the memory limit
	Fix          setting.Advice // what to change, naming settings by {key} ("" for nothing)
}

func (e *TooLargeError) Error() string { return e.Named(setting.Key) }

// Named is the message with the settings its Fix names called name(key).
func (e *TooLargeError) Named(name func(key string) string) string {
	var msg string
	if e.AddressSpace {
		msg = fmt.Sprintf("%s would map about %s of address space, more than the address-space limit of %s (RLIMIT_AS: ulimit -v, prlimit --as)",
			e.What, Human(e.Need), Human(e.Limit))
	} else {
		msg = fmt.Sprintf("%s would need about %s, more than the memory limit of %s (%s)", e.What, Human(e.Need), Human(e.Limit), e.From.Named(name))
	}
	if e.Fix != "" {
		msg += ": " + e.Fix.Named(name)
	}
	return msg + ": " + ErrTooLarge.Error()
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Check returns a *TooLargeError when bytes exceed the memory limit. what
// names the thing (e.g. "the input tensor of model.onnx,
// [1000000000,3,512,512] float32") and fix says what to change (e.g. "use
// a model with a smaller fixed batch").
func Check(what string, bytes int64, fix setting.Advice) error {
	limit, from := Limit()
	if bytes <= limit {
		return nil
	}
	return &TooLargeError{What: what, Need: bytes, Limit: limit, From: from, Fix: fix}
}

// AddressSpace returns this process's address-space limit (the soft
// RLIMIT_AS: ulimit -v, prlimit --as) in bytes, and false when none is set.
func AddressSpace() (int64, bool) { return System.addressSpace() }

func (s Sources) addressSpace() (int64, bool) {
	if s.AddressSpace == nil {
		return 0, false
	}
	as, err := s.AddressSpace()
	if err != nil || as == unix.RLIM_INFINITY || as == 0 || as >= math.MaxInt64 {
		return 0, false
	}
	return int64(as), true
}

// mallocArenas is the glibc malloc arena count FitAddressSpace sets.
const mallocArenas = 2

// Thread address space: a thread's stack, and a glibc malloc arena for
// each thread that allocates under contention, until arenas are capped.
const (
	threadStackBytes = 8 << 20
	mallocArenaBytes = 64 << 20
)

var arenasCapped atomic.Bool

// FitAddressSpace, under an address-space limit, caps glibc's malloc
// arenas at two. Uncapped, ONNX Runtime's threads get one each, reserving
// 64 MiB of address space at a time that the limit counts though little of
// it is touched: a person-model fine-tune on 16 threads passed 3.9 GB and
// was killed by a 4 GB limit, and peaked at 3.1 GB with two arenas. Call
// it before threads start allocating.
func FitAddressSpace() {
	if _, ok := AddressSpace(); ok && capArenas(mallocArenas) {
		arenasCapped.Store(true)
	}
}

// ThreadAddressSpace is the address space each thread of a thread pool
// maps: its stack, and its malloc arena unless FitAddressSpace capped them.
func ThreadAddressSpace() int64 {
	if arenasCapped.Load() {
		return threadStackBytes
	}
	return threadStackBytes + mallocArenaBytes
}

// CheckAddressSpace returns an error when work expected to map bytes of
// address space (resident memory, and what is reserved but never touched:
// thread stacks, malloc arenas, libraries) would exceed RLIMIT_AS, where
// one is set: past it an allocation fails, and Go's runtime then ends the
// process with a goroutine dump instead of an error. what and fix are as
// for Check.
func CheckAddressSpace(what string, bytes int64, fix setting.Advice) error {
	as, ok := AddressSpace()
	if !ok || bytes <= as {
		return nil
	}
	return &TooLargeError{What: what, Need: bytes, Limit: as, AddressSpace: true, Fix: fix}
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
