package runtime

import (
	"fmt"
	"io"
	"os"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Device names an execution target.
const (
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
	DeviceAuto = "auto" // CUDA when its provider and a GPU are present, else CPU
)

// Options configures a session.
type Options struct {
	// Device is "cpu" (default), "cuda" or "auto". "cuda" and "auto" fall back
	// to the CPU with a message on Log when the CUDA provider or a GPU is missing.
	Device string
	// CUDADevice is the GPU ordinal for the CUDA provider.
	CUDADevice int
	// CUDAOptions are CUDA provider options (e.g. "use_tf32": "0",
	// "cudnn_conv_algo_search": "HEURISTIC"); nil keeps its defaults.
	CUDAOptions map[string]string
	// Threads sets ONNX Runtime's intra-op thread count; 0 lets it choose.
	Threads int
	// NoOptimize disables graph optimisations (useful for gradient checks,
	// where fused kernels change rounding).
	NoOptimize bool
	// Log receives fallback notices; nil means os.Stderr.
	Log io.Writer
	// Tuning holds optional performance settings (profiling, executor,
	// arena); the zero value keeps the defaults. See tuning.go.
	Tuning Tuning
	// ConvGradCUDA registers the cuDNN kernel of segtune's ConvGrad
	// operator (com.segtune) on a CUDA session, with the TF32 and algorithm
	// search settings of CUDAOptions (use_tf32, cudnn_conv_algo_search).
	// Without cuDNN 9 the CUDA session fails and the fallback line names
	// it; a session that falls back to the CPU gets the CPU kernel instead,
	// so the same graph still runs.
	ConvGradCUDA bool
	// ConvGradCPU registers ConvGrad's CPU kernel (float and double): for
	// tests and CPU checks of graphs that hold ConvGrad nodes.
	ConvGradCPU bool
}

// IOInfo describes one input or output of a session.
type IOInfo struct {
	Name string
	// Shape uses -1 for dynamic dimensions.
	Shape []int64
	// Type is the element type: float32, float64, float16, int64, int32,
	// uint8, bool, ...
	Type string
}

// Session is an ONNX Runtime inference session. A Session is safe for
// concurrent Run calls, as ONNX Runtime sessions are.
type Session struct {
	Inputs  []IOInfo
	Outputs []IOInfo
	// Device is where the session actually runs: "cpu" or "cuda".
	Device   string
	sess     *ort.DynamicAdvancedSession
	convGrad *convGradRegistration // outlives sess
}

// NewSession opens a session on a serialized ONNX model. Init must have
// succeeded first.
func NewSession(model []byte, opts Options) (*Session, error) {
	if LibraryPath() == "" {
		if err := Init(""); err != nil {
			return nil, err
		}
	}
	log := opts.Log
	if log == nil {
		log = os.Stderr
	}
	var s *Session
	if ins, outs, err := ort.GetInputOutputInfoWithONNXData(model); err == nil {
		s = &Session{Inputs: ioInfos(ins), Outputs: ioInfos(outs)}
	} else {
		// ONNX Runtime reads them through a temporary CPU session, which
		// fails for graphs only another provider can run (float64 Conv
		// has CUDA kernels and no CPU one): read the graph instead.
		pin, pout, perr := graphIO(model)
		if perr != nil {
			return nil, fmt.Errorf("reading model inputs and outputs: %w", err)
		}
		s = &Session{Inputs: pin, Outputs: pout}
	}
	device := strings.ToLower(opts.Device)
	switch device {
	case "", DeviceCPU:
		device = DeviceCPU
	case DeviceCUDA, DeviceAuto:
	default:
		return nil, fmt.Errorf("unknown device %q (want cpu, cuda or auto)", opts.Device)
	}
	if device != DeviceCPU {
		sess, reg, err := s.open(model, opts, true)
		if err == nil {
			s.sess, s.convGrad, s.Device = sess, reg, DeviceCUDA
			return s, nil
		}
		if capturesGraphs(opts) { // the caller opens it again without graphs (WithCUDAGraph)
			return nil, err
		}
		fmt.Fprintln(log, cudaFallbackLine(err))
	}
	sess, reg, err := s.open(model, opts, false)
	if err != nil {
		return nil, err
	}
	s.sess, s.convGrad, s.Device = sess, reg, DeviceCPU
	return s, nil
}

// ReadIO returns a serialized model's data inputs and outputs as ONNX
// Runtime reads them, with the element types it infers for outputs whose
// graph entry records no type. Init must have succeeded first.
func ReadIO(model []byte) (inputs, outputs []IOInfo, err error) {
	if LibraryPath() == "" {
		if err := Init(""); err != nil {
			return nil, nil, err
		}
	}
	ins, outs, err := ort.GetInputOutputInfoWithONNXData(model)
	if err != nil {
		return nil, nil, err
	}
	return ioInfos(ins), ioInfos(outs), nil
}

func (s *Session) open(model []byte, opts Options, useCUDA bool) (_ *ort.DynamicAdvancedSession, _ *convGradRegistration, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, err
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, nil, err
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return nil, nil, err
		}
	}
	if opts.NoOptimize {
		if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
			return nil, nil, err
		}
	}
	if err := opts.Tuning.apply(so); err != nil {
		return nil, nil, err
	}
	if useCUDA {
		if err := appendCUDA(so, opts); err != nil {
			return nil, nil, err
		}
	}
	// The CPU kernel also serves a ConvGradCUDA session that fell back to
	// the CPU, which holds the same ConvGrad nodes.
	cgCUDA := useCUDA && opts.ConvGradCUDA
	cgCPU := opts.ConvGradCPU || (!useCUDA && opts.ConvGradCUDA)
	var reg *convGradRegistration
	if cgCPU || cgCUDA {
		ep := ""
		if cgCUDA {
			ep = cudaEPType(opts)
		}
		if reg, err = registerConvGrad(so, cgCPU, cgCUDA, ep, opts.CUDAOptions); err != nil {
			return nil, nil, err
		}
		defer func() {
			if err != nil {
				reg.release()
			}
		}()
	}
	names := func(infos []IOInfo) []string {
		out := make([]string, len(infos))
		for i, x := range infos {
			out[i] = x.Name
		}
		return out
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(model, names(s.Inputs), names(s.Outputs), so)
	if err != nil {
		return nil, nil, fmt.Errorf("creating ONNX Runtime session: %w", err)
	}
	return sess, reg, nil
}

// Close releases the session.
func (s *Session) Close() error {
	if s.sess == nil {
		return nil
	}
	err := s.sess.Destroy()
	s.sess = nil
	s.convGrad.release()
	s.convGrad = nil
	return err
}

// Run feeds inputs in the order of s.Inputs and returns all outputs in the
// order of s.Outputs, copied into Go memory.
func (s *Session) Run(inputs ...*Tensor) ([]*Tensor, error) {
	return s.RunInto(nil, inputs...)
}

// RunInto is Run with caller-owned outputs: where outputs[i] is not nil
// (outputs may be shorter than s.Outputs, or nil), ONNX Runtime writes output
// i straight into its memory, which must have the output's shape and element
// type, instead of into a fresh Go copy. Passing the previous call's result
// back makes a step loop allocate and copy nothing (a training step's
// gradients are the parameters' size). It returns every output, outputs[i]
// itself where given.
func (s *Session) RunInto(outputs []*Tensor, inputs ...*Tensor) ([]*Tensor, error) {
	if len(inputs) != len(s.Inputs) {
		return nil, fmt.Errorf("model takes %d inputs, got %d", len(s.Inputs), len(inputs))
	}
	if len(outputs) > len(s.Outputs) {
		return nil, fmt.Errorf("model has %d outputs, got %d to fill", len(s.Outputs), len(outputs))
	}
	in := make([]ort.Value, len(inputs))
	out := make([]ort.Value, len(s.Outputs))
	given := make([]bool, len(s.Outputs))
	defer func() {
		for _, v := range in {
			if v != nil {
				v.Destroy()
			}
		}
		for i, v := range out {
			if v != nil && given[i] {
				v.Destroy()
			}
		}
	}()
	for i, t := range inputs {
		v, err := t.ortValue()
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", s.Inputs[i].Name, err)
		}
		in[i] = v
	}
	for i, t := range outputs {
		if t == nil {
			continue
		}
		v, err := t.ortValue()
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", s.Outputs[i].Name, err)
		}
		out[i], given[i] = v, true
	}
	if err := s.sess.Run(in, out); err != nil {
		return nil, err
	}
	res := make([]*Tensor, len(out))
	var firstErr error
	for i, v := range out {
		if given[i] {
			res[i] = outputs[i]
			continue
		}
		if v == nil {
			continue
		}
		t, err := fromOrt(v)
		v.Destroy()
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("output %q: %w", s.Outputs[i].Name, err)
		}
		res[i] = t
	}
	return res, firstErr
}

// InputIndex returns the position of the named input, or -1.
func (s *Session) InputIndex(name string) int {
	for i, x := range s.Inputs {
		if x.Name == name {
			return i
		}
	}
	return -1
}

// OutputIndex returns the position of the named output, or -1.
func (s *Session) OutputIndex(name string) int {
	for i, x := range s.Outputs {
		if x.Name == name {
			return i
		}
	}
	return -1
}

func ioInfos(in []ort.InputOutputInfo) []IOInfo {
	out := make([]IOInfo, len(in))
	for i, x := range in {
		out[i] = IOInfo{Name: x.Name, Shape: []int64(x.Dimensions.Clone()), Type: typeName(x.DataType)}
	}
	return out
}

// typeName turns ONNX Runtime's element type into a short Go-style name.
func typeName(t ort.TensorElementDataType) string {
	s := strings.ToLower(strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_"))
	switch s {
	case "float":
		return "float32"
	case "double":
		return "float64"
	}
	return s
}

// elemTypeName names an ONNX element type (ONNX Runtime's enumeration is
// ONNX's) as typeName does.
func elemTypeName(e int) string { return typeName(ort.TensorElementDataType(e)) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
