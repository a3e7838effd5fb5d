// Package ortprobe runs the gradient compiler's shape probe (grad.ShapeProber)
// in ONNX Runtime, so that onnx/grad itself stays graph → graph.
package ortprobe
