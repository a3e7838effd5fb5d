package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/runtime"
)

// WriteText writes the report as `segtune doctor` prints it: one line
// per finding, the CUDA libraries and the model's placement indented.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("memory limit:      %s (%s)", memlimit.Human(r.MemoryLimit), r.MemoryFrom)
	if r.ORTError != "" {
		p("ONNX Runtime:      not loaded: %s", r.ORTError)
	} else {
		p("ONNX Runtime:      %s (version %s)", r.ORTLibrary, r.ORTVersion)
		p("built-in providers: %s", strings.Join(r.Providers, ", "))
	}
	if r.CUDAProv != "" {
		kind := "plugin EP"
		if !r.CUDAPlugin {
			kind = "built-in CUDA support"
		}
		p("CUDA provider:     %s (%s)", r.CUDAProv, kind)
	} else {
		p("CUDA provider:     not found")
	}
	p("CUDA libraries:")
	for _, l := range r.CUDALibs {
		switch {
		case l.Path != "":
			p("  %-40s %s", l.Soname, l.Path)
		case l.Required:
			p("  %-40s MISSING (%s)", l.Soname, l.What)
		default:
			p("  %-40s not found (optional: %s)", l.Soname, l.What)
		}
	}
	if len(r.CUDAMissing) > 0 {
		p("  missing: %s", strings.Join(r.CUDAMissing, ", "))
	}
	p("NVIDIA driver:     %s", r.Driver)
	if len(r.NvidiaSMI) > 0 {
		p("GPUs (nvidia-smi): %s", strings.Join(r.NvidiaSMI, "; "))
	} else {
		p("GPUs (nvidia-smi): none seen (nvidia-smi absent)")
	}
	for _, d := range r.EPDevices {
		p("EP device:         %s on %s %s (vendor 0x%04x, device 0x%04x)", d.EP, d.Type, d.Vendor, d.VendorID, d.DeviceID)
	}
	if r.CUDAReady {
		p("CUDA sessions:     run on the GPU")
	} else if r.CUDAReason != "" {
		p("CUDA sessions:     fall back to the CPU: %s", r.CUDAReason)
	}
	r.writeModel(p)
}

// writeModel writes where the model's nodes ran, graph by graph, and what
// went wrong placing it.
func (r *Report) writeModel(p func(format string, a ...any)) {
	m := r.Model
	if m == nil {
		return
	}
	p("model %s at %v:", m.Path, m.InputDims)
	for _, g := range []struct {
		name string
		pl   *runtime.Placement
	}{{"inference", m.Inference}, {"training", m.Training}} {
		if g.pl == nil {
			continue
		}
		p("  %-9s nodes per provider %v", g.name, g.pl.PerEP)
		if len(g.pl.CPUNodes) > 0 {
			p("            on the CPU by op %v: %s", g.pl.CPUOps, strings.Join(g.pl.CPUNodes[:min(len(g.pl.CPUNodes), 20)], ", "))
		}
	}
	for _, e := range m.Errors {
		p("  %s", e)
	}
}
