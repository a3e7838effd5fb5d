package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/resident"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// stepper runs the training graph and the optimiser: one step computes the
// loss, the extra outputs and every parameter's gradient for a batch, and
// update applies the optimiser. It has two forms:
//
//   - host: the session reads the parameters from Go memory and writes the
//     gradients back into it; the Go optimiser updates params in place.
//     Data-parallel runs need it (the gradients are summed across ranks).
//   - resident: parameters, gradients and moments live where the session
//     runs (finetune/resident), on a GPU its own memory, and a step moves
//     only the batch in and the loss and asked-for outputs out; params are
//     brought up to date by pull before anything on the host reads them,
//     and push sends host edits back.
type stepper struct {
	sess *runtime.Session  // host form
	opt  *optim.Optimizer  // host form
	res  *resident.Trainer // resident form
	// The training graph's inputs and outputs, either form.
	inputs, outInfo []runtime.IOInfo
	params          []*optim.Param // in the session's input order
	// Positions of named inputs and outputs in the session.
	imageIn, targetIn int
	paramIn, gradOut  []int
	lossOut           int
	feeds             []*runtime.Tensor
	// outs are the previous step's outputs: ONNX Runtime writes the next
	// step's into the same memory (the gradients are the size of the model).
	// In the resident form only the outputs in read are filled.
	outs        []*runtime.Tensor
	read        []int
	imageShape  []int64
	targetShape []int64
	// scaler is mixed precision's loss scale (nil in float32), fed to
	// the loss_scale input through scaleIn.
	scaler  *LossScaler
	scaleIn []float32
	// acc sums the parameters' gradients over an accumulated step's
	// batches (stepAccumulated), in the host form.
	acc [][]float32
}

// LossScaler is mixed precision's dynamic loss scale, with PyTorch's
// GradScaler policy: float16 gradients of a mean over many pixels fall
// below float16's smallest normal unless the loss is scaled up, and a
// scale too large overflows them. Start at 2¹⁶; a step whose gradients
// overflowed is skipped and halves the scale; 2000 clean steps in a row
// double it. Its fields are checkpointed (dataState) for an exact resume.
type LossScaler struct {
	Scale float64 `json:"scale"`
	Clean int     `json:"clean_steps"`
}

// InitialLossScale is PyTorch's; a variable so that tests can start high
// enough to overflow.
var InitialLossScale float64 = 1 << 16

const (
	lossScaleGrowthEvery = 2000
	minLossScale         = 1.0 / (1 << 24) // below it every float16 gradient would be 0
)

var errSkippedStepOverflow = errors.New("the scaled gradients overflowed: step skipped, loss scale halved")

func (l *LossScaler) overflowed() {
	l.Scale, l.Clean = max(l.Scale/2, minLossScale), 0
}

func (l *LossScaler) clean() {
	if l.Clean++; l.Clean == lossScaleGrowthEvery {
		l.Scale, l.Clean = l.Scale*2, 0
	}
}

// newStepper opens a session on the training graph and binds params (by
// name) to its inputs; with resident, it opens the resident trainer, whose
// extra outputs (read each step) are those named in outputs. A scaler
// (mixed precision) feeds the graph's loss_scale input.
//
// cudaGraph asks the resident form for CUDA graphs (Config.CUDAGraph); the
// host form, whose tensors move every step, runs without them and says so.
func newStepper(gs *grad.Graphs, params []*optim.Param, imageInput string, oc optim.Config, resident, cudaGraph bool, outputs []string, scaler *LossScaler, opts runtime.Options) (*stepper, error) {
	data, err := gs.Training.Marshal()
	if err != nil {
		return nil, err
	}
	// ONNX Runtime's memory pattern (one block planned from the first run,
	// allocated on the second while the arena keeps the first run's
	// chunks) raised the training step's peak RSS by 150-250 MiB on
	// MobileNetV2 DeepLabV3+ (batch 8, 128x128) for no measurable speed.
	opts.Tuning.NoMemPattern = true
	s := &stepper{params: params, scaler: scaler}
	if resident {
		err = s.openResident(data, oc, outputs, cudaGraph, opts)
	} else {
		if cudaGraph && opts.Log != nil {
			why := "they need the training state resident on the device (resident on)"
			if !MayRunOnGPU(opts.Device) {
				why = fmt.Sprintf("device %q runs on the CPU", opts.Device)
			}
			fmt.Fprintln(opts.Log, "segtune: CUDA graphs ignored:", why)
		}
		err = s.openHost(data, oc, opts)
	}
	if err != nil {
		return nil, err
	}
	s.feeds = make([]*runtime.Tensor, len(s.inputs))
	s.outs = make([]*runtime.Tensor, len(s.outInfo))
	s.imageIn = s.inputIndex(imageInput)
	s.targetIn = s.inputIndex(grad.TargetName)
	s.lossOut = s.outputIndex(grad.LossName)
	if s.imageIn < 0 || s.targetIn < 0 || s.lossOut < 0 {
		s.close()
		return nil, fmt.Errorf("training graph lacks %q, %q or %q", imageInput, grad.TargetName, grad.LossName)
	}
	s.imageShape = s.inputs[s.imageIn].Shape
	s.targetShape = s.inputs[s.targetIn].Shape
	for _, p := range params {
		in, out := s.inputIndex(p.Name), s.outputIndex(grad.GradPrefix+p.Name)
		if in < 0 || out < 0 {
			s.close()
			return nil, fmt.Errorf("training graph lacks parameter %q or its gradient", p.Name)
		}
		s.paramIn = append(s.paramIn, in)
		s.gradOut = append(s.gradOut, out)
		s.feeds[in] = runtime.NewFloat32(p.Shape, p.Data)
	}
	for _, name := range outputs {
		s.read = append(s.read, s.outputIndex(name))
	}
	if scaler != nil {
		i := s.inputIndex(grad.LossScaleName)
		if i < 0 {
			s.close()
			return nil, fmt.Errorf("training graph lacks its %q input", grad.LossScaleName)
		}
		s.scaleIn = []float32{float32(scaler.Scale)}
		s.setInput(i, runtime.NewFloat32(s.inputs[i].Shape, s.scaleIn))
	}
	return s, nil
}

func (s *stepper) openHost(data []byte, oc optim.Config, opts runtime.Options) error {
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return fmt.Errorf("opening the training graph: %w", err)
	}
	if s.opt, err = optim.New(s.params, oc); err != nil {
		sess.Close()
		return err
	}
	s.sess, s.inputs, s.outInfo = sess, sess.Inputs, sess.Outputs
	return nil
}

func (s *stepper) openResident(data []byte, oc optim.Config, outputs []string, cudaGraph bool, opts runtime.Options) error {
	ps := make([]resident.Param, len(s.params))
	for i, p := range s.params {
		ps[i] = resident.Param{Name: p.Name, Shape: p.Shape, Data: p.Data}
	}
	res, err := resident.New(data, ps, oc, resident.Options{Session: opts, Outputs: outputs, GradScale: s.scaler != nil, CUDAGraph: cudaGraph})
	if err != nil {
		return err
	}
	s.res, s.inputs, s.outInfo = res, res.Inputs(), res.Outputs()
	return nil
}

func (s *stepper) close() error {
	if s.res != nil {
		s.res.Close()
		return nil
	}
	return s.sess.Close()
}

// extra feeds or reads a named input/output; -1 when absent.
func (s *stepper) inputIndex(name string) int  { return ioIndex(s.inputs, name) }
func (s *stepper) outputIndex(name string) int { return ioIndex(s.outInfo, name) }

func ioIndex(ios []runtime.IOInfo, name string) int {
	for i, x := range ios {
		if x.Name == name {
			return i
		}
	}
	return -1
}

// setInput binds a further graph input (e.g. the regularizer's); its
// values are read at each step.
func (s *stepper) setInput(i int, t *runtime.Tensor) { s.feeds[i] = t }

// step runs one batch and returns the loss and the outputs (in the host
// form each parameter's gradient lands in its Grad). It refuses non-finite
// losses, so that a diverging run stops before the weights are touched.
func (s *stepper) step(images []float32, targets []int64) (float64, []*runtime.Tensor, error) {
	s.feeds[s.imageIn] = runtime.NewFloat32(s.imageShape, images)
	s.feeds[s.targetIn] = runtime.NewInt64(s.targetShape, targets)
	if s.scaler != nil {
		s.scaleIn[0] = float32(s.scaler.Scale)
	}
	var loss float64
	var err error
	if s.res != nil {
		loss, err = s.stepResident()
	} else {
		loss, err = s.stepHost()
	}
	if err != nil {
		return 0, nil, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, s.outs, fmt.Errorf("loss is %v", loss)
	}
	return loss, s.outs, nil
}

// stepAccumulated runs a batch of n times the graph's batch as n steps and
// leaves in each parameter's Grad the mean of their gradients, returning
// the mean of their losses: the gradient of the whole batch where every
// part has as many labelled pixels (the loss is a mean over them).
func (s *stepper) stepAccumulated(images []float32, targets []int64, n int) (float64, []*runtime.Tensor, error) {
	if n <= 1 {
		return s.step(images, targets)
	}
	if s.res != nil {
		return 0, nil, errors.New("gradient accumulation needs the training state in host memory (resident off)")
	}
	if s.acc == nil {
		s.acc = make([][]float32, len(s.params))
		for i, p := range s.params {
			s.acc[i] = make([]float32, len(p.Data))
		}
	}
	ni, nt := len(images)/n, len(targets)/n
	var sum float64
	for k := range n {
		loss, outs, err := s.step(images[k*ni:(k+1)*ni], targets[k*nt:(k+1)*nt])
		if err != nil {
			return loss, outs, err
		}
		sum += loss
		for i, p := range s.params {
			if k == 0 {
				copy(s.acc[i], p.Grad)
				continue
			}
			for j, g := range p.Grad {
				s.acc[i][j] += g
			}
		}
	}
	inv := float32(1 / float64(n))
	for i, p := range s.params {
		for j := range s.acc[i] {
			s.acc[i][j] *= inv
		}
		p.Grad = s.acc[i]
	}
	return sum / float64(n), s.outs, nil
}

func (s *stepper) stepHost() (float64, error) {
	for i, p := range s.params {
		s.feeds[s.paramIn[i]].Float32 = p.Data
	}
	for i, f := range s.feeds {
		if f == nil {
			return 0, fmt.Errorf("training graph input %q is not fed", s.inputs[i].Name)
		}
	}
	outs, err := s.sess.RunInto(s.outs, s.feeds...)
	if err != nil {
		return 0, err
	}
	s.outs = outs
	for i, p := range s.params {
		p.Grad = outs[s.gradOut[i]].Float32
	}
	return float64(outs[s.lossOut].Float32[0]), nil
}

func (s *stepper) stepResident() (float64, error) {
	for _, name := range s.res.DataInputs() {
		f := s.feeds[s.inputIndex(name)]
		if f == nil {
			return 0, fmt.Errorf("training graph input %q is not fed", name)
		}
		var err error
		if f.Int64 != nil {
			err = s.res.SetInput(name, f.Int64)
		} else {
			err = s.res.SetInput(name, f.Float32)
		}
		if err != nil {
			return 0, err
		}
	}
	loss, err := s.res.Forward()
	if err != nil {
		return 0, err
	}
	for _, i := range s.read {
		if s.outs[i] == nil {
			t := runtime.NewFloat32(s.outInfo[i].Shape, nil)
			t.Float32 = make([]float32, t.Len())
			s.outs[i] = t
		}
		if err := s.res.Output(s.outInfo[i].Name, s.outs[i].Float32); err != nil {
			return 0, err
		}
	}
	return loss, nil
}

// update applies the optimiser at learning rate lr to the last step's
// gradients. Non-finite gradients return optim.ErrNonFiniteGrad with the
// weights unchanged, in either form; under a loss scaler they are an
// overflow instead: errSkippedStepOverflow, the step skipped, the scale
// halved.
func (s *stepper) update(lr float64) error {
	var err error
	switch {
	case s.res != nil:
		err = s.updateResident(lr)
	case s.scaler != nil:
		inv := float32(1 / s.scaler.Scale)
		for _, p := range s.params {
			for i := range p.Grad {
				p.Grad[i] *= inv
			}
		}
		err = s.opt.Step(lr)
	default:
		err = s.opt.Step(lr)
	}
	if s.scaler == nil {
		return err
	}
	if errors.Is(err, optim.ErrNonFiniteGrad) {
		s.scaler.overflowed()
		return errSkippedStepOverflow
	}
	if err == nil {
		s.scaler.clean()
	}
	return err
}

func (s *stepper) updateResident(lr float64) error {
	if s.scaler != nil {
		if err := s.res.SetGradScale(float32(1 / s.scaler.Scale)); err != nil {
			return err
		}
	}
	r, err := s.res.Update(lr)
	if err != nil {
		return err
	}
	if r.Skipped {
		return fmt.Errorf("%w (global norm %v)", optim.ErrNonFiniteGrad, r.GradNorm)
	}
	return nil
}

// pull brings the Data of the given parameters (all when none are given)
// up to date with the device; a no-op in the host form.
func (s *stepper) pull(ps ...*optim.Param) error {
	if s.res == nil {
		return nil
	}
	return s.res.ReadParams(s.dataOf(ps))
}

// push sends host edits of the given parameters to the device; a no-op in
// the host form.
func (s *stepper) push(ps ...*optim.Param) error {
	if s.res == nil {
		return nil
	}
	return s.res.WriteParams(s.dataOf(ps))
}

// dataOf returns the Data slices of ps in s.params' order, nil for the
// others (all when ps is empty).
func (s *stepper) dataOf(ps []*optim.Param) [][]float32 {
	out := make([][]float32, len(s.params))
	for i, p := range s.params {
		if len(ps) == 0 || slices.Contains(ps, p) {
			out[i] = p.Data
		}
	}
	return out
}

// optimState is the optimiser's state, for a checkpoint.
func (s *stepper) optimState() (*optim.State, error) {
	if s.res == nil {
		return s.opt.State(), nil
	}
	return s.res.State()
}

// setOptimState restores a checkpoint's optimiser state.
func (s *stepper) setOptimState(st *optim.State) error {
	if s.res == nil {
		return s.opt.SetState(st)
	}
	return s.res.SetState(st)
}

// trainStep is one optimiser step as Algorithm 1's network (dual.Network):
// the training graph computes the loss, the size scores and every
// gradient, the size regularizer's term included, in one pass.
type trainStep struct {
	n     *Net
	batch *data.Batch
	lrAt  func() float64
	// loss and lr are the step's, for the history; skipped reports a
	// step whose scaled gradients overflowed (mixed precision).
	loss, lr float64
	skipped  bool
}

func (s *trainStep) Forward(b *dual.Batch) error {
	n := s.n
	share := n.par.ShareOf(b, len(s.batch.IDs)) // b alone; this rank's rows of the global batch
	if n.reg != nil {
		n.reg.feed(share)
	}
	loss, outs, err := n.step.stepAccumulated(s.batch.Images, s.batch.Masks, n.accumulate())
	if err == nil && n.reg != nil {
		n.reg.readScores(outs, share.Scores)
	}
	if n.par.Parallel() { // sum the gradients, gather the scores
		loss, err = n.par.Reduce(n.params, loss, err, b.Scores, share)
	}
	if err != nil {
		return err
	}
	s.loss = loss
	return nil
}

func (s *trainStep) Update(*dual.Batch) error {
	s.lr = s.lrAt()
	if err := s.n.step.update(s.lr); errors.Is(err, errSkippedStepOverflow) {
		s.skipped = true
		return nil
	} else if err != nil {
		return err
	}
	if s.n.reg != nil {
		return s.n.reg.boxHead(s.n.step) // the bounded size score's box
	}
	return nil
}
