// Package skip is the skip policy of segtune's tests, without
// dependencies, so that every package (runtime's own tests included) can
// use it: a test missing a dependency skips, or fails when
// $SEGTUNE_REQUIRE_ASSETS is set (CI).
package skip

import (
	"os"
	"testing"
)

// RequireEnvVar, when set to anything, turns skips into failures.
const RequireEnvVar = "SEGTUNE_REQUIRE_ASSETS"

// OrFail skips the test, or fails it when $SEGTUNE_REQUIRE_ASSETS is set.
func OrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(RequireEnvVar) != "" {
		tb.Fatalf(format+" (%s is set: failing instead of skipping)", append(args, RequireEnvVar)...)
	}
	tb.Skipf(format, args...)
}

// GPUEnvVar, when set to anything, turns GPU's skips into failures: set it
// where a GPU is meant to be used, so that a broken CUDA set-up fails the
// run instead of skipping the GPU tests.
const GPUEnvVar = "SEGTUNE_REQUIRE_GPU"

// GPU skips the test when why is not empty (why says what is missing for
// the GPU: the CUDA provider, a library, the driver, a GPU), failing it
// instead when $SEGTUNE_REQUIRE_GPU is set. CI has no GPU, so
// $SEGTUNE_REQUIRE_ASSETS does not apply here.
func GPU(tb testing.TB, why string) {
	tb.Helper()
	if why == "" {
		return
	}
	if os.Getenv(GPUEnvVar) != "" {
		tb.Fatalf("GPU required (%s is set) but unavailable: %s", GPUEnvVar, why)
	}
	tb.Skipf("no GPU: %s", why)
}

// File returns path, skipping the test when it is not there; how says how
// to get it (e.g. "make ort-cuda"). For optional local installs that CI
// does not make.
func File(tb testing.TB, path, how string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("%s not available (%s): %v", path, how, err)
	}
	return path
}
