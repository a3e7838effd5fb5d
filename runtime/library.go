// Package runtime runs ONNX graphs on ONNX Runtime: it finds and loads the
// shared library, opens sessions on the CPU or CUDA execution provider, and
// moves float32/float64/int64 tensors in and out.
package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/segtune/segtune/internal/setting"
)

// LibraryEnv names the environment variable that points at a user's own
// ONNX Runtime shared library.
const LibraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// ORTVersion is the ONNX Runtime release that scripts/install-ort.sh installs.
const ORTVersion = "1.30.0"

// CUDAORTVersion is the ONNX Runtime release of the CUDA build that
// `scripts/install-ort.sh --cuda` (make ort-cuda) installs.
const CUDAORTVersion = "1.29.0"

// CUDAProviderFile is the file name of ONNX Runtime's CUDA execution
// provider, which segtune looks for beside the core library.
const CUDAProviderFile = "libonnxruntime_providers_cuda.so"

// cacheRoot is the per-user cache: $SEGTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/segtune, else ~/.cache/segtune.
func cacheRoot() string {
	root := os.Getenv("SEGTUNE_CACHE_DIR")
	if root == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			root = filepath.Join(x, "segtune")
		} else if home, err := os.UserHomeDir(); err == nil {
			root = filepath.Join(home, ".cache", "segtune")
		}
	}
	return root
}

// CachedLibraryPath is where scripts/install-ort.sh puts the (CPU) library.
func CachedLibraryPath() string {
	return filepath.Join(cacheRoot(), "onnxruntime", ORTVersion, "libonnxruntime.so.1")
}

// CachedCUDALibraryPath is where `scripts/install-ort.sh --cuda` puts the
// core library of the CUDA build; its CUDA provider lies beside it.
func CachedCUDALibraryPath() string {
	return filepath.Join(cacheRoot(), "onnxruntime-cuda", CUDAORTVersion, "libonnxruntime.so.1")
}

// FindLibrary returns the ONNX Runtime library to load: explicit (the
// caller's path, e.g. from a flag) if set, else $ONNXRUNTIME_SHARED_LIBRARY_PATH, else the copy the
// project's installer put in the cache.
func FindLibrary(explicit string) (string, error) {
	return findLibrary(explicit, DeviceCPU)
}

// FindLibraryFor is FindLibrary for a device: for "cuda" and "auto" the CUDA
// build that `make ort-cuda` installs comes before the CPU one in the cache
// (an explicit path and the environment variable still come first).
func FindLibraryFor(explicit, device string) (string, error) {
	return findLibrary(explicit, device)
}

func findLibrary(explicit, device string) (string, error) {
	// from says where path came from, naming the setting by {key}
	// (setting.Messagef).
	check := func(path, from string) (string, error) {
		st, err := os.Stat(path)
		if err != nil {
			return "", setting.Messagef("ONNX Runtime library %s"+from+": %w", path, err)
		}
		if st.IsDir() {
			return "", setting.Messagef("ONNX Runtime library %s"+from+" is a directory", path)
		}
		return path, nil
	}
	if explicit != "" {
		return check(explicit, " (from {ort_lib})")
	}
	if env := os.Getenv(LibraryEnv); env != "" {
		return check(env, " (from "+LibraryEnv+")")
	}
	if device == DeviceCUDA || device == DeviceAuto {
		if p := CachedCUDALibraryPath(); fileExists(p) && fileExists(filepath.Join(filepath.Dir(p), CUDAProviderFile)) {
			return p, nil
		}
	}
	cached := CachedLibraryPath()
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	return "", setting.Messagef("%w: run `make ort` (scripts/install-ort.sh) to install ONNX Runtime %s into %s, or point %s or {ort_lib} at your own libonnxruntime.so", ErrNoLibrary, ORTVersion, cached, LibraryEnv)
}

// ErrNoLibrary is the error of a search for the ONNX Runtime library,
// given no path, that found none.
var ErrNoLibrary = errors.New("ONNX Runtime library not found")

var (
	initMu   sync.Mutex
	initPath string
)

// Init loads the ONNX Runtime library once per process. Later calls with the
// same or an empty path are no-ops; a different path is an error, because a
// process can hold only one ONNX Runtime.
func Init(libPath string) error {
	return InitFor(libPath, DeviceCPU)
}

// InitFor is Init for the sessions a command will open on device: "cuda"
// and "auto" prefer the CUDA build of ONNX Runtime in the cache (see
// FindLibraryFor).
func InitFor(libPath, device string) error {
	initMu.Lock()
	defer initMu.Unlock()
	if initPath != "" {
		if libPath != "" && libPath != initPath {
			return fmt.Errorf("ONNX Runtime already loaded from %s, cannot also load %s", initPath, libPath)
		}
		return nil
	}
	path, err := findLibrary(libPath, strings.ToLower(device))
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

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
