// Package testassets locates the read-only shared test assets (models, data
// sets) that live outside the repository, so tests can use them when present
// and skip cleanly when they are not.
package testassets

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the environment variable that, when set, overrides the search
// for the shared assets folder.
const EnvVar = "SEGTUNE_SHARED_ASSETS"

// RequireEnvVar, when set to anything, turns Require's skips into failures.
const RequireEnvVar = "SEGTUNE_REQUIRE_ASSETS"

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
	skip := tb.Skipf
	if os.Getenv(RequireEnvVar) != "" {
		skip = tb.Fatalf
	}
	root := SharedAssetsDir()
	if root == "" {
		skip("shared assets folder not found (set %s)", EnvVar)
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		skip("shared asset %s not available: %v", p, err)
	}
	return p
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// GPUEnvVar, when set to anything, turns RequireGPU's skips into failures:
// set it where a GPU is meant to be used, so that a broken CUDA set-up fails
// the run instead of skipping the GPU tests.
const GPUEnvVar = "SEGTUNE_REQUIRE_GPU"

// RequireGPU skips the test when why is not empty (why says what is missing
// for the GPU: the CUDA provider, a library, the driver, a GPU), failing it
// instead when $SEGTUNE_REQUIRE_GPU is set.
func RequireGPU(tb testing.TB, why string) {
	tb.Helper()
	if why == "" {
		return
	}
	if os.Getenv(GPUEnvVar) != "" {
		tb.Fatalf("GPU required (%s is set) but unavailable: %s", GPUEnvVar, why)
	}
	tb.Skipf("no GPU: %s", why)
}

// RequireFile returns path, skipping the test when it is not there; how says
// how to get it (e.g. "make ort-cuda"). For optional local installs that CI
// does not make.
func RequireFile(tb testing.TB, path, how string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("%s not available (%s): %v", path, how, err)
	}
	return path
}
