// Package trainfeed makes the inputs of one training step for the
// benchmarks and diagnostics that run compiled training graphs
// (bench/trainstep, bench/gpu/nodediff): every parameter at its model
// value, a seeded image batch (normal) and a seeded target (uniform
// classes), the same from run to run and tool to tool, as
// bench/trainstep/torch_step.py's are on the PyTorch side.
package trainfeed

import (
	"math/rand/v2"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// Params returns the training graph's parameters as host tensors, by name.
func Params(gs *grad.Graphs) (map[string]*runtime.Tensor, error) {
	params := make(map[string]*runtime.Tensor, len(gs.Params))
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			return nil, err
		}
		params[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
	}
	return params, nil
}

// Classes is the class count of the model's first output (2 when the
// manifest does not say).
func Classes(gs *grad.Graphs) int64 {
	for _, o := range gs.Manifest.Eval.Outputs { // the training graph may omit the model outputs (grad.Config.OmitModelOutputs)
		if len(gs.Manifest.ModelOutputs) > 0 && o.Name == gs.Manifest.ModelOutputs[0] && len(o.Shape) > 1 {
			return o.Shape[1]
		}
	}
	return 2
}

// Batch is one seeded step's data: an NCHW image batch and its target.
type Batch struct {
	Image, Target runtime.Tensor
}

// NewBatch draws the image batch [batch, 3, size, size] and the target
// [batch, size, size] from a fixed seed.
func NewBatch(gs *grad.Graphs, batch, size int) Batch {
	rng := rand.New(rand.NewPCG(0, 1))
	classes := Classes(gs)
	b, s := int64(batch), int64(size)
	target := make([]int64, batch*size*size)
	for i := range target {
		target[i] = rng.Int64N(classes)
	}
	return Batch{Image: *runtime.NewRandomNormal(rng, b, 3, s, s), Target: *runtime.NewInt64([]int64{b, s, s}, target)}
}

// Feeds returns the step's inputs in the order of inputs (a session's
// Inputs): the parameters by name, the target, lossScale for the loss
// scale input, and the image for anything else.
func Feeds(inputs []runtime.IOInfo, params map[string]*runtime.Tensor, b Batch, lossScale float32) []*runtime.Tensor {
	feeds := make([]*runtime.Tensor, len(inputs))
	for i, x := range inputs {
		switch {
		case params[x.Name] != nil:
			feeds[i] = params[x.Name]
		case x.Name == grad.TargetName:
			feeds[i] = &b.Target
		case x.Name == grad.LossScaleName:
			feeds[i] = runtime.NewFloat32([]int64{1}, []float32{lossScale})
		default:
			feeds[i] = &b.Image
		}
	}
	return feeds
}
