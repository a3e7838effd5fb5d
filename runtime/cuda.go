package runtime

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// CUDADriverLib is the NVIDIA driver's CUDA library; without it there is no
// usable GPU.
const CUDADriverLib = "libcuda.so.1"

// CUDARouteEnv names the environment variable that picks how the CUDA
// provider is attached: "plugin" (RegisterExecutionProviderLibrary, then
// SessionOptionsAppendExecutionProvider_V2 on its GPU device) or "legacy"
// (AppendExecutionProviderCUDA, which needs an ONNX Runtime built with CUDA
// support). Unset: plugin when the provider library is a plugin EP.
const CUDARouteEnv = "SEGTUNE_CUDA_EP"

// cudaEPRegistration is the name segtune registers the CUDA provider
// library under.
const cudaEPRegistration = "segtune-cuda"

// CUDAProviderPath returns the CUDA execution provider library to use with
// the loaded ONNX Runtime: libonnxruntime_providers_cuda.so beside it, or the
// one `make ort-cuda` installed when the loaded library is of the same ONNX
// Runtime version. The error says what is missing in one line.
func CUDAProviderPath() (string, error) {
	lib := LibraryPath()
	if lib == "" {
		return "", errors.New("ONNX Runtime not loaded")
	}
	beside := filepath.Join(filepath.Dir(lib), CUDAProviderFile)
	if fileExists(beside) {
		return beside, nil
	}
	cached := filepath.Join(filepath.Dir(CachedCUDALibraryPath()), CUDAProviderFile)
	if v, _ := Version(); v == CUDAORTVersion && fileExists(cached) {
		return cached, nil
	}
	if fileExists(cached) {
		return "", fmt.Errorf("no CUDA execution provider for the ONNX Runtime loaded from %s (%s is not beside it); the CUDA build is installed at %s: load that one (unset %s, or point it there)",
			lib, CUDAProviderFile, CachedCUDALibraryPath(), LibraryEnv)
	}
	return "", fmt.Errorf("no CUDA execution provider: %s is not beside %s (run `make ort-cuda` to install the CUDA build of ONNX Runtime %s)", CUDAProviderFile, lib, CUDAORTVersion)
}

// isPluginEP reports whether the provider library is a plugin execution
// provider (exports CreateEpFactories), loaded with
// RegisterExecutionProviderLibrary, rather than one that ONNX Runtime's own
// CUDA support opens (AppendExecutionProviderCUDA).
func isPluginEP(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return false
	}
	for _, s := range syms {
		if s.Name == "CreateEpFactories" && s.Section != elf.SHN_UNDEF {
			return true
		}
	}
	return false
}

// cudaState is the outcome of preparing the CUDA provider, once per process.
type cudaState struct {
	once     sync.Once
	provider string
	plugin   bool
	libs     CUDALibraries
	devices  []EPDevice // the CUDA provider's GPU devices (plugin EPs)
	err      error
}

var cuda cudaState

// CUDADevices prepares the CUDA execution provider once per process — finds
// it and the CUDA libraries, loads those (RTLD_GLOBAL), registers the
// provider and asks it for its GPUs — and returns the GPUs. The error names
// what is missing (the provider, a library, the driver, a GPU) in one line.
// A provider that is not a plugin EP returns no devices and no error: it is
// appended by AppendExecutionProviderCUDA.
func CUDADevices() ([]EPDevice, error) {
	cuda.once.Do(func() { cuda.err = cuda.prepare() })
	return cuda.devices, cuda.err
}

func (c *cudaState) prepare() error {
	prov, err := CUDAProviderPath()
	if err != nil {
		return err
	}
	c.provider = prov
	c.plugin = isPluginEP(prov)
	switch route := os.Getenv(CUDARouteEnv); route {
	case "", "plugin":
	case "legacy":
		c.plugin = false
	default:
		return fmt.Errorf("%s=%q: want plugin or legacy", CUDARouteEnv, route)
	}
	c.libs = FindCUDALibraries()
	if missing := c.libs.Missing(); len(missing) > 0 {
		return errors.New(missingCUDAMessage(missing))
	}
	if err := dlopenGlobal(CUDADriverLib); err != nil {
		return fmt.Errorf("no NVIDIA driver: %s cannot be loaded (no GPU here?): %s", CUDADriverLib, firstLine(err.Error()))
	}
	for _, l := range c.libs.Found() {
		if err := dlopenGlobal(l.Path); err != nil && l.Required {
			return fmt.Errorf("loading %s (%s) from %s: %s", l.Soname, l.What, l.Path, firstLine(err.Error()))
		}
	}
	if !c.plugin {
		return nil
	}
	if err := ort.RegisterExecutionProviderLibrary(cudaEPRegistration, prov); err != nil {
		return fmt.Errorf("the CUDA execution provider %s failed to load: %s", prov, firstLine(err.Error()))
	}
	devs, err := EPDevices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Type == "gpu" && strings.Contains(strings.ToUpper(d.EP), "CUDA") {
			c.devices = append(c.devices, d)
		}
	}
	if len(c.devices) == 0 {
		return fmt.Errorf("no GPU: the CUDA execution provider (%s) found no CUDA device", prov)
	}
	return nil
}

// CUDAProviderInfo reports, after CUDADevices, which provider library was
// used and whether it is a plugin EP.
func CUDAProviderInfo() (path string, plugin bool) {
	return cuda.provider, cuda.plugin
}

// appendCUDA adds the CUDA provider to so: the plugin EP's device number
// opts.CUDADevice through SessionOptionsAppendExecutionProvider_V2, or
// AppendExecutionProviderCUDA for a provider built into ONNX Runtime.
func appendCUDA(so *ort.SessionOptions, opts Options) error {
	devs, err := CUDADevices()
	if err != nil {
		return err
	}
	if !cuda.plugin {
		co, err := ort.NewCUDAProviderOptions()
		if err != nil {
			return err
		}
		defer co.Destroy()
		kv := map[string]string{"device_id": fmt.Sprint(opts.CUDADevice)}
		for k, v := range opts.CUDAOptions {
			kv[k] = v
		}
		if err := co.Update(kv); err != nil {
			return err
		}
		return so.AppendExecutionProviderCUDA(co)
	}
	if opts.CUDADevice < 0 || opts.CUDADevice >= len(devs) {
		return fmt.Errorf("no CUDA device %d (%d found)", opts.CUDADevice, len(devs))
	}
	return appendEPDevice(so, devs[opts.CUDADevice], opts.CUDAOptions)
}

// cudaEPType is the provider type of the CUDA provider appendCUDA adds
// (what a custom operator's kernel names to run on it): the plugin EP's
// name, or the built-in provider's.
func cudaEPType(opts Options) string {
	if cuda.plugin && opts.CUDADevice >= 0 && opts.CUDADevice < len(cuda.devices) {
		return cuda.devices[opts.CUDADevice].EP
	}
	return cudaLegacyEP
}

// cudaFallbackLine is the one line printed when a session asked for CUDA
// runs on the CPU.
func cudaFallbackLine(err error) string {
	return fmt.Sprintf("segtune: CUDA unavailable: %s; running on the CPU", firstLine(err.Error()))
}
