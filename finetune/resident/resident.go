// Package resident runs training steps whose state never leaves the
// execution provider's memory: the parameters, their gradients and the
// optimiser's moments are device tensors, the training graph and the
// optimiser graph (optgraph) are bound to them once, and a step crosses to
// the host only with what Go reads — the loss, the gradient norm and any
// outputs asked for. On the CPU provider the same code runs in host memory,
// which is how it is tested against the Go optimiser.
//
// Parameters, gradients and each moment lie in one flat buffer apiece (the
// optgraph.Layout), so the optimiser is a handful of full-buffer kernels
// rather than a few per tensor; the training graph sees views of those
// buffers. The parameters and moments are ping-ponged: the optimiser reads
// set A and writes set B, the next step trains on B and writes A, so no
// kernel writes memory it is still reading.
//
// With Options.CUDAGraph each session captures a CUDA graph per binding
// (ONNX Runtime's enable_cuda_graph, the run-config entry gpu_graph_id 1
// and 2 for the ping-pong sets): every address a step touches is fixed —
// the bound state, the data inputs uploaded into the same tensors, the
// loss, the norm and the optimiser's coefficients — and so is every shape
// (the training graph has one batch size: finetune drops an epoch's last
// partial batch), so a replay is the step. A session that ONNX Runtime
// will not capture (a node off the GPU) runs without graphs, with a line
// saying so.
package resident

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/optim/optgraph"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// Param is one trainable tensor's name, shape and starting values.
type Param struct {
	Name  string
	Shape []int64
	Data  []float32
}

// Result is what one step reports.
type Result struct {
	Loss float64
	// GradNorm is the gradients' global L2 norm before clipping.
	GradNorm float64
	// Skipped reports a step refused for non-finite gradients: the
	// parameters and moments are unchanged and the step is not counted.
	Skipped bool
}

// Trainer holds the two sessions and the device-resident state.
type Trainer struct {
	train, opt *runtime.Session
	mem        *runtime.Memory
	cfg        optim.Config
	layout     optgraph.Layout
	slotNames  []string

	params [2]*flat
	slots  [2][]*flat
	grads  *flat
	// bindTrain[i] trains on params[i]; bindOpt[i] reads set i, writes 1-i.
	bindTrain, bindOpt [2]*runtime.Binding
	cur                int
	// graphs reports CUDA graph capture in the training and the
	// optimiser session.
	graphs [2]bool

	loss, norm, coeffs *runtime.DeviceTensor
	gradScale          *runtime.DeviceTensor            // nil without Options.GradScale
	inputs             map[string]*runtime.DeviceTensor // data inputs
	outputs            map[string]*runtime.DeviceTensor // extra outputs read after each step
	steps              int64
	// pos[i] is New's parameter i's place in layout.Slots (which puts
	// the decayed parameters first).
	pos []int
}

// flat is one buffer of layout.Total float32 values and its per-parameter views.
type flat struct {
	buf   *runtime.Buffer
	whole *runtime.DeviceTensor
	views []*runtime.DeviceTensor
}

// Options are New's settings beyond the graphs.
type Options struct {
	Session runtime.Options
	// Outputs names training-graph outputs (besides the loss and the
	// gradients) to compute each step and read back with Output.
	Outputs []string
	// GradScale: the gradients arrive multiplied by a loss scale (mixed
	// precision), which the optimiser divides out; SetGradScale gives it.
	GradScale bool
	// CUDAGraph captures each session's steps as CUDA graphs where the
	// sessions run on the CUDA provider and it accepts them; elsewhere it
	// is ignored with a line on Session.Log (CUDAGraphs reports the
	// outcome).
	CUDAGraph bool
}

// New opens the training graph (grad.Build's, serialised) and an optimiser
// graph for params under cfg, and uploads the parameters and zeroed moments.
// Every other input of the training graph is a data input, set with SetInput.
func New(training []byte, params []Param, cfg optim.Config, o Options) (*Trainer, error) {
	specs := make([]optgraph.Spec, len(params))
	for i, p := range params {
		specs[i] = optgraph.Spec{Name: p.Name, Shape: p.Shape}
	}
	layout, err := optgraph.NewLayout(specs, cfg)
	if err != nil {
		return nil, err
	}
	om, err := optgraph.Build(layout, cfg, optgraph.Options{GradScale: o.GradScale})
	if err != nil {
		return nil, err
	}
	odata, err := om.Marshal()
	if err != nil {
		return nil, err
	}
	t := &Trainer{cfg: cfg, layout: layout, slotNames: optim.SlotNames(cfg),
		inputs: map[string]*runtime.DeviceTensor{}, outputs: map[string]*runtime.DeviceTensor{}}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	so := o.Session
	so.Tuning.NoMemPattern = true // as finetune's training sessions
	log := so.Log
	if log == nil {
		log = os.Stderr
	}
	graphs := o.CUDAGraph
	if graphs && !mayUseCUDA(so.Device) {
		fmt.Fprintf(log, "segtune: CUDA graphs ignored: device %q runs on the CPU\n", so.Device)
		graphs = false
	}
	if t.train, t.graphs[0], err = openSession(training, so, graphs, "training graph", log); err != nil {
		return nil, fmt.Errorf("opening the training graph: %w", err)
	}
	so.Log = io.Discard // the training session already said where it runs
	if so.Tuning.ProfilePrefix != "" {
		so.Tuning.ProfilePrefix += "-optimizer" // its own file, sorting before the training graph's
	}
	graphs = graphs && t.train.Device == runtime.DeviceCUDA
	if t.opt, t.graphs[1], err = openSession(odata, so, graphs, "optimiser graph", log); err != nil {
		return nil, fmt.Errorf("opening the optimiser graph: %w", err)
	}
	if t.train.Device != t.opt.Device {
		return nil, fmt.Errorf("the training graph runs on %s, the optimiser on %s", t.train.Device, t.opt.Device)
	}
	if t.mem, err = t.train.InputMemory(params[0].Name); err != nil {
		return nil, err
	}
	if err := t.allocate(); err != nil {
		return nil, err
	}
	if o.GradScale {
		if t.gradScale, err = t.mem.NewTensor(runtime.Float32, []int64{1}); err != nil {
			return nil, err
		}
		if err := t.gradScale.Upload([]float32{1}); err != nil {
			return nil, err
		}
	}
	if err := t.bind(o.Outputs); err != nil {
		return nil, err
	}
	// The starting state: parameters in set 0, moments and gradients zero
	// (padding included, which the optimiser then keeps zero).
	at := map[string]int{}
	for j, s := range layout.Slots {
		at[s.Name] = j
	}
	for _, p := range params {
		t.pos = append(t.pos, at[p.Name])
	}
	host := make([]float32, layout.Total)
	for i, p := range params {
		s := layout.Slots[t.pos[i]]
		if int64(len(p.Data)) != s.Len {
			return nil, fmt.Errorf("parameter %q: %d values for shape %v", p.Name, len(p.Data), p.Shape)
		}
		copy(host[s.Offset:s.Offset+s.Len], p.Data)
	}
	if err := t.params[0].whole.Upload(host); err != nil {
		return nil, err
	}
	clear(host)
	for _, f := range append(append([]*flat{t.params[1], t.grads}, t.slots[0]...), t.slots[1]...) {
		if err := f.whole.Upload(host); err != nil {
			return nil, err
		}
	}
	ok = true
	return t, nil
}

// Device is where the steps run: "cpu" or "cuda".
func (t *Trainer) Device() string { return t.train.Device }

// CUDAGraphs reports whether the training and the optimiser session
// capture CUDA graphs (Options.CUDAGraph, where the provider took it).
func (t *Trainer) CUDAGraphs() (training, optimiser bool) { return t.graphs[0], t.graphs[1] }

// mayUseCUDA reports whether a session asked for device may run on CUDA.
func mayUseCUDA(device string) bool {
	d := strings.ToLower(device)
	return d == runtime.DeviceCUDA || d == runtime.DeviceAuto
}

// openSession opens one of the two sessions, with CUDA graph capture when graphs
// is set and the provider accepts it; where it does not (a node would run
// on the CPU, which ONNX Runtime refuses to capture), one line on log says
// why and the session opens without graphs. Where CUDA itself is missing
// the session's own fallback line says so.
func openSession(model []byte, so runtime.Options, graphs bool, what string, log io.Writer) (*runtime.Session, bool, error) {
	if graphs {
		if _, err := runtime.CUDADevices(); err == nil {
			s, err := runtime.NewSession(model, runtime.WithCUDAGraph(so))
			if err == nil {
				return s, true, nil
			}
			msg, _, _ := strings.Cut(err.Error(), "\n")
			fmt.Fprintf(log, "segtune: CUDA graphs off for the %s (%s); running without them\n", what, msg)
		}
	}
	s, err := runtime.NewSession(model, so)
	return s, false, err
}

// Steps is the number of steps taken (skipped ones not counted).
func (t *Trainer) Steps() int64 { return t.steps }

func (t *Trainer) newFlat() (*flat, error) {
	buf, err := t.mem.Alloc(int(t.layout.Total) * 4)
	if err != nil {
		return nil, err
	}
	f := &flat{buf: buf}
	if f.whole, err = buf.Tensor(runtime.Float32, 0, []int64{t.layout.Total}); err != nil {
		return f, err
	}
	for _, s := range t.layout.Slots {
		v, err := buf.Tensor(runtime.Float32, int(s.Offset)*4, s.Shape)
		if err != nil {
			return f, err
		}
		f.views = append(f.views, v)
	}
	return f, nil
}

func (t *Trainer) allocate() error {
	var err error
	for i := range 2 {
		if t.params[i], err = t.newFlat(); err != nil {
			return err
		}
		for range t.slotNames {
			f, err := t.newFlat()
			t.slots[i] = append(t.slots[i], f)
			if err != nil {
				return err
			}
		}
	}
	if t.grads, err = t.newFlat(); err != nil {
		return err
	}
	if t.loss, err = t.mem.NewTensor(runtime.Float32, []int64{1}); err != nil {
		return err
	}
	if t.norm, err = t.mem.NewTensor(runtime.Float32, []int64{1}); err != nil {
		return err
	}
	k := len(optgraph.Coefficients(t.cfg, 1, 0))
	t.coeffs, err = t.mem.NewTensor(runtime.Float32, []int64{int64(k)})
	return err
}

// bind makes the four bindings and the data-input and output tensors.
func (t *Trainer) bind(extra []string) error {
	isParam := map[string]int{}
	for i, s := range t.layout.Slots {
		isParam[s.Name] = i
	}
	for _, in := range t.train.Inputs {
		if _, ok := isParam[in.Name]; ok {
			continue
		}
		d, err := t.mem.NewTensor(elemType(in.Type), in.Shape)
		if err != nil {
			return fmt.Errorf("training input %q: %w", in.Name, err)
		}
		t.inputs[in.Name] = d
	}
	for _, name := range extra {
		i := t.train.OutputIndex(name)
		if i < 0 {
			return fmt.Errorf("the training graph has no output %q", name)
		}
		o := t.train.Outputs[i]
		d, err := t.mem.NewTensor(elemType(o.Type), o.Shape)
		if err != nil {
			return fmt.Errorf("training output %q: %w", name, err)
		}
		t.outputs[name] = d
	}
	for set := range 2 {
		b, err := t.train.NewBinding()
		if err != nil {
			return err
		}
		t.bindTrain[set] = b
		if err := graphID(b, t.graphs[0], set); err != nil {
			return err
		}
		for i, s := range t.layout.Slots {
			if err := b.Input(s.Name, t.params[set].views[i]); err != nil {
				return err
			}
			if err := b.Output(grad.GradPrefix+s.Name, t.grads.views[i]); err != nil {
				return err
			}
		}
		for name, d := range t.inputs {
			if err := b.Input(name, d); err != nil {
				return err
			}
		}
		for name, d := range t.outputs {
			if err := b.Output(name, d); err != nil {
				return err
			}
		}
		if err := b.Output(grad.LossName, t.loss); err != nil {
			return err
		}
		ob, err := t.opt.NewBinding()
		if err != nil {
			return err
		}
		t.bindOpt[set] = ob
		if err := graphID(ob, t.graphs[1], set); err != nil {
			return err
		}
		binds := []binding{
			{optgraph.Params, t.params[set].whole, false},
			{optgraph.Grads, t.grads.whole, false},
			{optgraph.CoeffsName, t.coeffs, false},
			{optgraph.Params + optgraph.OutSuffix, t.params[1-set].whole, true},
			{optgraph.GradNorm, t.norm, true},
		}
		for j, sn := range t.slotNames {
			binds = append(binds, binding{sn, t.slots[set][j].whole, false},
				binding{sn + optgraph.OutSuffix, t.slots[1-set][j].whole, true})
		}
		if t.gradScale != nil {
			binds = append(binds, binding{optgraph.GradScaleName, t.gradScale, false})
		}
		for _, x := range binds {
			var err error
			if x.output {
				err = ob.Output(x.name, x.d)
			} else {
				err = ob.Input(x.name, x.d)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// graphErr adds to a failed run of session i (0 training, 1 optimiser)
// that it captures CUDA graphs: a kernel that synchronises or allocates
// fails only under capture, which a run without graphs tells apart.
func (t *Trainer) graphErr(i int, err error) error {
	if !t.graphs[i] {
		return err
	}
	return fmt.Errorf("%w (this session captures CUDA graphs: run without them to tell whether capture is the cause)", err)
}

// graphID names binding set's CUDA graph, 1 or 2 (ONNX Runtime keeps 0),
// in a session that captures them: each binding's addresses are its own.
func graphID(b *runtime.Binding, graphs bool, set int) error {
	if !graphs {
		return nil
	}
	return b.SetRunConfig(runtime.CUDAGraphIDKey, strconv.Itoa(set+1))
}

// binding is one tensor of the optimiser graph's bindings.
type binding struct {
	name   string
	d      *runtime.DeviceTensor
	output bool
}

func elemType(name string) runtime.ElemType {
	if name == "int64" {
		return runtime.Int64
	}
	return runtime.Float32
}

// Inputs and Outputs describe the training graph's inputs and outputs.
func (t *Trainer) Inputs() []runtime.IOInfo  { return t.train.Inputs }
func (t *Trainer) Outputs() []runtime.IOInfo { return t.train.Outputs }

// DataInputs lists the training graph's inputs that are not parameters.
func (t *Trainer) DataInputs() []string {
	var names []string
	for _, in := range t.train.Inputs {
		if t.inputs[in.Name] != nil {
			names = append(names, in.Name)
		}
	}
	return names
}

// SetInput uploads a data input of the training graph (the image batch, the
// target, a regularizer's weights): a []float32 or []int64 of its size.
func (t *Trainer) SetInput(name string, host any) error {
	d := t.inputs[name]
	if d == nil {
		return fmt.Errorf("the training graph has no data input %q", name)
	}
	if err := d.Upload(host); err != nil {
		return fmt.Errorf("input %q: %w", name, err)
	}
	return nil
}

// Forward runs the training graph on the current parameters: the loss, the
// gradients (kept on the device) and the outputs asked for in Options.
func (t *Trainer) Forward() (loss float64, err error) {
	if err := t.bindTrain[t.cur].Run(); err != nil {
		return 0, t.graphErr(0, err)
	}
	l := []float32{0}
	if err := t.loss.Download(l); err != nil {
		return 0, err
	}
	return float64(l[0]), nil
}

// Output reads an output named in Options.Outputs after Forward.
func (t *Trainer) Output(name string, host any) error {
	d := t.outputs[name]
	if d == nil {
		return fmt.Errorf("output %q was not asked for", name)
	}
	return d.Download(host)
}

// SetGradScale sets the factor the next updates multiply the gradients by
// (1/loss scale); New must have had Options.GradScale.
func (t *Trainer) SetGradScale(inv float32) error {
	if t.gradScale == nil {
		return errors.New("resident: SetGradScale without Options.GradScale")
	}
	return t.gradScale.Upload([]float32{inv})
}

// Update applies the optimiser at learning rate lr to the gradients of the
// last Forward. Non-finite gradients skip the step (Result.Skipped).
func (t *Trainer) Update(lr float64) (Result, error) {
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return Result{}, fmt.Errorf("learning rate %v must be a non-negative number", lr)
	}
	if err := t.coeffs.Upload(optgraph.Coefficients(t.cfg, t.steps+1, lr)); err != nil {
		return Result{}, err
	}
	if err := t.bindOpt[t.cur].Run(); err != nil {
		return Result{}, t.graphErr(1, err)
	}
	n := []float32{0}
	if err := t.norm.Download(n); err != nil {
		return Result{}, err
	}
	t.cur = 1 - t.cur
	r := Result{GradNorm: float64(n[0])}
	if math.IsNaN(r.GradNorm) || math.IsInf(r.GradNorm, 0) {
		r.Skipped = true // the optimiser graph copied the state unchanged
		return r, nil
	}
	t.steps++
	return r, nil
}

// Step is Forward then Update.
func (t *Trainer) Step(lr float64) (Result, error) {
	loss, err := t.Forward()
	if err != nil {
		return Result{}, err
	}
	r, err := t.Update(lr)
	r.Loss = loss
	return r, err
}

// ReadParams copies the current parameters into dst, one slice per
// parameter of New's order (nil slices are skipped): for validation, a
// checkpoint or the regularizer's box on its head.
func (t *Trainer) ReadParams(dst [][]float32) error {
	return t.readFlat(t.params[t.cur], dst)
}

// WriteParams replaces the parameters given in src (New's order; nil
// slices keep theirs) and leaves the moments as they are.
func (t *Trainer) WriteParams(src [][]float32) error {
	return t.writeFlat(t.params[t.cur], src, "parameters")
}

// Params reads all parameters back into fresh slices, in New's order.
func (t *Trainer) Params() ([][]float32, error) {
	out := make([][]float32, len(t.pos))
	for i, j := range t.pos {
		out[i] = make([]float32, t.layout.Slots[j].Len)
	}
	return out, t.ReadParams(out)
}

func (t *Trainer) readFlat(f *flat, dst [][]float32) error {
	if len(dst) != len(t.pos) {
		return fmt.Errorf("reading %d tensors for %d parameters", len(dst), len(t.pos))
	}
	for i, j := range t.pos {
		if dst[i] == nil {
			continue
		}
		if err := f.views[j].Download(dst[i]); err != nil {
			return fmt.Errorf("reading %q: %w", t.layout.Slots[j].Name, err)
		}
	}
	return nil
}

// writeFlat overwrites the tensors of f given in src, each through its
// view: what is not given, the padding included, is not touched, and a
// step that boxes the size head moves the head alone, not the model.
func (t *Trainer) writeFlat(f *flat, src [][]float32, what string) error {
	if len(src) != len(t.pos) {
		return fmt.Errorf("writing %s: %d tensors for %d parameters", what, len(src), len(t.pos))
	}
	for i, j := range t.pos { // all checked before any is written
		if s := t.layout.Slots[j]; src[i] != nil && int64(len(src[i])) != s.Len {
			return fmt.Errorf("writing %s of %q: %d values, want %d", what, s.Name, len(src[i]), s.Len)
		}
	}
	for i, j := range t.pos {
		if src[i] == nil {
			continue
		}
		if err := f.views[j].Upload(src[i]); err != nil {
			return fmt.Errorf("writing %s of %q: %w", what, t.layout.Slots[j].Name, err)
		}
	}
	return nil
}

// State reads the optimiser's state back (for a checkpoint): the same
// optim.State as package optim's, so checkpoints do not depend on where
// the state lived.
func (t *Trainer) State() (*optim.State, error) {
	st := &optim.State{Algorithm: t.cfg.Algorithm, Step: t.steps}
	bufs := make([][][]float32, len(t.slotNames))
	for j := range t.slotNames {
		out := make([][]float32, len(t.pos))
		for i, k := range t.pos {
			out[i] = make([]float32, t.layout.Slots[k].Len)
		}
		if err := t.readFlat(t.slots[t.cur][j], out); err != nil {
			return nil, err
		}
		bufs[j] = out
	}
	for i, k := range t.pos {
		for j, slot := range t.slotNames {
			st.Buffers = append(st.Buffers, optim.Buffer{Param: t.layout.Slots[k].Name, Slot: slot, Data: bufs[j][i]})
		}
	}
	return st, nil
}

// SetState uploads an optimiser state (from State, or from package optim's
// Optimizer.State), checked as optim.Optimizer.SetState checks it, so the
// next step continues it exactly.
func (t *Trainer) SetState(st *optim.State) error {
	params := make([]*optim.Param, len(t.pos))
	for i, k := range t.pos {
		s := t.layout.Slots[k]
		params[i] = &optim.Param{Name: s.Name, Shape: s.Shape, Data: make([]float32, s.Len)}
	}
	bufs, err := st.ForParams(t.cfg, params)
	if err != nil {
		return err
	}
	for j, name := range t.slotNames {
		src := make([][]float32, len(t.pos))
		for i := range t.pos {
			src[i] = bufs[i][j]
		}
		if err := t.writeFlat(t.slots[t.cur][j], src, name); err != nil {
			return err
		}
	}
	t.steps = st.Step
	return nil
}

// Close frees the device memory and closes both sessions.
func (t *Trainer) Close() {
	for _, b := range append(t.bindTrain[:], t.bindOpt[:]...) {
		if b != nil {
			b.Close()
		}
	}
	free := func(f *flat) {
		if f == nil {
			return
		}
		for _, v := range f.views {
			v.Release()
		}
		if f.whole != nil {
			f.whole.Release()
		}
		f.buf.Free()
	}
	for i := range 2 {
		free(t.params[i])
		for _, f := range t.slots[i] {
			free(f)
		}
	}
	free(t.grads)
	for _, d := range []*runtime.DeviceTensor{t.loss, t.norm, t.coeffs, t.gradScale} {
		if d != nil {
			d.Free()
		}
	}
	for _, d := range t.inputs {
		d.Free()
	}
	for _, d := range t.outputs {
		d.Free()
	}
	if t.mem != nil {
		t.mem.Close()
	}
	if t.opt != nil {
		t.opt.Close()
	}
	if t.train != nil {
		t.train.Close()
	}
}
