package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FindLibrary says which path failed and where it came from, in words a
// program of any kind can show: no command-line flag.
func TestFindLibrary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SEGTUNE_CACHE_DIR", filepath.Join(dir, "cache")) // an empty cache
	t.Setenv(LibraryEnv, "")
	lib := filepath.Join(dir, "libonnxruntime.so")
	if err := os.WriteFile(lib, []byte("not a library, but a regular file"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.so")
	for _, tc := range []struct {
		explicit, env string
		want          string // in the error; "" for none
	}{
		{explicit: lib, want: ""},
		{env: lib, want: ""},
		{explicit: missing, want: "ONNX Runtime library " + missing + " (from ort_lib): "},
		{explicit: dir, want: "ONNX Runtime library " + dir + " (from ort_lib) is a directory"},
		{env: missing, want: "ONNX Runtime library " + missing + " (from " + LibraryEnv + "): "},
		{explicit: lib, env: missing, want: ""}, // the caller's path comes first
		{want: "ONNX Runtime library not found: run `make ort`"},
	} {
		t.Setenv(LibraryEnv, tc.env)
		got, err := FindLibrary(tc.explicit)
		switch {
		case tc.want == "" && (err != nil || got != lib):
			t.Errorf("FindLibrary(%q) with %s=%q: %q, %v; want %s", tc.explicit, LibraryEnv, tc.env, got, err, lib)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("FindLibrary(%q) with %s=%q: %v; want an error with %q", tc.explicit, LibraryEnv, tc.env, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "--"):
			t.Errorf("FindLibrary's error names a flag: %v", err)
		case err != nil && errors.Is(err, ErrNoLibrary) != (tc.explicit == "" && tc.env == ""):
			t.Errorf("FindLibrary(%q) with %s=%q: %v; ErrNoLibrary only when nothing was given", tc.explicit, LibraryEnv, tc.env, err)
		}
	}
}
