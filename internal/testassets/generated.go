package testassets

import (
	"os"
	"path/filepath"
	"testing"
)

// Generated returns the path of elem inside the repository's
// testdata/generated folder, where `make test` writes what scripts generate
// (PyTorch exports, the foreign-model corpus), skipping the test when it
// is absent (failing under SEGTUNE_REQUIRE_ASSETS, as Require does).
func Generated(tb testing.TB, elem ...string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	rel := filepath.Join(append([]string{"testdata", "generated"}, elem...)...)
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break // the repository's root: no further up
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	SkipOrFail(tb, "%s is missing: run make test (or make torch-models foreign-models)", rel)
	return ""
}
