// Package grad compiles an ONNX inference model into a training graph made
// only of default-domain (ai.onnx) operators, which stock ONNX Runtime runs
// on CPU and CUDA: reverse-mode differentiation over the graph, with one
// backward rule per operator written in standard operators.
//
// # Pipeline
//
// Build clones the model, rewrites nodes of opsets older than 18 into their
// opset-18 form (Split/Squeeze/Unsqueeze/Reduce* axes as inputs, Upsample
// as Resize, Clip/Pad/Slice attributes as inputs...), turns Constant nodes
// into initializers, runs the forward graph once through Config.Prober (a
// ShapeProber; ortprobe.Prober runs ONNX Runtime) at the training shapes to
// record every tensor's shape and element type, and folds
// every subgraph that does not depend on the inputs or on trainable
// parameters (Shape → Gather/Slice → Concat → Resize sizes...) into
// initializers. It then appends the loss, walks the nodes in reverse
// topological order applying each operator's rule, and prunes everything
// the requested outputs do not need. The emitted opset is max(model, 18).
//
// Shapes are static: the batch size and spatial size are fixed when the
// graph is built (Config.InputShapes). Build again for another size.
//
// Constants are whatever does not depend on the model's inputs or trainable
// parameters: initializers (also when IR < 4 lists them as graph inputs),
// Constant nodes, and every node computed from them only, Shape and Size
// included (Shape → Slice → Cast → Mul → Concat → Resize sizes, as tf2onnx
// writes them). Resize and opset-9 Upsample take their scales, sizes and
// ROI from any of these, and empty optional inputs ("") are absent. A
// backward rule that needs a computed value constant (Resize scales fed by
// a trainable tensor) fails with an UnsupportedError. Nodes with subgraphs
// (If, Loop, Scan) are refused outright: their branches read outer tensors
// the compiler does not track, so it could neither fold nor differentiate
// them.
//
// # Trainable parameters
//
// Config.Trainable patterns (globs, "re:" regular expressions) select only
// parameters, per the one rule onnx.NodeParameters shares with
// models/network: float initializers at a parameter input of their
// operator (Conv and ConvTranspose weight and bias, Gemm B and C, MatMul's
// right operand, the scale and bias of BatchNormalization,
// LayerNormalization, InstanceNormalization and GroupNormalization, PRelu
// slope), a per-channel bias or scale that an Add or Mul applies after a
// layer or normalisation (a Linear's bias, a decomposed LayerNorm's scale
// and bias, a layer scale), and a Gather's float table (a relative-position
// bias). So "*" never trains Resize scales, Reshape shapes, Pad values,
// Clip bounds, running statistics or scalar constants. An exact name (plain,
// or a regular expression matching only itself) selects the float
// initializer it names, whatever consumes it. A pattern that selects
// nothing is an UnsupportedError.
//
// # Operators
//
// Default-domain operators with a backward rule, by family (rules_*.go):
//
//   - elementwise: Add, Sub, Mul, Div, Sum, Neg, Where, Min, Max, Expand,
//     Sqrt, Reciprocal, Log, Abs (0 at x = 0), Pow (constant exponent
//     folded; a trainable exponent gets x^b·ln x);
//   - activations: Relu, LeakyRelu, PRelu, Clip, Sigmoid, Tanh, Exp, Erf,
//     Gelu (approximate "none" and "tanh"), HardSigmoid, HardSwish,
//     Softmax and LogSoftmax on any axis (older opsets' flattening
//     semantics upgraded);
//   - linear algebra: Gemm, MatMul (1-D operands, broadcast batch axes
//     summed back), Einsum (gradients are Einsums with permuted subscripts;
//     an ellipsis or a subscript repeated within one operand is refused,
//     naming the equation);
//   - normalisation: BatchNormalization (inference form),
//     LayerNormalization (any axis; the fused forward kept, its Mean and
//     InvStdDev outputs reused by the backward), InstanceNormalization,
//     GroupNormalization (per-group scale and bias before opset 21, per
//     channel from 21); their opset-13 decompositions (ReduceMean, Sub,
//     Pow, Sqrt, Div) are differentiated op by op;
//   - reductions: ReduceSum, ReduceMean (any axes, attribute or input),
//     ReduceMax (ties share the gradient evenly, as PyTorch's amax),
//     ReduceL2;
//   - convolution and pooling: Conv, ConvTranspose, MaxPool, AveragePool,
//     GlobalAveragePool; Resize (and Upsample, upgraded);
//   - indexing: Gather, GatherElements, TopK, CumSum;
//   - shape: Identity, Dropout (inference), Reshape, Flatten, Squeeze,
//     Unsqueeze, Transpose, Concat, Split, Slice, Pad, Cast.
//
// Comparisons, rounding, ArgMax/ArgMin, Shape and Size carry no gradient.
// The rules emit only operators with an ONNX Runtime CUDA kernel, which
// TestTrainingGraphsHaveCUDAKernels checks on whole training graphs against
// testdata/cuda_kernels.txt.
//
// # Losses
//
// Loss.Output names the tensor the loss reads: the first model output by
// default, or any intermediate tensor, such as the input of a final Softmax
// or Sigmoid; the model's outputs remain outputs and gradients flow only
// from the loss. Loss.ClassAxis is the logits' class axis: 1 (or 0) for
// [N, C, H, W], −1 for NHWC heads [N, H, W, C], which the loss subgraph
// transposes to class-axis-1 (and its gradient back). The target is int64,
// shaped like the logits without the class axis. LossCrossEntropy is
// softmax cross entropy over C classes; LossSigmoidBCE is the binary cross
// entropy of C independent sigmoid channels with no background channel
// (target 0 is background, k+1 turns channel k on), averaged over valid
// pixels and channels. Loss.Focal turns either into the focal loss
// ((1 − p_t)^γ times each element's term), and Loss.Dice adds a soft Dice
// term over the classes (channels) and Loss.Lovasz a Lovász-softmax term;
// Loss.NoPixel leaves those terms alone.
// All write their gradient directly (softmax − onehot, sigmoid − y, times
// the valid mask over the count, and the focal and Dice forms derived in
// loss.go) rather than differentiating their forward nodes.
//
// # Errors
//
// An UnsupportedError (errors.As) reports a valid model the compiler cannot
// handle — an operator without a rule, an attribute or input value its rule
// or opset upgrade does not cover (Resize mode "cubic", Dropout in training
// mode), a subgraph, a Constant or graph input of a kind it does not read,
// an opset older than 7, a pattern selecting nothing — with the node's name
// and operator where there is one. Other errors are malformed models or
// runtime failures.
//
// # Adding an operator
//
// An operator is one registration, in the init of the rules_*.go file of
// its family, next to its rule:
//
//	register("Clip", opSpec{rule: clipRule, nature: piecewiseLinear, upgrade: opsetUpgrade{11, upgradeClip}})
//
// Nothing else lists operators: the engine, the opset upgrade and the tests
// read the registry. The opSpec fields are
//
//   - rule, the backward rule (type rule), written in the same file. It
//     returns one gradient name per input, "" where none is needed (see
//     gradCtx.wants), reads constant inputs with constInts/constFloats and
//     returns unsupportedf(...) for an attribute or input value it does not
//     handle, which the caller receives as an UnsupportedError naming the
//     node.
//   - nature, how the outputs depend on the float inputs: smooth, linear,
//     multilinear, piecewiseLinear or piecewise for an operator with a rule
//     (register refuses a rule without one); stepwise (comparisons, Floor,
//     ArgMax) or shapeOnly (Shape, Size), with no rule, for an operator
//     through which no gradient flows. The whole-model checks read it to
//     freeze kinks and to recognise outputs affine in a parameter.
//   - indexOutputs, the outputs holding indices rather than values
//     (MaxPool's and TopK's Indices), into which no gradient flows.
//   - upgrade, for an operator whose signature changed before opset 18: the
//     first opset whose nodes need no rewriting and the function, in
//     upgrade.go, that rewrites older nodes into the opset-18 form.
//
// Then add a finite-difference case to the family's table in the tests
// (elementwiseCases, activationCases... listed in opTables in ops_test.go;
// TestOps runs them, in float64 where ONNX Runtime has double kernels) and,
// for an upgraded operator, a case at an opset older than its upgrade's
// first. TestEveryOperatorHasACase fails until both exist. A value the rule
// refuses gets a case in TestUnsupported (unsupported_test.go). An operator
// with kinks met in the whole models needs a recipe in frozenKinks
// (wholemodel_test.go), which fails naming it otherwise. An operator with
// learned parameters also needs their input positions in
// onnx.ParameterInputs, the table models/network shares.
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
