// Package testassets locates the read-only shared test assets (models, data
// sets) that live outside the repository, and ONNX Runtime and MNIST, so
// tests can use them when present and skip cleanly when they are not — or
// fail, when $SEGTUNE_REQUIRE_ASSETS is set (CI). It is the one skip policy
// for missing dependencies.
package testassets

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets/skip"
)

// EnvVar names the environment variable that, when set, overrides the search
// for the shared assets folder.
const EnvVar = "SEGTUNE_SHARED_ASSETS"

// RequireEnvVar, when set to anything, turns skips into failures.
const RequireEnvVar = skip.RequireEnvVar

// SharedAssetsDir returns the shared assets folder, or "" when none is found.
// It honours $SEGTUNE_SHARED_ASSETS, then walks up from the working directory
// looking for a "shared/assets" folder (the repository's sibling in CI).
func SharedAssetsDir() string {
	if d := os.Getenv(EnvVar); d != "" {
		if isDir(d) {
			return d
		}
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		cand := filepath.Join(dir, "shared", "assets")
		if isDir(cand) {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Require returns the path of elem inside the shared assets folder, skipping
// the test when the folder or that path is absent.
func Require(tb testing.TB, elem ...string) string {
	tb.Helper()
	// CI sets RequireEnvVar so that a misplaced assets folder fails the
	// run instead of silently skipping the tests that need it.
	miss := func(format string, args ...any) { tb.Helper(); SkipOrFail(tb, format, args...) }
	root := SharedAssetsDir()
	if root == "" {
		miss("shared assets folder not found (set %s)", EnvVar)
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		miss("shared asset %s not available: %v", p, err)
	}
	return p
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// SkipOrFail skips the test, or fails it when $SEGTUNE_REQUIRE_ASSETS is
// set (CI), so that a missing dependency never passes there unnoticed.
// Every test that needs ONNX Runtime, the shared assets or MNIST goes
// through it (directly or through Require, runtimetest.Require, RequireMNIST).
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	skip.OrFail(tb, format, args...)
}

// MNISTEnvVar names the environment variable pointing at an MNIST folder
// (the four IDX files); otherwise the cache of scripts/install-mnist.sh is
// asked.
const MNISTEnvVar = "SEGTUNE_MNIST"

// RequireMNIST returns the MNIST folder. When there is none it fails the
// test under $SEGTUNE_REQUIRE_ASSETS; otherwise it logs that and returns
// "", and the caller may use synthetic digits instead.
func RequireMNIST(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(MNISTEnvVar)
	if dir == "" {
		if script := FindUp(filepath.Join("scripts", "install-mnist.sh")); script != "" {
			// --check only looks in the cache; it never fetches.
			if out, err := exec.Command(script, "--check").Output(); err == nil {
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				dir = strings.TrimSpace(lines[len(lines)-1])
			}
		}
	}
	if dir == "" || !isDir(dir) {
		if os.Getenv(RequireEnvVar) != "" {
			tb.Fatalf("MNIST not found (make mnist, or set %s) and %s is set", MNISTEnvVar, RequireEnvVar)
		}
		tb.Logf("MNIST not found (make mnist installs it): synthetic digit-like data instead")
		return ""
	}
	return dir
}

// FindUp returns rel under the working directory or its nearest ancestor
// holding it, or "".
func FindUp(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// RequirePython returns the Python interpreter of the tests' Python side —
// $SEGTUNE_TORCH_PYTHON, else Debian's /usr/bin/python3
// (scripts/install-python-deps.sh) — after checking that it imports
// modules; it skips (fails under $SEGTUNE_REQUIRE_ASSETS) when it cannot.
func RequirePython(tb testing.TB, modules ...string) string {
	tb.Helper()
	py := os.Getenv("SEGTUNE_TORCH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import "+strings.Join(append([]string{"sys"}, modules...), ", ")).CombinedOutput(); err != nil {
		SkipOrFail(tb, "%s cannot import %s (make python-deps): %v %s", py, strings.Join(modules, ", "), err, strings.TrimSpace(string(out)))
	}
	return py
}
