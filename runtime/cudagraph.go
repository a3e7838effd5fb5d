package runtime

import "maps"

// CUDA graphs: with the CUDA provider option enable_cuda_graph, ONNX Runtime
// captures a session's run as one CUDA graph after a few warm-up runs and
// replays it afterwards, one launch instead of a kernel launch per node.
// A replay reads and writes the addresses the capture saw, so the inputs and
// outputs must be bound (Binding) to fixed device tensors, and a session
// with several bindings names a graph for each through the run-config entry
// gpu_graph_id (Binding.SetRunConfig). ONNX Runtime refuses to create such
// a session when a node would run elsewhere than on the GPU (a CPU kernel
// costs copies that a graph cannot hold).
const (
	// CUDAGraphOption is the CUDA provider option that turns capture on.
	CUDAGraphOption = "enable_cuda_graph"
	// CUDAGraphIDKey is the run-config key naming a run's graph: 1, 2, …
	// (ONNX Runtime keeps 0 for itself and skips capture for -1).
	CUDAGraphIDKey = "gpu_graph_id"
)

// WithCUDAGraph returns opts with CUDA graph capture on (its CUDAOptions
// copied, not shared). A session opened with it is not moved to the CPU
// when the CUDA provider cannot open it: NewSession returns the error, so
// that the caller can open it again without graphs.
func WithCUDAGraph(opts Options) Options {
	co := maps.Clone(opts.CUDAOptions)
	if co == nil {
		co = map[string]string{}
	}
	co[CUDAGraphOption] = "1"
	opts.CUDAOptions = co
	return opts
}

// capturesGraphs reports whether opts asks for CUDA graph capture.
func capturesGraphs(opts Options) bool { return opts.CUDAOptions[CUDAGraphOption] == "1" }
