package doctor

import (
	"strings"
	"testing"

	"github.com/segtune/segtune/cmd/segtune/doctor/placement"
	"github.com/segtune/segtune/runtime"
)

// The driver line follows from why CUDA is unavailable: a missing
// libcuda.so.1 is named, a missing provider or library leaves the driver
// unchecked, and any other reason came after the driver loaded.
func TestDriverStatus(t *testing.T) {
	for reason, want := range map[string]string{
		"": "loaded (libcuda.so.1)",
		"no NVIDIA driver: libcuda.so.1 cannot be loaded (no GPU here?): x": "missing: libcuda.so.1 cannot be loaded",
		"no CUDA execution provider in this build":                          "not checked (see above)",
		"CUDA libraries not found: libcublas.so.13":                         "not checked (see above)",
		"cudaGetDeviceCount: no CUDA-capable device is detected":            "loaded (libcuda.so.1)",
	} {
		if got := driverStatus(reason); got != want {
			t.Errorf("driverStatus(%q) = %q, want %q", reason, got, want)
		}
	}
}

// The text form: ORT's failure instead of its providers, each CUDA
// library found, missing or optional, no GPU, the CPU fallback's reason
// and the model's placement with at most 20 CPU nodes.
func TestWriteText(t *testing.T) {
	cpu := make([]string, 25)
	for i := range cpu {
		cpu[i] = "n" + string(rune('a'+i)) + " (Conv)"
	}
	r := &Report{
		ORTError: "libonnxruntime.so: cannot open", MemoryLimit: 3 << 30, MemoryFrom: "cgroup",
		CUDALibs: []runtime.CUDALib{
			{Soname: "libcublas.so.13", What: "cuBLAS 13", Required: true, Path: "/x/libcublas.so.13"},
			{Soname: "libcudnn.so.9", What: "cuDNN 9", Required: true},
			{Soname: "libnvrtc.so.13", What: "NVRTC"},
		},
		CUDAMissing: []string{"libcudnn.so.9"}, Driver: "not checked", CUDAReason: "CUDA libraries not found",
		Model: &placement.Report{Path: "m.onnx", InputDims: []int64{1, 3, 8, 8},
			Inference: &runtime.Placement{PerEP: map[string]int{"CUDAExecutionProvider": 3}, CPUNodes: cpu, CPUOps: map[string]int{"Conv": 25}},
			Errors:    []string{"training graph: boom"}},
	}
	var b strings.Builder
	r.WriteText(&b)
	got := b.String()
	for _, want := range []string{
		"memory limit:      3.0 GiB (cgroup)\n",
		"ONNX Runtime:      not loaded: libonnxruntime.so: cannot open\n",
		"CUDA provider:     not found\n",
		"  libcublas.so.13" + strings.Repeat(" ", 25) + " /x/libcublas.so.13\n",
		"  libcudnn.so.9" + strings.Repeat(" ", 27) + " MISSING (cuDNN 9)\n",
		"not found (optional: NVRTC)\n",
		"  missing: libcudnn.so.9\n",
		"GPUs (nvidia-smi): none seen (nvidia-smi absent)\n",
		"CUDA sessions:     fall back to the CPU: CUDA libraries not found\n",
		"model m.onnx at [1 3 8 8]:\n",
		"  inference nodes per provider map[CUDAExecutionProvider:3]\n",
		"  training graph: boom\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "built-in providers") || !strings.Contains(got, "nt (Conv)") || strings.Contains(got, "nu (Conv)") {
		t.Errorf("providers listed without ORT, or more than 20 CPU nodes:\n%s", got)
	}
}

// A --size that does not read is the model's error where CUDA would run
// it, its setting named the caller's way.
func TestPlaceRefusesBadSize(t *testing.T) {
	r := &Report{CUDAReady: true}
	r.Place("m.onnx", "big", func(key string) string { return "--" + key })
	if r.Model == nil || len(r.Model.Errors) != 1 || r.Model.Errors[0] != "bad --size big" {
		t.Errorf("model report %+v, want the error bad --size big", r.Model)
	}
}
