// Package grad compiles an ONNX inference model into a training graph made
// only of default-domain (ai.onnx) operators, which stock ONNX Runtime runs
// on CPU and CUDA: reverse-mode differentiation over the graph, with one
// backward rule per operator written in standard operators.
//
// # Pipeline
//
// Build clones the model, rewrites nodes of opsets older than 13 into their
// opset-17 form (Split/Squeeze/Unsqueeze/ReduceSum axes as inputs, Upsample
// as Resize, Clip/Pad/Slice attributes as inputs...), turns Constant nodes
// into initializers, runs the forward graph once in ONNX Runtime at the
// training shapes to record every tensor's shape and element type, and folds
// every subgraph that does not depend on the inputs or on trainable
// parameters (Shape → Gather/Slice → Concat → Resize sizes...) into
// initializers. It then appends the loss, walks the nodes in reverse
// topological order applying each operator's rule, and prunes everything
// the requested outputs do not need. The emitted opset is max(model, 17).
//
// Shapes are static: the batch size and spatial size are fixed when the
// graph is built (Config.InputShapes). Build again for another size.
//
// # Graph conventions
//
// Training graph inputs, in order: the model's inputs (static shapes);
// "target" (int64 [N, d...]) and, with Loss.Scale, "loss_scale" (float [1])
// when a loss is requested; the trainable parameters under their initializer
// names (no longer initializers; frozen initializers stay constants); one
// "grad_in/<tensor>" per Config.GradInputs entry, shaped like the tensor.
//
// Training graph outputs, in order: "loss" (float [1], absent for LossNone);
// the model's outputs; Config.ExtraOutputs under their own names; one
// "grad/<param>" per trainable parameter, shaped like it.
//
// The values fed to grad_in/<tensor> are added to the gradient flowing into
// <tensor>, so an external term R contributes ∂R/∂tensor there (computed in
// Go, e.g. the regularizer's gradient with respect to pooled features).
// loss_scale multiplies the loss's gradient only, not the loss value nor the
// grad_in terms.
//
// The evaluation graph has the same inputs minus grad_in/* and the outputs
// minus grad/*. Internal tensors are named "bwd/...", "loss/..." and
// "upgrade/...". See WriteArtifacts for the files on disk.
package grad
