package inference

import (
	"fmt"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/runtime"
)

// activationBytesPerPixel is a rough allowance for the model's
// intermediate tensors per input pixel (DeepLabV3+'s widest feature maps
// at 1/4 and 1/16 resolution come to about this in float32).
const activationBytesPerPixel = 64

// unknownClasses stands in for a class count the model leaves dynamic.
const unknownClasses = 32

// Estimate returns the bytes one model run over n images of shape takes:
// the input batch, the output (held by ONNX Runtime and copied into Go) and
// an allowance for activations. It saturates instead of overflowing.
func (s *Segmenter) Estimate(n int, shape pipeline.Shape) int64 {
	classes := int64(s.Contract.Classes)
	if classes <= 0 {
		classes = unknownClasses
	}
	if s.Contract.Kind == contract.Labels {
		classes = 2 // int64 labels, then float32 copies
	}
	rows := int64(n)
	if s.FixedBatch > 0 {
		rows = int64(max(n, s.FixedBatch)) // padded to the fixed batch
	}
	perPixel := int64(4*shape[0]) + 2*4*classes + activationBytesPerPixel
	return memlimit.Product(rows, int64(shape[1]), int64(shape[2]), perPixel)
}

// FixDeclared is the advice on a model whose declared input is over the
// memory limit (memlimit.TooLargeError's Fix).
const FixDeclared = "the model's fixed batch or input size, or {size}, is too large for this machine"

// checkDeclared refuses a model whose declared fixed input (batch and size)
// could not run within the memory limit, before anything is allocated.
func (s *Segmenter) checkDeclared(in runtime.IOInfo) error {
	h, w := s.Pre.Height, s.Pre.Width
	if h <= 0 || w <= 0 {
		h, w = 1, 1 // dynamic size: the fixed batch alone
	}
	bytes := s.Estimate(max(s.FixedBatch, 1), pipeline.Shape{imageio.Channels, h, w})
	what := fmt.Sprintf("running the model (input %q declared %v, fed %d×%dx%d)", in.Name, in.Shape, max(s.FixedBatch, 1), h, w)
	return memlimit.Check(what, bytes, FixDeclared)
}
