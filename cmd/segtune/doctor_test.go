package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/segtune/segtune/cmd/segtune/doctor"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestDoctorJSON: doctor reports the loaded ONNX Runtime, the CUDA libraries
// looked for, and — without a GPU — one line saying why --device cuda runs
// on the CPU.
func TestDoctorJSON(t *testing.T) {
	runtimetest.Require(t)
	out, err := runCLI(t, "doctor", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if r.ORTLibrary != runtime.LibraryPath() || r.ORTVersion == "" {
		t.Errorf("library %q version %q", r.ORTLibrary, r.ORTVersion)
	}
	if len(r.CUDALibs) == 0 || r.CUDAMissing == nil {
		t.Errorf("no CUDA library report: %+v", r)
	}
	if !r.CUDAReady && (r.CUDAReason == "" || strings.Contains(r.CUDAReason, "\n")) {
		t.Errorf("reason %q", r.CUDAReason)
	}
	cpu := false
	for _, d := range r.EPDevices {
		cpu = cpu || d.EP == "CPUExecutionProvider"
	}
	if !cpu {
		t.Errorf("EP devices %+v", r.EPDevices)
	}
}
