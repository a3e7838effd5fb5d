package memlimit

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512M": 512 << 20, "8G": 8 << 30, "8GiB": 8 << 30, "1.5k": 1536, "2T": 2 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	// "0.3" is under one byte: refused, not read as 0 (the default limit).
	for _, in := range []string{"", "-1", "0", "nan", "lots", "1e30G", "0.3", "1e-10G"} {
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
	err := Check("the input of m.onnx", Product(64, 3, 4096, 4096, 4), "lower the batch")
	var tl *TooLargeError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tl) || tl.Need != Product(64, 3, 4096, 4096, 4) || tl.Limit != 1<<30 ||
		tl.From != "$SEGTUNE_MAX_MEMORY" || err.Error() != "the input of m.onnx would need about 12.0 GiB, more than the memory limit of 1.0 GiB ($SEGTUNE_MAX_MEMORY): lower the batch: over the memory limit" {
		t.Errorf("err = %v", err)
	}
	Set(4 << 30)
	defer Set(0)
	// A limit set is the setting max_memory's, which a program names.
	if l, from := Limit(); l != 4<<30 || from != "{max_memory}" || HowToSet() != "{max_memory} or $SEGTUNE_MAX_MEMORY" {
		t.Errorf("limit %d from %s, how to set %q", l, from, HowToSet())
	}
	err = Check("the input", 8<<30, "lower {batch}")
	flag := func(key string) string { return "--" + key }
	if !errors.As(err, &tl) || tl.Named(flag) != "the input would need about 8.0 GiB, more than the memory limit of 4.0 GiB (--max_memory): lower --batch: over the memory limit" {
		t.Errorf("named by flag: %v", err)
	}
	t.Setenv(EnvVar, "")
	Set(0)
	if l, _ := Limit(); l <= 0 {
		t.Errorf("default limit %d", l)
	}
}

// fakeSystem writes /proc and /sys files under a temporary root: files maps
// paths below the root to their contents.
func fakeSystem(t *testing.T, files map[string]string, addressSpace uint64) Sources {
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Sources{
		Meminfo:      filepath.Join(root, "proc/meminfo"),
		SelfCgroup:   filepath.Join(root, "proc/self/cgroup"),
		CgroupRoot:   filepath.Join(root, "sys/fs/cgroup"),
		AddressSpace: func() (uint64, error) { return addressSpace, nil },
	}
}

const meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\n"

// Defect: the default was 3/4 of the machine's memory whatever the
// container's cgroup (nested below the mount, or v1) or RLIMIT_AS said.
func TestDefaultTakesTheSmallestBound(t *testing.T) {
	var unlimited uint64 = unix.RLIM_INFINITY
	cases := []struct {
		name  string
		files map[string]string
		as    uint64
		want  int64
		from  string
	}{
		{"machine only", map[string]string{"proc/meminfo": meminfo16G}, unlimited, 12 << 30, "this machine's memory (16.0 GiB)"},
		{"v2 nested cgroup", map[string]string{
			"proc/meminfo":     meminfo16G,
			"proc/self/cgroup": "0::/user.slice/job.scope\n",
			"sys/fs/cgroup/user.slice/job.scope/memory.max": "max\n",
			"sys/fs/cgroup/user.slice/memory.max":           "4294967296\n",
		}, unlimited, 3 << 30, "the cgroup's memory.max (4.0 GiB)"},
		{"v2 container root", map[string]string{
			"proc/meminfo":                meminfo16G,
			"proc/self/cgroup":            "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory.max":    "2147483648\n",
			"sys/fs/cgroup/cgroup.procs":  "1\n",
			"sys/fs/cgroup/memory.events": "",
		}, unlimited, 1536 << 20, "the cgroup's memory.max (2.0 GiB)"},
		{"v1 nested", map[string]string{
			"proc/meminfo":     meminfo16G,
			"proc/self/cgroup": "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
		}, unlimited, 768 << 20, "the cgroup's memory.limit_in_bytes (1.0 GiB)"},
		{"RLIMIT_AS", map[string]string{"proc/meminfo": meminfo16G}, 4 << 30, 1536 << 20, "half the address-space limit (RLIMIT_AS 4.0 GiB)"},
		{"nothing readable", nil, unlimited, 6 << 30, "8 GiB (no memory size could be read)"},
		// Garbage in the cgroup files (and a limit beyond int64) is no bound.
		{"garbage cgroup files", map[string]string{
			"proc/meminfo":                                 meminfo16G,
			"proc/self/cgroup":                             "0::/a/b/c\n4:memory:/x\nnonsense\n::\n",
			"sys/fs/cgroup/a/b/c/memory.max":               "lots\n",
			"sys/fs/cgroup/a/b/memory.max":                 "-4096\n",
			"sys/fs/cgroup/a/memory.max":                   "99999999999999999999999\n",
			"sys/fs/cgroup/memory.max":                     "",
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "0x40000000\n",
		}, 1<<63 + 5, 12 << 30, "this machine's memory (16.0 GiB)"},
	}
	for _, c := range cases {
		got := fakeSystem(t, c.files, c.as).Default()
		if got.Bytes != c.want || got.From != c.from {
			t.Errorf("%s: %d from %q; want %d from %q", c.name, got.Bytes, got.From, c.want, c.from)
		}
	}
}

func TestSetGoLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(EnvVar, "3G")
	SetGoLimit()
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Errorf("Go's memory limit %d, want %d", got, int64(3<<30))
	}
	debug.SetMemoryLimit(1 << 40)
	t.Setenv("GOMEMLIMIT", "5GiB")
	SetGoLimit()
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("with $GOMEMLIMIT set, Go's memory limit changed to %d", got)
	}
}
