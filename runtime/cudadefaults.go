package runtime

import "maps"

// CUDAConvSearch is the CUDA provider option that picks how cuDNN chooses
// a convolution algorithm: EXHAUSTIVE (the provider's default: time every
// candidate), HEURISTIC (cuDNN's pick, no timing) or DEFAULT.
const CUDAConvSearch = "cudnn_conv_algo_search"

// HalfPrecisionCUDAOptions returns opts with the CUDA provider defaults for
// training in half precision (half true: fp16 or bf16): cuDNN's heuristic
// convolution search. Under the exhaustive default cuDNN's frontend found
// no plan for the half-precision convolutions and searched again at every
// step: 2970 ms a step against 98 ms with HEURISTIC (DeepLabV3+
// MobileNetV2, batch 8 at 512², H200, bench/gpu/README.md). A key opts
// already has is kept, so callers override it; opts itself is not
// changed. Nil comes back for nil opts when there is nothing to add.
func HalfPrecisionCUDAOptions(opts map[string]string, half bool) map[string]string {
	if !half {
		return opts
	}
	if _, set := opts[CUDAConvSearch]; set {
		return opts
	}
	out := maps.Clone(opts)
	if out == nil {
		out = map[string]string{}
	}
	out[CUDAConvSearch] = "HEURISTIC"
	return out
}
