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
