// Package runtimetest is the test helper that loads ONNX Runtime: a test
// that runs a graph calls Require first, and skips cleanly where ONNX
// Runtime is not installed (fails under $SEGTUNE_REQUIRE_ASSETS, the one
// skip policy of internal/testassets/skip). It lives beside runtime so that
// internal/ needs nothing above it.
package runtimetest

import (
	"testing"

	"github.com/segtune/segtune/internal/testassets/skip"
	"github.com/segtune/segtune/runtime"
)

// Require loads ONNX Runtime (see runtime.Init), skipping the test when it
// is not installed (failing under $SEGTUNE_REQUIRE_ASSETS).
func Require(tb testing.TB) {
	tb.Helper()
	if err := runtime.Init(""); err != nil {
		skip.OrFail(tb, "ONNX Runtime not installed (%v)", err)
	}
}
