package finetune

import (
	"fmt"
	"math"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// stepper runs the training graph: one call computes the loss, the extra
// outputs and every parameter's gradient for a batch.
type stepper struct {
	sess   *runtime.Session
	params []*optim.Param // in the session's input order
	// Positions of named inputs and outputs in the session.
	imageIn, targetIn int
	paramIn, gradOut  []int
	lossOut           int
	feeds             []*runtime.Tensor
	// outs are the previous step's outputs: ONNX Runtime writes the next
	// step's into the same memory (the gradients are the size of the model).
	outs        []*runtime.Tensor
	imageShape  []int64
	targetShape []int64
}

// newStepper opens a session on the training graph and binds params (by
// name) to its inputs.
func newStepper(gs *grad.Graphs, params []*optim.Param, imageInput string, opts runtime.Options) (*stepper, error) {
	data, err := gs.Training.Marshal()
	if err != nil {
		return nil, err
	}
	// ONNX Runtime's memory pattern (one block planned from the first run,
	// allocated on the second while the arena keeps the first run's
	// chunks) raised the training step's peak RSS by 150-250 MiB on
	// MobileNetV2 DeepLabV3+ (batch 8, 128x128) for no measurable speed.
	opts.Tuning.NoMemPattern = true
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the training graph: %w", err)
	}
	s := &stepper{sess: sess, params: params, feeds: make([]*runtime.Tensor, len(sess.Inputs))}
	s.imageIn = sess.InputIndex(imageInput)
	s.targetIn = sess.InputIndex(grad.TargetName)
	s.lossOut = sess.OutputIndex(grad.LossName)
	if s.imageIn < 0 || s.targetIn < 0 || s.lossOut < 0 {
		sess.Close()
		return nil, fmt.Errorf("training graph lacks %q, %q or %q", imageInput, grad.TargetName, grad.LossName)
	}
	s.imageShape = sess.Inputs[s.imageIn].Shape
	s.targetShape = sess.Inputs[s.targetIn].Shape
	for _, p := range params {
		in, out := sess.InputIndex(p.Name), sess.OutputIndex(grad.GradPrefix+p.Name)
		if in < 0 || out < 0 {
			sess.Close()
			return nil, fmt.Errorf("training graph lacks parameter %q or its gradient", p.Name)
		}
		s.paramIn = append(s.paramIn, in)
		s.gradOut = append(s.gradOut, out)
		s.feeds[in] = runtime.NewFloat32(p.Shape, p.Data)
	}
	return s, nil
}

func (s *stepper) close() error { return s.sess.Close() }

// extra feeds or reads a named input/output; -1 when absent.
func (s *stepper) inputIndex(name string) int  { return s.sess.InputIndex(name) }
func (s *stepper) outputIndex(name string) int { return s.sess.OutputIndex(name) }

// setInput binds a further graph input (e.g. the regularizer's).
func (s *stepper) setInput(i int, t *runtime.Tensor) { s.feeds[i] = t }

// step runs one batch, stores each parameter's gradient in its Grad and
// returns the loss and all outputs. It refuses non-finite losses and
// gradients, so that a diverging run stops before the weights are touched.
func (s *stepper) step(images []float32, targets []int64) (float64, []*runtime.Tensor, error) {
	s.feeds[s.imageIn] = runtime.NewFloat32(s.imageShape, images)
	s.feeds[s.targetIn] = runtime.NewInt64(s.targetShape, targets)
	for i, p := range s.params {
		s.feeds[s.paramIn[i]].Float32 = p.Data
	}
	for i, f := range s.feeds {
		if f == nil {
			return 0, nil, fmt.Errorf("training graph input %q is not fed", s.sess.Inputs[i].Name)
		}
	}
	outs, err := s.sess.RunInto(s.outs, s.feeds...)
	if err != nil {
		return 0, nil, err
	}
	s.outs = outs
	loss := float64(outs[s.lossOut].Float32[0])
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, outs, fmt.Errorf("loss is %v", loss)
	}
	for i, p := range s.params {
		p.Grad = outs[s.gradOut[i]].Float32
	}
	return loss, outs, nil
}

// trainStep is one optimiser step as Algorithm 1's network (dual.Network):
// the training graph computes the loss, the size scores and every
// gradient, the size regularizer's term included, in one pass.
type trainStep struct {
	t     *trainer
	batch *data.Batch
	// loss and lr are the step's, for the history.
	loss, lr float64
}

func (s *trainStep) Forward(b *dual.Batch) error {
	t := s.t
	share := t.par.shareOf(b, len(s.batch.IDs)) // b alone; this rank's rows of the global batch
	if t.reg != nil {
		t.reg.feed(share)
	}
	loss, outs, err := t.step.step(s.batch.Images, s.batch.Masks)
	if err == nil && t.reg != nil {
		t.reg.readScores(outs, share.Scores)
	}
	if t.par.parallel() { // sum the gradients, gather the scores
		loss, err = t.par.reduce(t.params, loss, err, b.Scores, share)
	}
	if err != nil {
		return err
	}
	s.loss = loss
	return nil
}

func (s *trainStep) Update(*dual.Batch) error {
	s.lr = s.t.sched.At(s.t.steps)
	if err := s.t.opt.Step(s.lr); err != nil {
		return err
	}
	if s.t.reg != nil {
		s.t.reg.boxHead() // the bounded size score's box
	}
	return nil
}
