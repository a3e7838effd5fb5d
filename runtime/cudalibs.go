package runtime

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CUDALib is one shared library the CUDA provider needs at run time.
type CUDALib struct {
	// Soname is the file name looked for, e.g. "libcublas.so.13".
	Soname string `json:"name"`
	// What says what it is, e.g. "cuBLAS 13".
	What string `json:"what"`
	// Required is false for libraries that are loaded when present only
	// (cuDNN's sub-libraries, NVRTC).
	Required bool `json:"required"`
	// Path is where it was found; "" when missing.
	Path string `json:"path,omitempty"`
}

// cudaLibs lists, in loading order, what the CUDA provider of ONNX Runtime
// 1.29 (built against CUDA 13 and cuDNN 9) needs: its DT_NEEDED entries
// (cudart, cublasLt, cublas, curand; the driver's libcuda.so.1 is checked
// apart) and cuDNN, which it opens itself. cuDNN 9 opens its sub-libraries
// by soname; loading them first from the folder libcudnn.so.9 was found in
// makes those opens find them.
var cudaLibs = []CUDALib{
	{Soname: "libcudart.so.13", What: "CUDA 13 runtime", Required: true},
	{Soname: "libcublasLt.so.13", What: "cuBLASLt 13", Required: true},
	{Soname: "libcublas.so.13", What: "cuBLAS 13", Required: true},
	{Soname: "libcurand.so.10", What: "cuRAND (CUDA 13)", Required: true},
	{Soname: "libnvrtc.so.13", What: "NVRTC 13 (cuDNN runtime-compiled engines)"},
	{Soname: "libnvJitLink.so.13", What: "nvJitLink 13"},
	{Soname: "libcudnn_graph.so.9", What: "cuDNN 9 graph"},
	{Soname: "libcudnn_engines_precompiled.so.9", What: "cuDNN 9 precompiled engines"},
	{Soname: "libcudnn_engines_runtime_compiled.so.9", What: "cuDNN 9 runtime-compiled engines"},
	{Soname: "libcudnn_heuristic.so.9", What: "cuDNN 9 heuristics"},
	{Soname: "libcudnn_ops.so.9", What: "cuDNN 9 ops"},
	{Soname: "libcudnn_cnn.so.9", What: "cuDNN 9 convolutions"},
	{Soname: "libcudnn_adv.so.9", What: "cuDNN 9 advanced ops"},
	{Soname: "libcudnn.so.9", What: "cuDNN 9", Required: true},
}

// CUDALibraries is what FindCUDALibraries found.
type CUDALibraries struct {
	// Libs holds every library looked for, in loading order, with Path set
	// where it was found.
	Libs []CUDALib `json:"libraries"`
	// Searched lists the folders looked in, in order.
	Searched []string `json:"searched"`
}

// Missing returns the sonames of the required libraries that were not found.
func (c CUDALibraries) Missing() []string {
	var out []string
	for _, l := range c.Libs {
		if l.Required && l.Path == "" {
			out = append(out, l.Soname)
		}
	}
	return out
}

// Found returns the libraries that were found, in loading order.
func (c CUDALibraries) Found() []CUDALib {
	var out []CUDALib
	for _, l := range c.Libs {
		if l.Path != "" {
			out = append(out, l)
		}
	}
	return out
}

// FindCUDALibraries looks for the CUDA 13 and cuDNN 9 libraries in the
// folders CUDASearchDirs names, taking each from the first folder that has it.
func FindCUDALibraries() CUDALibraries {
	return findCUDALibraries(CUDASearchDirs(os.Getenv, pythonPrefixes(os.Getenv)))
}

func findCUDALibraries(dirs []string) CUDALibraries {
	res := CUDALibraries{Libs: append([]CUDALib(nil), cudaLibs...), Searched: dirs}
	for i := range res.Libs {
		for _, d := range dirs {
			p := filepath.Join(d, res.Libs[i].Soname)
			if fileExists(p) {
				res.Libs[i].Path = p
				break
			}
		}
	}
	return res
}

// CUDASearchDirs lists the folders that may hold the CUDA libraries, in the
// order they are searched: $LD_LIBRARY_PATH, $CUDA_HOME/lib64 and
// $CUDA_PATH/lib64, /usr/local/cuda/lib64 (and /usr/local/cuda-13*/lib64),
// the nvidia/*/lib folders of the pip wheels (nvidia-cuda-runtime,
// nvidia-cublas, nvidia-curand, nvidia-cudnn-cu13) in every Python
// site-packages under the prefixes given, then the system library folders.
// Only existing folders are listed, each once.
func CUDASearchDirs(getenv func(string) string, pyPrefixes []string) []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(ds ...string) {
		for _, d := range ds {
			if d == "" {
				continue
			}
			d = filepath.Clean(d)
			if seen[d] {
				continue
			}
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				continue
			}
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	add(filepath.SplitList(getenv("LD_LIBRARY_PATH"))...)
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"} {
		if r := getenv(v); r != "" {
			add(filepath.Join(r, "lib64"), filepath.Join(r, "lib"))
		}
	}
	add("/usr/local/cuda/lib64")
	add(globSorted("/usr/local/cuda-13*/lib64")...)
	for _, sp := range sitePackages(pyPrefixes) {
		add(globSorted(filepath.Join(sp, "nvidia", "*", "lib"))...)
	}
	add("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")
	return dirs
}

// pythonPrefixes lists the installation prefixes of the Pythons on the
// machine: $VIRTUAL_ENV, $CONDA_PREFIX, the parent of every $PATH folder that
// holds a python3, ~/.local, /usr/local, /usr, and /opt/* and /opt/*/.venv.
func pythonPrefixes(getenv func(string) string) []string {
	var out []string
	out = append(out, getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX"))
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if d != "" && fileExists(filepath.Join(d, "python3")) {
			out = append(out, filepath.Dir(d))
		}
	}
	if h := getenv("HOME"); h != "" {
		out = append(out, filepath.Join(h, ".local"))
	}
	out = append(out, "/usr/local", "/usr")
	out = append(out, globSorted("/opt/*/.venv")...)
	out = append(out, globSorted("/opt/*")...)
	return out
}

// sitePackages returns the site-packages and dist-packages folders of the
// Pythons under prefixes.
func sitePackages(prefixes []string) []string {
	var out []string
	for _, p := range prefixes {
		if p == "" {
			continue
		}
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib64/python3*/site-packages"} {
			out = append(out, globSorted(filepath.Join(p, pat))...)
		}
	}
	out = append(out, globSorted("/usr/lib/python3/dist-packages")...)
	return out
}

// globSorted is filepath.Glob with the newest-looking names first
// (python3.13 before python3.12), ignoring pattern errors.
func globSorted(pat string) []string {
	m, _ := filepath.Glob(pat)
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	return m
}

// missingCUDAMessage says which required CUDA libraries are missing and
// where they were looked for, in one line.
func missingCUDAMessage(missing []string) string {
	return "CUDA libraries not found: " + strings.Join(missing, ", ") +
		" (looked in LD_LIBRARY_PATH, CUDA_HOME, /usr/local/cuda/lib64 and pip nvidia/*/lib folders; install CUDA 13 and cuDNN 9, e.g. pip install nvidia-cuda-runtime nvidia-cublas nvidia-curand nvidia-cudnn-cu13)"
}
