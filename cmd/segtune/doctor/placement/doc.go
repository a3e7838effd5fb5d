// Package placement finds where ONNX Runtime places a model's nodes on
// the CUDA provider: it runs the model's inference graph, and the
// training graph compiled from it, once each with ORT's profiler on and
// reads from the profile which nodes ran on the GPU and which fell back
// to the CPU.
package placement
