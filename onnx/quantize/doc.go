// Package quantize turns float32 ONNX models into deployment precisions:
// float16 (ToFloat16) and 8-bit static quantization in QDQ form
// (QuantizeLinear/DequantizeLinear pairs from the default ONNX domain,
// which stock ONNX Runtime fuses into its integer kernels).
//
// The package is pure graph rewriting and arithmetic; running models
// (calibration, element types, checks) is the caller's job (package
// deploy). Its rules follow onnxruntime.quantization's static QDQ
// quantizer for convolutional networks:
//
//   - weights of Conv, ConvTranspose, Gemm and MatMul are quantized
//     symmetrically to int8, per output channel by default
//     (scale = max|w| / 127, zero point 0);
//   - activations are quantized asymmetrically (uint8 by default, int8 on
//     request) with scale = (max − min) / (qmax − qmin) over a range that
//     always contains 0, and zero point round(qmin − min/scale);
//   - Conv biases become int32 with scale = input scale × weight scale and
//     zero point 0, dequantized by a DequantizeLinear node;
//   - a Relu or Clip that follows a quantized output is removed and its
//     output range used for that output: quantizing to a range that
//     starts at 0 clips as the Relu did;
//   - MaxPool, Resize and the data-movement operators (Reshape,
//     Transpose, Squeeze, Unsqueeze, Flatten) keep their input's scale and
//     zero point on their output;
//   - ranges come from a calibrator (MinMax, Percentile or Entropy, see
//     NewCalibrator) fed with the float model's tensors on sample inputs.
//
// Files: qparams.go (scales and zero points), weights.go (weight and bias
// tensors), histogram.go and calibrate.go (calibration), plan.go (which
// nodes and tensors are quantized), qdq.go (the QDQ rewrite), fp16.go (the
// float16 rewrite), graphedit.go (naming and graph helpers).
package quantize
