// Command trainstep times one training step (forward + backward through the
// graph grad.Build emits) of an ONNX segmentation model in ONNX Runtime, the
// Go side of the benchmark whose PyTorch side is torch_step.py:
//
//	go run ./bench/trainstep --model testdata/generated/deeplabv3plus_mobilenetv2.onnx \
//	    --batch 8 --size 128 --threads 2 --steps 10 --warmup 2 [--json]
//
// Every parameter is trainable; inputs are random normal and targets random
// class indices from a fixed seed; no optimizer update is applied (as on the
// PyTorch side). It prints the median ms/step and the peak RSS of the process.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/segtune/segtune/bench/internal/trainfeed"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/resident"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/onnx/grad/roleprofile"
	"github.com/segtune/segtune/runtime"
)

// Result is what one benchmark run reports.
type Result struct {
	Model   string `json:"model"`
	Batch   int    `json:"batch"`
	Size    int    `json:"size"`
	Threads int    `json:"threads"`
	Device  string `json:"device"`
	// Optim is the optimiser applied in each step ("none": forward and
	// backward only); Resident reports device-resident state (--resident).
	Optim     string `json:"optim"`
	Resident  bool   `json:"resident"`
	Precision string `json:"precision,omitempty"`
	// CUDAOptions are the CUDA provider options the session was given
	// (SessionCUDAOptions), on the CPU too.
	CUDAOptions    map[string]string `json:"cuda_options,omitempty"`
	WeightGradConv bool              `json:"wgrad_conv"`
	// ConvGrad is the set of convolution classes whose backward pass is
	// one ConvGrad node (--convgrad: "none", "all", "dense,pointwise", …).
	ConvGrad string `json:"convgrad"`
	// CUDAGraph reports that the training session captured CUDA graphs
	// (--cuda-graph where the CUDA provider took it), CUDAGraphOptimizer
	// the optimiser session.
	CUDAGraph          bool    `json:"cuda_graph"`
	CUDAGraphOptimizer bool    `json:"cuda_graph_optimizer"`
	MedianMs           float64 `json:"median_ms"`
	// UpdateMedianMs is the median time of the optimiser graph's run
	// within a resident step.
	UpdateMedianMs float64 `json:"update_median_ms,omitempty"`
	// CPUMsPerStep is the process's user+system CPU time over the timed
	// steps divided by their number: at one thread it is far less
	// sensitive to other load on the machine than the wall time (at two,
	// ORT's spinning threads inflate it).
	CPUMsPerStep float64   `json:"cpu_ms_per_step"`
	StepsMs      []float64 `json:"steps_ms"`
	PeakRSSMiB   float64   `json:"peak_rss_mib"`
	// RSSBeforeStepsMiB is the resident size after building and opening the
	// session, before the first step (torch_step.py's rss_before_steps_mib).
	RSSBeforeStepsMiB float64 `json:"rss_before_steps_mib"`
	BuildSec          float64 `json:"build_s"`
	GraphNodes        int     `json:"graph_nodes"`
	ParamTensor       int     `json:"param_tensors"`
	// Ops is the training graph's node histogram; OptimizedOps that of the
	// graph ONNX Runtime runs after its fusions (with --optimized).
	Ops          map[string]int `json:"ops,omitempty"`
	OptimizedOps map[string]int `json:"optimized_ops,omitempty"`
	// Profile is the kernel time per op type (with --profile; see
	// ProfileShares), ProfileTotalMs their sum.
	Profile        []OpShare `json:"profile,omitempty"`
	ProfileTotalMs float64   `json:"profile_kernel_ms,omitempty"`
	// ProfileRoles is the same kernel time per role (forward, data, weight
	// and bias gradient by convolution class, loss, optimiser, copies;
	// see ProfileRoles).
	ProfileRoles *roleprofile.Table `json:"profile_roles,omitempty"`
	// roleGraph is the training graph's nodes, which ProfileRoles joins
	// with the profile (kept only with --profile).
	roleGraph *onnx.GraphProto
	// Losses is each step's loss, warm-up included (null where not
	// finite), and SkippedSteps the steps whose gradient was not finite
	// (no update applied): a timing of steps that all skipped would time a
	// graph that learns nothing.
	Losses       []*float64 `json:"losses"`
	SkippedSteps int        `json:"skipped_steps"`
}

func main() {
	model := flag.String("model", "testdata/generated/deeplabv3plus_mobilenetv2.onnx", "inference ONNX model")
	batch := flag.Int("batch", 8, "batch size")
	size := flag.Int("size", 128, "input height and width")
	threads := flag.Int("threads", 2, "ONNX Runtime intra-op threads")
	steps := flag.Int("steps", 10, "timed steps")
	warmup := flag.Int("warmup", 2, "untimed steps first")
	device := flag.String("device", "cpu", "cpu, cuda or auto")
	asJSON := flag.Bool("json", false, "print JSON")
	flag.StringVar(&Tune.ProfilePrefix, "profile", "", "write ONNX Runtime's per-node profile to PREFIX_<date>.json")
	flag.BoolVar(&Tune.Parallel, "parallel", false, "ONNX Runtime parallel executor")
	flag.IntVar(&Tune.InterOpThreads, "inter-op", 0, "ONNX Runtime inter-op threads (0: 1)")
	flag.BoolVar(&Tune.NoArena, "no-arena", false, "disable ONNX Runtime's CPU memory arena")
	memPattern := flag.Bool("mem-pattern", false, "ONNX Runtime's memory-pattern planning (off by default, as in finetune)")
	sessionConfig := flag.String("config", "", "ONNX Runtime session config entries k=v,k=v (e.g. session.intra_op.allow_spinning=0)")
	flag.StringVar(&SaveGraph, "save", "", "also write the training graph to this file")
	flag.BoolVar(&DirectConvs, "direct-convs", false, "keep every convolution a Conv node (no Winograd form)")
	flag.BoolVar(&EveryFloat, "every-float", false, "train every float initializer (PyTorch's parameters in the transformer exports), not only parameter inputs")
	flag.StringVar(&Tune.OptimizedModelPath, "optimized", "", "have ONNX Runtime write its optimised graph to this file")
	showOps := flag.Bool("ops", false, "print the node histogram of the training graph (and of --optimized)")
	cudaOpts := flag.String("cuda-opt", "", "CUDA provider options k=v,k=v (e.g. use_tf32=0)")
	flag.StringVar(&Optim, "optim", "none", "also apply an optimiser step: none, sgd, adam or adamw (in Go on host copies, or with --resident as a graph on the device)")
	flag.BoolVar(&Resident, "resident", false, "keep parameters, gradients and optimiser state in the session's device memory (finetune/resident); needs --optim")
	flag.StringVar(&Precision, "precision", "", "fp32 (use_tf32=0), tf32 (use_tf32=1), fp16 (onnx/autocast, loss scale 1024 divided out before the optimiser) or bf16 (onnx/autocast, opset 22, no loss scale; CUDA only); empty: the provider's defaults")
	flag.StringVar(&Masks, "masks", "auto", "activation-mask backward form: where (one Where, grad.Config.WhereMasks), castmul (Cast+Mul) or auto (where except on the CPU, as finetune)")
	flag.BoolVar(&WeightGradConv, "wgrad-conv", false, "Conv weight gradients as one transposed-roles Conv (grad.Config.WeightGradConv) instead of im2col patches")
	convGrad := flag.String("convgrad", "none", "convolution classes whose backward pass is one ConvGrad node (grad.Config.ConvGrad): all, none, or a list of dense, pointwise, depthwise and grouped")
	flag.BoolVar(&CUDAGraph, "cuda-graph", false, "capture the resident step and optimiser as CUDA graphs (finetune/resident); needs --resident; ignored with one line on the CPU or where ONNX Runtime will not capture")
	flag.Parse()
	if err := setLevers(*convGrad); err != nil {
		fmt.Fprintln(os.Stderr, "trainstep:", err)
		os.Exit(2)
	}
	if *memPattern {
		Tune.NoMemPattern = false
	}
	for _, kv := range strings.Split(*sessionConfig, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if Tune.Config == nil {
				Tune.Config = map[string]string{}
			}
			Tune.Config[k] = v
		}
	}
	for _, kv := range strings.Split(*cudaOpts, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if CUDAOptions == nil {
				CUDAOptions = map[string]string{}
			}
			CUDAOptions[k] = v
		}
	}
	r, err := Run(*model, *batch, *size, *threads, *steps, *warmup, *device)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainstep:", err)
		os.Exit(1)
	}
	if !*showOps {
		r.Ops = nil
	} else if Tune.OptimizedModelPath != "" {
		om, err := onnx.Load(Tune.OptimizedModelPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "trainstep:", err)
			os.Exit(1)
		}
		r.OptimizedOps = OpCounts(om)
	}
	if Tune.ProfilePrefix != "" {
		// The profile is written when the session closes (end of Run).
		if r.Profile, r.ProfileTotalMs, err = ProfileShares(Tune.ProfilePrefix); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep:", err)
			os.Exit(1)
		}
		if r.ProfileRoles, err = ProfileRoles(Tune.ProfilePrefix, r.roleGraph); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep:", err)
			os.Exit(1)
		}
	}
	if *asJSON {
		// One line: scripts read the last line that starts with "{".
		if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep:", err)
			os.Exit(1)
		}
		return
	}
	if r.Ops != nil {
		writeCounts(os.Stdout, "training graph", r.Ops)
	}
	if r.OptimizedOps != nil {
		writeCounts(os.Stdout, "ONNX Runtime's optimised graph", r.OptimizedOps)
	}
	if r.Profile != nil {
		writeShares(os.Stdout, r.Profile, r.ProfileTotalMs)
	}
	if r.ProfileRoles != nil {
		r.ProfileRoles.Write(os.Stdout)
	}
	fmt.Printf("%s batch %d %dx%d threads %d on %s (convgrad %s, CUDA graphs %s): median %.1f ms/step (CPU %.1f ms/step), peak RSS %.0f MiB (%.0f MiB before the steps; graph build %.1fs, %d nodes)\n",
		r.Model, r.Batch, r.Size, r.Size, r.Threads, r.Device, r.ConvGrad, onOff(r.CUDAGraph, r.CUDAGraphOptimizer), r.MedianMs, r.CPUMsPerStep, r.PeakRSSMiB, r.RSSBeforeStepsMiB, r.BuildSec, r.GraphNodes)
}

// Tune is passed to the session (flags --profile, --parallel, ...). ORT's
// memory pattern is off, as finetune's training sessions have it.
var Tune = runtime.Tuning{NoMemPattern: true}

// CUDAOptions are the CUDA provider options (flag --cuda-opt).
var CUDAOptions map[string]string

// SessionCUDAOptions are the CUDA provider options of the step's session
// at precision, opts (--cuda-opt) over the defaults: use_tf32 1 for tf32
// and 0 for the other precisions named, and cuDNN's heuristic convolution
// search for fp16 and bf16 (runtime.HalfPrecisionCUDAOptions). Without a
// precision, opts as given: the provider's defaults.
func SessionCUDAOptions(precision string, opts map[string]string) map[string]string {
	if precision == "" {
		return opts
	}
	out := map[string]string{"use_tf32": map[bool]string{true: "1", false: "0"}[precision == "tf32"]}
	maps.Copy(out, opts)
	_, half := autocast.ForPrecision(precision)
	return runtime.HalfPrecisionCUDAOptions(out, half)
}

// SaveGraph, when set, is where NewStepper writes the training graph.
var SaveGraph string

// DirectConvs, when set, keeps every convolution a Conv node (grad.Config.DirectConvs).
var DirectConvs bool

// EveryFloat, when set, trains every float initializer, not only the
// parameter inputs "*" selects: PyTorch's parameter set for models whose
// Linear biases, layer scales or norm affines are Add/Mul constants
// (scripts/gen_transformer_models.py's exports).
var EveryFloat bool

// Masks picks grad.Config.WhereMasks (flag --masks): "where", "castmul"
// or "auto".
var Masks = "auto"

// WeightGradConv is grad.Config.WeightGradConv (flag --wgrad-conv).
var WeightGradConv bool

// ConvGrad is grad.Config.ConvGrad (flag --convgrad); CUDAGraph is
// resident.Options.CUDAGraph (flag --cuda-graph).
var (
	ConvGrad  grad.ConvClasses
	CUDAGraph bool
)

// setLevers reads --convgrad into ConvGrad and checks --cuda-graph.
func setLevers(convGrad string) error {
	var err error
	if ConvGrad, err = grad.ParseConvClasses(convGrad); err != nil {
		return fmt.Errorf("--convgrad %s: %w", convGrad, err)
	}
	if CUDAGraph && !Resident {
		return errors.New("--cuda-graph needs --resident (a CUDA graph replays the fixed device addresses of the resident state)")
	}
	return nil
}

// onOff describes the CUDA graphs of the training and optimiser sessions.
func onOff(training, optimiser bool) string {
	switch {
	case training && optimiser:
		return "on"
	case training:
		return "on for the step only"
	case optimiser:
		return "on for the optimiser only"
	}
	return "off"
}

// Precision is flag --precision: fp32, tf32, fp16 or empty.
var Precision string

// benchLossScale is the fixed loss scale of --precision fp16: the step
// timing needs the scaled backward and the unscaling, not a dynamic scale.
const benchLossScale float32 = 1024

// Optim names the optimiser applied after each step ("none": the step is
// forward and backward only, as torch_step.py's default); Resident keeps
// the whole training state on the device (flags --optim, --resident).
var (
	Optim    = "none"
	Resident bool
)

// Stepper holds an open training session and its feeds.
type Stepper struct {
	Session *runtime.Session
	// Device is where the steps run.
	Device string
	// What Run reports of the compiled graph. The graph itself is not kept:
	// its copy of the weights would be garbage that finetune does not hold
	// either (the step's weights are the inputs below).
	GraphNodes, ParamTensors int
	Ops                      map[string]int
	// roleGraph is the training graph's nodes without its weights, kept
	// with --profile for ProfileRoles.
	roleGraph *onnx.GraphProto
	inputs    []*runtime.Tensor
	outs      []*runtime.Tensor // the first step's outputs, refilled by the next ones
	// opt is the Go optimiser of --optim on host copies; res the
	// device-resident trainer of --resident.
	opt    *optim.Optimizer
	params []*optim.Param
	res    *resident.Trainer
	// UpdateMs is each resident step's optimiser time (graph run included).
	UpdateMs []float64
	// Losses is each step's loss; Skipped counts the steps whose gradient
	// was not finite.
	Losses  []float64
	Skipped int
}

// NewStepper compiles model for training at batch×3×size×size.
func NewStepper(model string, batch, size, threads int, device string) (*Stepper, error) {
	var whereMasks bool
	switch Masks {
	case "auto", "":
		whereMasks = !strings.EqualFold(device, "cpu")
	case "where", "castmul":
		whereMasks = Masks == "where"
	default:
		return nil, fmt.Errorf("--masks %q: want where, castmul or auto", Masks)
	}
	m, err := onnx.Load(model)
	if err != nil {
		return nil, err
	}
	in := m.Graph().GetInput()[0].GetName()
	trainable := []string{"*"}
	if EveryFloat {
		trainable = nil
		for _, t := range m.Graph().GetInitializer() {
			if t.GetDataType() == int32(onnx.Float32) {
				trainable = append(trainable, "re:"+regexp.QuoteMeta(t.GetName()))
			}
		}
	}
	var minOpset int64
	switch Precision {
	case "", "fp32", "tf32":
	case "fp16", "bf16":
		if Precision == "bf16" && strings.EqualFold(device, "cpu") {
			return nil, fmt.Errorf("--precision bf16: ONNX Runtime's CPU provider has no bfloat16 Conv; use --device cuda")
		}
		// autocast hides the weights from "*" (they feed Casts): name them.
		trainable = nil
		for name := range onnx.ParameterNames(m.Graph()) {
			trainable = append(trainable, "re:"+regexp.QuoteMeta(name))
		}
		typ, _ := autocast.ForPrecision(Precision)
		if _, err := autocast.Apply(m, typ); err != nil {
			return nil, err
		}
		minOpset = typ.MinOpset()
	default:
		return nil, fmt.Errorf("--precision %q: want fp32, tf32, fp16 or bf16", Precision)
	}
	gs, err := grad.Build(m, grad.Config{
		Prober:           ortprobe.Prober{Threads: threads},
		Trainable:        trainable,
		InputShapes:      map[string][]int64{in: {int64(batch), 3, int64(size), int64(size)}},
		DirectConvs:      DirectConvs || !strings.EqualFold(device, "cpu"), // as finetune: Winograd convs for the CPU provider only
		MatrixReductions: !strings.EqualFold(device, "cpu"),
		WhereMasks:       whereMasks,
		OmitModelOutputs: true, // as finetune: the steps read the loss and the gradients
		WeightGradConv:   WeightGradConv,
		ConvGrad:         ConvGrad,
		MinOpset:         minOpset,
		Loss:             grad.Loss{Scale: Precision == "fp16"},
	})
	if err != nil {
		return nil, err
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		return nil, err
	}
	if SaveGraph != "" {
		if err := atomicfile.Write(SaveGraph, data, 0o644); err != nil {
			return nil, err
		}
	}
	var cfg optim.Config
	if Optim != "none" {
		a, err := optim.ParseAlgorithm(Optim)
		if err != nil {
			return nil, err
		}
		cfg = optim.DefaultConfig(a) // torch_step.py's: momentum 0.9; AdamW's decay 0.01
	} else if Resident {
		return nil, fmt.Errorf("--resident needs --optim sgd, adam or adamw")
	}
	ropts := runtime.Options{Threads: threads, Device: device, Tuning: Tune, CUDAOptions: SessionCUDAOptions(Precision, CUDAOptions)}
	trainfeed.ConvGradKernels(&ropts, ConvGrad)
	var roleGraph *onnx.GraphProto
	if Tune.ProfilePrefix != "" {
		roleGraph = &onnx.GraphProto{Node: gs.Training.Proto.Graph.Node}
	}
	if Resident {
		st, err := newResidentStepper(data, gs, cfg, batch, size, ropts)
		if st != nil {
			st.roleGraph = roleGraph
		}
		return st, err
	}
	s, err := runtime.NewSession(data, ropts)
	if err != nil {
		return nil, err
	}
	params, err := trainfeed.Params(gs)
	if err != nil {
		s.Close()
		return nil, err
	}
	st := &Stepper{Session: s, Device: s.Device, GraphNodes: len(gs.Training.Proto.Graph.Node), ParamTensors: len(gs.Params), Ops: OpCounts(gs.Training), roleGraph: roleGraph}
	st.inputs = trainfeed.Feeds(s.Inputs, params, trainfeed.NewBatch(gs, batch, size), benchLossScale)
	if Optim != "none" {
		for _, p := range gs.Params {
			st.params = append(st.params, &optim.Param{Name: p.GetName(), Shape: p.GetDims(), Data: params[p.GetName()].Float32})
		}
		if st.opt, err = optim.New(st.params, cfg); err != nil {
			s.Close()
			return nil, err
		}
	}
	return st, nil
}

// benchLR is the learning rate of every step, torch_step.py's.
func benchLR(a optim.Algorithm) float64 {
	if a == optim.SGD {
		return 0.001
	}
	return 1e-4
}

// newResidentStepper opens a resident.Trainer on the training graph with
// the batch uploaded once, as torch_step.py keeps its batch on the GPU.
func newResidentStepper(data []byte, gs *grad.Graphs, cfg optim.Config, batch, size int, opts runtime.Options) (*Stepper, error) {
	var params []resident.Param
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			return nil, err
		}
		params = append(params, resident.Param{Name: p.GetName(), Shape: p.GetDims(), Data: v})
	}
	half := Precision == "fp16"
	tr, err := resident.New(data, params, cfg, resident.Options{Session: opts, GradScale: half, CUDAGraph: CUDAGraph})
	if err != nil {
		return nil, err
	}
	if half {
		if err := tr.SetGradScale(1 / benchLossScale); err != nil {
			tr.Close()
			return nil, err
		}
	}
	feeds := trainfeed.Feeds(tr.Inputs(), nil, trainfeed.NewBatch(gs, batch, size), benchLossScale)
	for i, in := range tr.Inputs() {
		if !slices.Contains(tr.DataInputs(), in.Name) {
			continue
		}
		if f := feeds[i]; f.Int64 != nil {
			err = tr.SetInput(in.Name, f.Int64)
		} else {
			err = tr.SetInput(in.Name, f.Float32)
		}
		if err != nil {
			tr.Close()
			return nil, err
		}
	}
	st := &Stepper{Device: tr.Device(), res: tr, GraphNodes: len(gs.Training.Proto.Graph.Node), ParamTensors: len(gs.Params), Ops: OpCounts(gs.Training)}
	return st, nil
}

// Step runs one forward+backward pass. The outputs (loss, every
// gradient) land in Go memory, as finetune's do: ONNX Runtime writes them
// into the buffers of the first step's outputs (runtime.Session.RunInto).
func (s *Stepper) Step() error {
	if s.res != nil {
		loss, err := s.res.Forward()
		if err != nil {
			return err
		}
		s.Losses = append(s.Losses, loss)
		t := time.Now()
		r, err := s.res.Update(benchLR(optim.Algorithm(Optim)))
		s.UpdateMs = append(s.UpdateMs, float64(time.Since(t).Microseconds())/1000)
		if r.Skipped {
			s.Skipped++
		}
		return err
	}
	outs, err := s.Session.RunInto(s.outs, s.inputs...)
	if err != nil {
		return err
	}
	s.outs = outs
	if i := s.Session.OutputIndex(grad.LossName); i >= 0 && len(outs[i].Float32) > 0 {
		s.Losses = append(s.Losses, float64(outs[i].Float32[0]))
	}
	if s.opt == nil {
		return nil
	}
	for _, p := range s.params {
		p.Grad = outs[s.Session.OutputIndex(grad.GradPrefix+p.Name)].Float32
		if Precision == "fp16" { // as finetune's host form: unscale in Go
			for i := range p.Grad {
				p.Grad[i] /= benchLossScale
			}
		}
	}
	err = s.opt.Step(benchLR(optim.Algorithm(Optim)))
	if errors.Is(err, optim.ErrNonFiniteGrad) { // skipped, as the resident graph skips
		s.Skipped++
		return nil
	}
	return err
}

// Close releases the session.
func (s *Stepper) Close() error {
	if s.res != nil {
		s.res.Close()
		return nil
	}
	return s.Session.Close()
}

// Run builds, warms up and times the steps.
func Run(model string, batch, size, threads, steps, warmup int, device string) (*Result, error) {
	t0 := time.Now()
	st, err := NewStepper(model, batch, size, threads, device)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	r := &Result{Model: model, Batch: batch, Size: size, Threads: threads, Device: st.Device, Optim: Optim, Resident: Resident, WeightGradConv: WeightGradConv, Precision: Precision,
		CUDAOptions: SessionCUDAOptions(Precision, CUDAOptions), ConvGrad: ConvGrad.String(), BuildSec: time.Since(t0).Seconds(), GraphNodes: st.GraphNodes, ParamTensor: st.ParamTensors, Ops: st.Ops, roleGraph: st.roleGraph}
	if st.res != nil {
		r.CUDAGraph, r.CUDAGraphOptimizer = st.res.CUDAGraphs()
	}
	debug.FreeOSMemory() // as finetune does after compiling
	r.RSSBeforeStepsMiB = procStatusMiB("VmRSS:")
	for i := 0; i < warmup; i++ {
		if err := st.Step(); err != nil {
			return nil, err
		}
	}
	cpu0 := cpuTime()
	for i := 0; i < steps; i++ {
		t := time.Now()
		if err := st.Step(); err != nil {
			return nil, err
		}
		r.StepsMs = append(r.StepsMs, float64(time.Since(t).Microseconds())/1000)
	}
	r.CPUMsPerStep = float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(max(steps, 1))
	r.MedianMs = median(r.StepsMs)
	for _, l := range st.Losses {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			r.Losses = append(r.Losses, nil)
		} else {
			r.Losses = append(r.Losses, &l)
		}
	}
	r.SkippedSteps = st.Skipped
	if len(st.UpdateMs) > warmup {
		r.UpdateMedianMs = median(st.UpdateMs[warmup:])
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r.PeakRSSMiB = float64(ru.Maxrss) / 1024 // kilobytes on Linux
	}
	return r, nil
}

// median is the middle of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 0:
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusMiB reads a kB field of /proc/self/status (0 when unavailable).
func procStatusMiB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
