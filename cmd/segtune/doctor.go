package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// doctorReport is what `segtune doctor` finds.
type doctorReport struct {
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
	Model       *modelPlacement    `json:"model,omitempty"`
	MemoryLimit int64              `json:"memory_limit_bytes"`
	MemoryFrom  string             `json:"memory_limit_from"`
}

// modelPlacement says where ONNX Runtime placed a model's nodes on CUDA.
type modelPlacement struct {
	Path      string             `json:"path"`
	InputDims []int64            `json:"input_dims"`
	Inference *runtime.Placement `json:"inference,omitempty"`
	Training  *runtime.Placement `json:"training,omitempty"`
	Errors    []string           `json:"errors,omitempty"`
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "report ONNX Runtime, its providers, the CUDA libraries and GPUs, and where a model's nodes run",
		Description: "Loads ONNX Runtime as --device cuda would (the CUDA build `make ort-cuda` installs comes first),\n" +
			"lists the providers, the CUDA 13 and cuDNN 9 libraries found (with paths) and missing, the NVIDIA\n" +
			"driver and GPUs, and says whether --device cuda would run on the GPU or why not. With --model,\n" +
			"it runs the model's inference graph and its training graph once on the CUDA provider and reports\n" +
			"the nodes ONNX Runtime placed on the CPU. It also says segtune's memory limit and which bound set it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "ONNX model whose inference and training graphs are placed on the GPU"},
			&cli.StringFlag{Name: "size", Value: "257x257", Usage: "HxW for the model's dynamic spatial dimensions"},
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			r := runDoctor(c.String("ort-lib"), c.String("model"), c.String("size"))
			if c.Bool("json") {
				return printJSON(os.Stdout, r)
			}
			r.writeText(os.Stdout)
			return nil
		},
	}
}

func runDoctor(ortLib, model, size string) *doctorReport {
	r := &doctorReport{}
	r.MemoryLimit, r.MemoryFrom = memlimit.Limit()
	libs := runtime.FindCUDALibraries()
	r.CUDALibs, r.CUDAMissing, r.CUDASearch = libs.Libs, libs.Missing(), libs.Searched
	if r.CUDAMissing == nil {
		r.CUDAMissing = []string{}
	}
	r.NvidiaSMI = nvidiaSMI()
	if err := runtime.InitFor(ortLib, runtime.DeviceCUDA); err != nil {
		r.ORTError = err.Error()
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
	if model != "" {
		r.Model = placeModel(model, size, r.CUDAReady)
	}
	return r
}

// driverStatus says whether libcuda.so.1 was loaded, from CUDADevices' error.
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

func nvidiaSMI() []string {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return nil
	}
	out, err := exec.Command("nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader").Output()
	if err != nil {
		return []string{"nvidia-smi failed: " + firstLineOf(err.Error())}
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// placeModel runs the model's inference and training graphs once on the
// CUDA provider with profiling and reports the placement.
func placeModel(path, size string, cudaReady bool) *modelPlacement {
	mp := &modelPlacement{Path: path}
	if err := mp.place(path, size, cudaReady); err != nil {
		mp.Errors = append(mp.Errors, err.Error())
	}
	return mp
}

// place runs the model, and the training graph compiled from it, once on
// CUDA at size (HxW, for its dynamic dimensions) and records where their
// nodes ran. An error ends the check; a session that fails is recorded in
// mp.Errors and the check goes on.
func (mp *modelPlacement) place(path, size string, cudaReady bool) error {
	if !cudaReady {
		return errors.New("CUDA unavailable: placement not checked")
	}
	var h, w int64 = 257, 257
	if _, err := fmt.Sscanf(size, "%dx%d", &h, &w); err != nil {
		return errors.New("bad --size " + size)
	}
	m, err := onnx.Load(path)
	if err != nil {
		return err
	}
	ins := onnx.DataInputs(m.Proto.Graph)
	if len(ins) == 0 {
		return errors.New("model has no input")
	}
	var dims []int64
	for i, d := range ins[0].GetType().GetTensorType().GetShape().GetDim() {
		v := d.GetDimValue()
		if v <= 0 {
			v = []int64{1, 3, h, w}[min(i, 3)]
		}
		dims = append(dims, v)
	}
	mp.InputDims = dims
	dir, err := os.MkdirTemp("", "segtune-doctor")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pl := &placer{mp: mp, dir: dir, rng: rand.New(rand.NewPCG(1, 2)), dims: dims}
	mp.Inference = pl.run("inference", data, nil)
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{ins[0].GetName(): dims}})
	if err != nil {
		return fmt.Errorf("training graph: %w", err)
	}
	tdata, err := gs.Training.Marshal()
	if err != nil {
		return fmt.Errorf("training graph: %w", err)
	}
	params := map[string]*runtime.Tensor{}
	for _, p := range gs.Params {
		if v, err := onnx.Float32s(p); err == nil {
			params[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
		}
	}
	mp.Training = pl.run("training", tdata, params)
	return nil
}

// placer runs graphs on CUDA with ORT's profiler on, feeding them random
// images of dims.
type placer struct {
	mp   *modelPlacement
	dir  string
	rng  *rand.Rand
	dims []int64
}

// run runs model once and reads where its nodes ran from the profile;
// params feed the training graph's parameters, a zero target and a unit
// loss scale its other inputs.
func (pl *placer) run(name string, model []byte, params map[string]*runtime.Tensor) *runtime.Placement {
	prefix := filepath.Join(pl.dir, name)
	s, err := runtime.NewSession(model, runtime.Options{Device: runtime.DeviceCUDA, Log: io.Discard,
		Tuning: runtime.Tuning{ProfilePrefix: prefix}})
	if err != nil {
		pl.mp.Errors = append(pl.mp.Errors, name+": "+err.Error())
		return nil
	}
	if s.Device != runtime.DeviceCUDA {
		s.Close()
		pl.mp.Errors = append(pl.mp.Errors, name+": the session fell back to the CPU")
		return nil
	}
	_, err = s.Run(pl.feed(s, params)...)
	s.Close()
	if err != nil {
		pl.mp.Errors = append(pl.mp.Errors, name+": "+err.Error())
		return nil
	}
	p, err := runtime.ProfilePlacement(prefix)
	if err != nil {
		pl.mp.Errors = append(pl.mp.Errors, name+": "+err.Error())
	}
	return p
}

func (pl *placer) feed(s *runtime.Session, params map[string]*runtime.Tensor) []*runtime.Tensor {
	dims := pl.dims
	var out []*runtime.Tensor
	for _, x := range s.Inputs {
		switch {
		case x.Name == grad.TargetName && params != nil:
			v := make([]int64, dims[0]*dims[2]*dims[3])
			out = append(out, runtime.NewInt64([]int64{dims[0], dims[2], dims[3]}, v))
		case params[x.Name] != nil:
			out = append(out, params[x.Name])
		case x.Name == grad.LossScaleName && params != nil:
			out = append(out, runtime.NewFloat32([]int64{1}, []float32{1}))
		default:
			out = append(out, runtime.NewRandomNormal(pl.rng, dims...))
		}
	}
	return out
}

func (r *doctorReport) writeText(w io.Writer) {
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
		p("--device cuda:     runs on the GPU")
	} else if r.CUDAReason != "" {
		p("--device cuda:     falls back to the CPU: %s", r.CUDAReason)
	}
	if m := r.Model; m != nil {
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
}
