// Package deploy exports segmentation models for deployment: it converts
// a float32 model to float16 or to a calibrated 8-bit QDQ model (package
// onnx/quantize does the graph work), runs the float model in ONNX
// Runtime to calibrate on the user's images, and checks every exported
// model against the float one before it is written: it must load in
// ONNX Runtime, keep the model's contract, and predict the same labels on
// sample images (pixel agreement, and mean IoU of each against masks when
// there are masks).
//
// Export (export.go) is the whole job: convert, check, then write. A
// caller that starts from file names fills a Request; Prepare chooses and
// screens its images, Prepared.Load and Prepared.Plan make Export's Plan
// (request.go).
//
// Files: types.go (element types from ONNX Runtime), calibrate.go
// (activation ranges), convert.go (precision conversion), check.go (the
// comparison), kernels.go (what ONNX Runtime runs the model with),
// report.go (the report, JSON and text).
package deploy
