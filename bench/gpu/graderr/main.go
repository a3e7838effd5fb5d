// Command graderr measures segtune's gradient error against float64 at one
// precision, on the inputs and float64 gradients that
// bench/gpu/torch_grad_error.py --save-inputs wrote:
//
//	python3 bench/gpu/torch_grad_error.py --model mobilenetv2 --device cuda --precision fp32 --save-inputs ref.npz
//	graderr --model testdata/generated/deeplabv3plus_mobilenetv2.onnx --inputs ref.npz --device cuda --precision bf16
//
// It compiles the model's training graph as finetune does on that device
// (every parameter trainable; on a GPU the GPU forms of the backward;
// fp16 and bf16 through onnx/autocast, fp16 with a loss scale that starts at
// 2^16 and halves while a gradient overflows, as PyTorch's GradScaler
// settles it; TF32 on for tf32 only), runs one step, and prints one JSON
// object with the relative error ‖g − g64‖/‖g64‖ of every parameter's
// gradient, their median and max: the segtune half of the tolerance "at most
// 2× PyTorch's own error against float64 at the same precision", whose
// PyTorch half torch_grad_error.py prints on the same inputs.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"codeberg.org/sbinet/npyio/npz"

	"github.com/segtune/segtune/bench/internal/trainfeed"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Result is what graderr prints.
type Result struct {
	Side      string             `json:"side"`
	Model     string             `json:"model"`
	Device    string             `json:"device"`
	Precision string             `json:"precision"`
	ConvGrad  string             `json:"convgrad"`
	Loss      float64            `json:"loss"`
	Loss64    float64            `json:"loss_f64"`
	LossScale float64            `json:"loss_scale,omitempty"`
	Params    int                `json:"params"`
	Max       float64            `json:"rel_error_max"`
	MaxParam  string             `json:"rel_error_max_param"`
	Median    float64            `json:"rel_error_median"`
	RelError  map[string]float64 `json:"rel_error"`
}

func main() {
	model := flag.String("model", "testdata/generated/deeplabv3plus_mobilenetv2.onnx", "inference ONNX model")
	inputs := flag.String("inputs", "", "the .npz torch_grad_error.py --save-inputs wrote")
	device := flag.String("device", "cuda", "cpu or cuda")
	precision := flag.String("precision", "fp32", "fp32, tf32, fp16 or bf16")
	convGrad := flag.String("convgrad", "none", "convolution classes whose backward pass is one ConvGrad node (grad.Config.ConvGrad): all, none, or a list of dense, pointwise, depthwise and grouped")
	flag.Parse()
	classes, err := grad.ParseConvClasses(*convGrad)
	if err != nil {
		fmt.Fprintf(os.Stderr, "graderr: --convgrad %s: %v\n", *convGrad, err)
		os.Exit(2)
	}
	r, err := run(*model, *inputs, *device, *precision, classes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "graderr:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

// reference is what the .npz holds.
type reference struct {
	batch         trainfeed.Batch
	loss64        float64
	grads64       map[string][]float64
	height, width int
}

func readReference(path string) (*reference, error) {
	f, err := npz.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ref := &reference{grads64: map[string][]float64{}}
	var x []float32
	var target []int64
	if err := f.Read("x.npy", &x); err != nil {
		return nil, fmt.Errorf("%s: x: %w", path, err)
	}
	if err := f.Read("target.npy", &target); err != nil {
		return nil, fmt.Errorf("%s: target: %w", path, err)
	}
	xs := f.Header("x.npy").Descr.Shape
	if len(xs) != 4 || xs[1] != 3 {
		return nil, fmt.Errorf("%s: x has shape %v, want [N 3 H W]", path, xs)
	}
	ref.height, ref.width = xs[2], xs[3]
	ref.batch = trainfeed.Batch{
		Image:  *runtime.NewFloat32([]int64{int64(xs[0]), 3, int64(xs[2]), int64(xs[3])}, x),
		Target: *runtime.NewInt64([]int64{int64(xs[0]), int64(xs[2]), int64(xs[3])}, target),
	}
	if err := f.Read("loss.npy", &ref.loss64); err != nil {
		return nil, fmt.Errorf("%s: loss: %w", path, err)
	}
	for _, k := range f.Keys() {
		name := strings.TrimSuffix(k, ".npy")
		if name == "x" || name == "target" || name == "loss" {
			continue
		}
		var g []float64
		if err := f.Read(k, &g); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		ref.grads64[name] = g
	}
	return ref, nil
}

func run(model, inputs, device, precision string, convGrad grad.ConvClasses) (*Result, error) {
	if inputs == "" {
		return nil, errors.New("--inputs is required")
	}
	ref, err := readReference(inputs)
	if err != nil {
		return nil, err
	}
	m, err := onnx.Load(model)
	if err != nil {
		return nil, err
	}
	var trainable []string // exact names: autocast hides weights from consumer-based patterns
	for name := range onnx.ParameterNames(m.Graph()) {
		trainable = append(trainable, "re:"+regexp.QuoteMeta(name))
	}
	cfg := grad.Config{
		Prober:           ortprobe.Prober{},
		Trainable:        trainable,
		InputShapes:      map[string][]int64{onnx.DataInputs(m.Graph())[0].GetName(): ref.batch.Image.Shape},
		DirectConvs:      device != runtime.DeviceCPU, // as finetune: Winograd forms on the CPU only
		MatrixReductions: device != runtime.DeviceCPU,
		ConvGrad:         convGrad,
	}
	switch precision {
	case "fp32", "tf32":
	case "bf16", "fp16":
		if precision == "bf16" && device == runtime.DeviceCPU {
			return nil, errors.New("--precision bf16: ONNX Runtime's CPU provider has no bfloat16 Conv; use --device cuda")
		}
		typ, _ := autocast.ForPrecision(precision)
		if _, err := autocast.Apply(m, typ); err != nil {
			return nil, err
		}
		cfg.MinOpset = typ.MinOpset()
		cfg.Loss.Scale = typ == autocast.Float16
	default:
		return nil, fmt.Errorf("--precision %q: want fp32, tf32, fp16 or bf16", precision)
	}
	gs, err := grad.Build(m, cfg)
	if err != nil {
		return nil, err
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{Device: device, Log: os.Stderr}
	if device != runtime.DeviceCPU {
		opts.CUDAOptions = map[string]string{"use_tf32": map[bool]string{true: "1", false: "0"}[precision == "tf32"]}
	}
	trainfeed.ConvGradKernels(&opts, convGrad)
	s, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.Device != device {
		return nil, fmt.Errorf("--device %s: the session runs on %s", device, s.Device)
	}
	params, err := trainfeed.Params(gs)
	if err != nil {
		return nil, err
	}
	scale := 1.0
	if cfg.Loss.Scale {
		scale = 1 << 16
	}
	var outs []*runtime.Tensor
	for {
		feeds := trainfeed.Feeds(s.Inputs, params, ref.batch, float32(scale))
		if outs, err = s.Run(feeds...); err != nil {
			return nil, err
		}
		if !cfg.Loss.Scale || allFinite(s, outs) || scale < 1 {
			break
		}
		scale /= 2
	}
	r := &Result{Side: "segtune", Model: model, Device: s.Device, Precision: precision, ConvGrad: convGrad.String(), Loss64: ref.loss64,
		RelError: map[string]float64{}}
	if cfg.Loss.Scale {
		r.LossScale = scale
	}
	r.Loss = float64(outs[s.OutputIndex(grad.LossName)].Float32[0])
	var errs []float64
	for _, p := range gs.Params {
		g64 := ref.grads64[p.GetName()]
		if g64 == nil {
			return nil, fmt.Errorf("%s has no float64 gradient of %q", inputs, p.GetName())
		}
		i := s.OutputIndex(grad.GradPrefix + p.GetName())
		if i < 0 || outs[i] == nil || len(outs[i].Float32) != len(g64) {
			return nil, fmt.Errorf("no float32 gradient of %q of %d values", p.GetName(), len(g64))
		}
		e, ok := relError(outs[i].Float32, g64, scale)
		if !ok {
			continue // a zero reference gradient: no relative error, as torch_grad_error.py
		}
		r.RelError[p.GetName()] = e
		errs = append(errs, e)
		if e > r.Max || math.IsNaN(e) {
			r.Max, r.MaxParam = e, p.GetName()
		}
	}
	r.Params = len(gs.Params)
	if len(errs) == 0 {
		return nil, errors.New("every float64 gradient is zero")
	}
	slices.Sort(errs)
	r.Median = errs[len(errs)/2]
	if len(errs)%2 == 0 {
		r.Median = (errs[len(errs)/2-1] + errs[len(errs)/2]) / 2 // statistics.median's
	}
	return r, nil
}

// relError is ‖g/scale − g64‖ / ‖g64‖ in float64; false where g64 is zero.
func relError(g []float32, g64 []float64, scale float64) (float64, bool) {
	var d, n float64
	for i, v := range g64 {
		e := float64(g[i])/scale - v
		d += e * e
		n += v * v
	}
	return math.Sqrt(d / n), n > 0
}

// allFinite reports whether every gradient output is finite.
func allFinite(s *runtime.Session, outs []*runtime.Tensor) bool {
	for i, o := range s.Outputs {
		if !strings.HasPrefix(o.Name, grad.GradPrefix) || outs[i] == nil {
			continue
		}
		for _, v := range outs[i].Float32 {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
		}
	}
	return true
}
