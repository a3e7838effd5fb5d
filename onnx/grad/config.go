package grad

import (
	"fmt"
	"regexp"
	"strings"
)

// Names of the tensors the compiler adds to a model.
const (
	// LossName is the loss output, shape [1].
	LossName = "loss"
	// TargetName is the int64 class-index input of the loss.
	TargetName = "target"
	// LossScaleName is the optional input of shape [1] that multiplies the loss's
	// gradient (not the loss value), for loss scaling or term weighting.
	LossScaleName = "loss_scale"
	// GradPrefix + p names the gradient output of trainable parameter p.
	GradPrefix = "grad/"
	// GradInPrefix + t names the input whose values are added to the
	// gradient flowing into intermediate tensor t ("extra upstream gradient").
	GradInPrefix = "grad_in/"
	// DefaultIgnoreIndex is the target value the loss skips unless told otherwise.
	DefaultIgnoreIndex = 255
)

// LossKind selects the loss subgraph.
type LossKind int

const (
	// LossCrossEntropy is softmax cross entropy over axis 1 of logits
	// [N, C, d1, ...] (pixel-wise for [N,C,H,W], classifier for [N,C]) with
	// int64 targets [N, d1, ...]; the mean over non-ignored elements, weighted
	// like PyTorch's CrossEntropyLoss(weight=w, ignore_index=i): the sum of
	// w[t]·(−log p_t) divided by the sum of w[t] over valid elements (0 when
	// there are none, where PyTorch gives NaN).
	LossCrossEntropy LossKind = iota
	// LossNone adds no loss: gradients come only from the extra upstream
	// gradient inputs (GradInputs). Useful for external losses and checks.
	LossNone
	// LossSigmoidBCE is the binary cross entropy of a sigmoid multi-label
	// head with no background channel: logits [N, C, d1, ...], one channel
	// per foreground class, and int64 targets [N, d1, ...] where 0 is
	// background (every channel negative) and k+1 makes channel k positive.
	// The loss is the mean over valid elements and channels of
	// softplus(z) − y·z, like PyTorch's BCEWithLogitsLoss(weight=w) with
	// w = ClassWeights (one per channel) broadcast over the channel axis and
	// the ignored elements left out of sum and count (0 when none is valid).
	LossSigmoidBCE
)

// Loss describes the loss subgraph appended to the model.
type Loss struct {
	Kind LossKind
	// Output is the tensor holding the logits; "" means the first model
	// output. It may be an intermediate tensor, e.g. the input of a final
	// Softmax or Sigmoid: the loss reads it, the model's outputs stay
	// outputs, and gradients flow only from the loss.
	Output string
	// ClassAxis is the logits' class axis: 0 or 1 mean axis 1 ([N, C, H, W]);
	// -1 (or rank−1) means the last axis (NHWC heads, [N, H, W, C]); other
	// negative values count from the end. The target is int64 shaped like
	// the logits without the class axis.
	ClassAxis int
	// IgnoreIndex is the target value that contributes nothing; nil means
	// DefaultIgnoreIndex. NoIgnore disables ignoring altogether.
	IgnoreIndex *int64
	NoIgnore    bool
	// ClassWeights, when set, has one weight per class (C values): per
	// target class for LossCrossEntropy, per channel for LossSigmoidBCE.
	ClassWeights []float64
	// Focal, when positive, is the focusing parameter γ of the focal loss
	// (Lin et al. 2017): each element's cross-entropy term is multiplied by
	// (1 − p_t)^γ, p_t the probability of its true class (of its true
	// label per channel for LossSigmoidBCE). 0 is the plain loss; at most 10.
	Focal float64
	// Dice, when positive, adds that multiple of the soft Dice loss over
	// the classes (channels for LossSigmoidBCE) to the pixel loss:
	// 1 − the class-weighted mean of (2·Σp·y + 1)/(Σp + Σy + 1), sums over
	// the batch's valid elements. At most 1000.
	Dice float64
	// Lovasz, when positive, adds that multiple of the Lovász-softmax loss
	// (Berman et al. 2018), the convex surrogate of 1 − IoU, averaged over
	// the classes present in the batch's targets. Softmax heads only.
	// At most 1000.
	Lovasz float64
	// NoPixel drops the pixel loss (cross entropy or focal): the loss is
	// the Dice and Lovász terms alone, which must not both be 0.
	NoPixel bool
	// Scale adds the LossScaleName input.
	Scale bool
}

// Config says what to differentiate and at which shapes.
type Config struct {
	// Trainable lists patterns of initializer names whose gradients are
	// wanted. A pattern is a glob (* matches any run of characters, ? one
	// character) matched against the whole name, or, with the prefix "re:",
	// a regular expression that must match the whole name. Patterns select
	// only parameters (onnx.ParameterNames: Conv/ConvTranspose weight and
	// bias, Gemm B and C, MatMul's right operand, the normalisations' scale
	// and bias, PRelu slope, a per-channel bias or scale added or multiplied
	// after a layer or normalisation, a Gather's float table), never Resize
	// scales, Reshape shapes or an architecture's scalar constants. An exact
	// name — plain (no * ? [) or a regular expression matching only itself,
	// like "re:"+regexp.QuoteMeta(name) — selects the float initializer it
	// names, whatever consumes it. Every entry must match at least one.
	Trainable []string
	// InputShapes gives the static training shape of each model input
	// (batch included). Inputs whose declared shape is fully static may be
	// left out. The training graph is specialised to these shapes: the batch
	// size is fixed at build time.
	InputShapes map[string][]int64
	Loss        Loss
	// ExtraOutputs names intermediate tensors to expose as extra outputs
	// (under their own names), e.g. the features feeding the classifier.
	ExtraOutputs []string
	// GradInputs names intermediate (or output) tensors that receive an
	// extra upstream gradient through the input GradInPrefix+name.
	GradInputs []string
	// Prober runs the forward graph once to learn shapes and element types
	// (ortprobe.Prober: ONNX Runtime). Required.
	Prober ShapeProber
	// DirectConvs keeps every convolution a Conv node and every strided
	// input gradient a ConvTranspose. By default large 3×3 convolutions are
	// rewritten into Winograd F(2,3) form (standard operators; same results
	// up to float rounding) and one-channel strided input gradients use
	// Col2Im, which run faster in ONNX Runtime's CPU provider; GPU sessions,
	// whose cuDNN convolutions pick their own algorithms and which have no
	// Col2Im kernel, should set it.
	DirectConvs bool
	// WeightGradConv writes every non-pointwise Conv weight gradient as one
	// Conv with the roles of input and kernel transposed (x as [Ci, N, …]
	// correlated with dy as [Co, N, …]), which cuDNN runs as a weight-
	// gradient convolution, instead of im2col patches and a batched MatMul,
	// which suit ONNX Runtime's CPU GEMMs but materialise kh·kw copies of
	// the input (0.9 GB per decoder conv at batch 8, 512²).
	WeightGradConv bool
	// MatrixReductions writes each sum over axes that are not one
	// contiguous run (a bias gradient's N, H and W) as one ReduceSum per
	// run. ONNX Runtime's CUDA provider runs a contiguous reduction with its
	// own matrix-reduction kernels and any other through cuDNN, whose
	// reductions took 15 of 114 ms of kernel time in a float32 MobileNetV2
	// step on an H200, and 0.78 ms a call whatever the tensor's size in a
	// float16 one (117 calls in a 98 ms step). GPU sessions should set it;
	// the CPU provider's reductions need not.
	MatrixReductions bool
	// ConvGrad names the convolution classes whose backward pass is one
	// ConvGrad node of segtune's own operator domain (ConvGradDomain)
	// instead of standard operators: on CUDA a cuDNN backward-data and
	// backward-filter call each (runtime.Options.ConvGradCUDA registers
	// the kernels; the CPU kernel is for checks). 2-D convolutions only;
	// other convolutions keep today's forms. Zero writes no ConvGrad node.
	ConvGrad ConvClasses
	// MinOpset is the lowest default-domain opset the graphs declare
	// (targetOpset when lower): 22 for bfloat16 convolutions
	// (autocast.BFloat16.MinOpset).
	MinOpset int64
	// WhereMasks writes the backward pass of Relu, Clip and the other
	// masked activations as one Where(mask, dy, 0) instead of dy times
	// Cast(mask): one kernel instead of two on CUDA, as PyTorch runs it.
	// ONNX Runtime's CPU Where is slower than Cast + Mul: GPU sessions
	// should set it.
	WhereMasks bool
	// OmitModelOutputs leaves the model's outputs (the logits) out of the
	// training graph's outputs unless ExtraOutputs names them, for callers
	// that read only the loss, the gradients and their ExtraOutputs: a
	// step then copies no logits out, and nodes only an unread output
	// needs are pruned. The evaluation graph keeps them.
	OmitModelOutputs bool
}

// isLiteral reports whether a Trainable entry names one tensor exactly: a
// plain name, or a regular expression that matches only itself (such as
// "re:" + regexp.QuoteMeta(name), which callers use for names holding
// glob characters).
func isLiteral(p string) bool {
	if rest, ok := strings.CutPrefix(p, "re:"); ok {
		re, err := regexp.Compile(rest)
		if err != nil {
			return false
		}
		_, complete := re.LiteralPrefix()
		return complete
	}
	return !strings.ContainsAny(p, "*?[")
}

// literalName is the tensor name a literal entry (isLiteral) names.
func literalName(p string) string {
	if rest, ok := strings.CutPrefix(p, "re:"); ok {
		if re, err := regexp.Compile(rest); err == nil {
			name, _ := re.LiteralPrefix()
			return name
		}
	}
	return p
}

// compilePatterns turns the Trainable patterns into anchored regexps.
func compilePatterns(pats []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(pats))
	for _, p := range pats {
		var expr string
		if rest, ok := strings.CutPrefix(p, "re:"); ok {
			expr = "^(?:" + rest + ")$"
		} else {
			expr = "^" + globToRegexp(p) + "$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("trainable pattern %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// globToRegexp translates * and ? and passes [...] classes through.
func globToRegexp(g string) string {
	var sb strings.Builder
	inClass := false
	for _, r := range g {
		switch {
		case inClass:
			if r == ']' {
				inClass = false
			}
			if r == '\\' {
				sb.WriteString(`\\`)
				continue
			}
			sb.WriteRune(r)
		case r == '*':
			sb.WriteString(".*")
		case r == '?':
			sb.WriteString(".")
		case r == '[':
			inClass = true
			sb.WriteRune(r)
		default:
			sb.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if inClass {
		// An unclosed class is a literal bracket, as most shells treat it.
		return regexp.QuoteMeta(g)
	}
	return sb.String()
}
