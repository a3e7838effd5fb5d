// Package runtime runs ONNX graphs on ONNX Runtime: it finds and loads the
// shared library, opens sessions on the CPU or CUDA execution provider, and
// moves float32/float64/int64 tensors in and out.
package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// LibraryEnv names the environment variable that points at a user's own
// ONNX Runtime shared library.
const LibraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// ORTVersion is the ONNX Runtime release that scripts/install-ort.sh installs.
const ORTVersion = "1.30.0"

// CachedLibraryPath is where scripts/install-ort.sh puts the library:
// $SEGTUNE_CACHE_DIR, else $XDG_CACHE_HOME/segtune, else ~/.cache/segtune.
func CachedLibraryPath() string {
	root := os.Getenv("SEGTUNE_CACHE_DIR")
	if root == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			root = filepath.Join(x, "segtune")
		} else if home, err := os.UserHomeDir(); err == nil {
			root = filepath.Join(home, ".cache", "segtune")
		}
	}
	return filepath.Join(root, "onnxruntime", ORTVersion, "libonnxruntime.so.1")
}

// FindLibrary returns the ONNX Runtime library to load: explicit (a --ort-lib
// flag) if set, else $ONNXRUNTIME_SHARED_LIBRARY_PATH, else the copy the
// project's installer put in the cache.
func FindLibrary(explicit string) (string, error) {
	check := func(path, from string) (string, error) {
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("ONNX Runtime library %s (from %s): %w", path, from, err)
		}
		if st.IsDir() {
			return "", fmt.Errorf("ONNX Runtime library %s (from %s) is a directory", path, from)
		}
		return path, nil
	}
	if explicit != "" {
		return check(explicit, "--ort-lib")
	}
	if env := os.Getenv(LibraryEnv); env != "" {
		return check(env, LibraryEnv)
	}
	cached := CachedLibraryPath()
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	return "", fmt.Errorf("ONNX Runtime library not found: run `make ort` (scripts/install-ort.sh) to install ONNX Runtime %s into %s, or point %s or --ort-lib at your own libonnxruntime.so", ORTVersion, cached, LibraryEnv)
}

var (
	initMu   sync.Mutex
	initPath string
)

// Init loads the ONNX Runtime library once per process. Later calls with the
// same or an empty path are no-ops; a different path is an error, because a
// process can hold only one ONNX Runtime.
func Init(libPath string) error {
	initMu.Lock()
	defer initMu.Unlock()
	if initPath != "" {
		if libPath != "" && libPath != initPath {
			return fmt.Errorf("ONNX Runtime already loaded from %s, cannot also load %s", initPath, libPath)
		}
		return nil
	}
	path, err := FindLibrary(libPath)
	if err != nil {
		return err
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("loading ONNX Runtime from %s: %w", path, err)
	}
	initPath = path
	return nil
}

// LibraryPath returns the library Init loaded, or "" before Init.
func LibraryPath() string {
	initMu.Lock()
	defer initMu.Unlock()
	return initPath
}

// Version returns the loaded ONNX Runtime's version string.
func Version() (string, error) {
	if LibraryPath() == "" {
		return "", errors.New("ONNX Runtime not loaded")
	}
	return ort.GetVersion(), nil
}
