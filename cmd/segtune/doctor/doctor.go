// Package doctor checks the machine segtune runs on: the ONNX Runtime
// library it loads, its providers, the CUDA libraries, the NVIDIA driver
// and GPUs, segtune's memory limit, and optionally where a model's nodes
// run on the CUDA provider.
package doctor

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/segtune/segtune/cmd/segtune/doctor/placement"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime"
)

// Report is what Run finds.
type Report struct {
	ORTLibrary  string             `json:"ort_library"`
	ORTVersion  string             `json:"ort_version,omitempty"`
	ORTError    string             `json:"ort_error,omitempty"`
	Providers   []string           `json:"providers_built_in,omitempty"`
	CUDAProv    string             `json:"cuda_provider,omitempty"`
	CUDAPlugin  bool               `json:"cuda_provider_is_plugin,omitempty"`
	CUDALibs    []runtime.CUDALib  `json:"cuda_libraries"`
	CUDAMissing []string           `json:"cuda_libraries_missing"`
	CUDASearch  []string           `json:"cuda_search_dirs"`
	Driver      string             `json:"nvidia_driver"`
	NvidiaSMI   []string           `json:"nvidia_smi_gpus,omitempty"`
	EPDevices   []runtime.EPDevice `json:"ep_devices,omitempty"`
	CUDAReady   bool               `json:"cuda_ready"`
	CUDAReason  string             `json:"cuda_unavailable_because,omitempty"`
	Model       *placement.Report  `json:"model,omitempty"`
	MemoryLimit int64              `json:"memory_limit_bytes"`
	MemoryFrom  string             `json:"memory_limit_from"`
}

// Run loads ONNX Runtime from ortLib ("": the environment or the
// installer's cache) as for the CUDA device and reports what it finds.
// What cannot be loaded is recorded in the report, not returned; name
// calls the settings the report names what their users type.
func Run(ortLib string, name func(key string) string) *Report {
	r := &Report{}
	limit, from := memlimit.Limit()
	r.MemoryLimit, r.MemoryFrom = limit, from.Named(name)
	libs := runtime.FindCUDALibraries()
	r.CUDALibs, r.CUDAMissing, r.CUDASearch = libs.Libs, libs.Missing(), libs.Searched
	if r.CUDAMissing == nil {
		r.CUDAMissing = []string{}
	}
	r.NvidiaSMI = nvidiaSMI()
	if err := runtime.InitFor(ortLib, runtime.DeviceCUDA); err != nil {
		r.ORTError = setting.Rename(err, name).Error()
		r.Driver = "not checked"
		return r
	}
	r.ORTLibrary = runtime.LibraryPath()
	r.ORTVersion, _ = runtime.Version()
	r.Providers, _ = runtime.AvailableProviders()
	_, err := runtime.CUDADevices()
	r.CUDAProv, r.CUDAPlugin = runtime.CUDAProviderInfo()
	if err != nil {
		r.CUDAReason = err.Error()
	} else {
		r.CUDAReady = true
	}
	r.Driver = driverStatus(r.CUDAReason)
	r.EPDevices, _ = runtime.EPDevices()
	return r
}

// Place runs the model at path on the CUDA provider, its dynamic spatial
// dimensions set to size (HxW), and records where its nodes ran
// (placement.Place); without a working CUDA provider it records why not,
// and with one, a size that does not read (its setting called name(key)).
func (r *Report) Place(path, size string, name func(key string) string) {
	var h, w int64
	if _, err := fmt.Sscanf(size, "%dx%d", &h, &w); err != nil && r.CUDAReady {
		r.Model = &placement.Report{Path: path, Errors: []string{"bad " + name("size") + " " + size}}
		return
	}
	r.Model = placement.Place(path, h, w, r.CUDAReady)
}

// driverStatus says whether libcuda.so.1 was loaded, from CUDADevices'
// error.
func driverStatus(reason string) string {
	switch {
	case reason == "":
		return "loaded (" + runtime.CUDADriverLib + ")"
	case strings.Contains(reason, runtime.CUDADriverLib):
		return "missing: " + runtime.CUDADriverLib + " cannot be loaded"
	case strings.HasPrefix(reason, "no CUDA execution provider"), strings.HasPrefix(reason, "CUDA libraries not found"):
		return "not checked (see above)"
	}
	return "loaded (" + runtime.CUDADriverLib + ")"
}

// nvidiaSMI lists the GPUs nvidia-smi sees, one line each; nil without
// nvidia-smi.
func nvidiaSMI() []string {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return nil
	}
	out, err := exec.Command("nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader").Output()
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return []string{"nvidia-smi failed: " + msg}
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
