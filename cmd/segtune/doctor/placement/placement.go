package placement

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Report says where ONNX Runtime placed a model's nodes on CUDA.
type Report struct {
	Path      string             `json:"path"`
	InputDims []int64            `json:"input_dims"`
	Inference *runtime.Placement `json:"inference,omitempty"`
	Training  *runtime.Placement `json:"training,omitempty"`
	Errors    []string           `json:"errors,omitempty"`
}

// Place runs the model at path, and the training graph compiled from it,
// once on CUDA, its dynamic spatial dimensions set to height x width,
// and reports where their nodes ran. cudaReady says whether ONNX Runtime
// has a working CUDA provider (runtime.CUDADevices); without one nothing
// is run. What goes wrong is recorded in the report's Errors: a session
// that fails ends its graph's check only.
func Place(path string, height, width int64, cudaReady bool) *Report {
	r := &Report{Path: path}
	if err := r.place(path, height, width, cudaReady); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	return r
}

func (r *Report) place(path string, height, width int64, cudaReady bool) error {
	if !cudaReady {
		return errors.New("CUDA unavailable: placement not checked")
	}
	m, err := onnx.Load(path)
	if err != nil {
		return err
	}
	input, dims, err := inputDims(m, height, width)
	if err != nil {
		return err
	}
	r.InputDims = dims
	dir, err := os.MkdirTemp("", "segtune-doctor")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pl := &placer{r: r, dir: dir, rng: rand.New(rand.NewPCG(1, 2)), dims: dims}
	r.Inference = pl.run("inference", data, nil)
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{input: dims}})
	if err != nil {
		return fmt.Errorf("training graph: %w", err)
	}
	tdata, err := gs.Training.Marshal()
	if err != nil {
		return fmt.Errorf("training graph: %w", err)
	}
	params := map[string]*runtime.Tensor{}
	for _, p := range gs.Params {
		if v, err := onnx.Float32s(p); err == nil {
			params[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
		}
	}
	r.Training = pl.run("training", tdata, params)
	return nil
}

// inputDims returns the name and shape of m's first data input, its
// dynamic dimensions set to batch 1, 3 channels and height x width.
func inputDims(m *onnx.Model, height, width int64) (string, []int64, error) {
	ins := onnx.DataInputs(m.Proto.Graph)
	if len(ins) == 0 {
		return "", nil, errors.New("model has no input")
	}
	var dims []int64
	for i, d := range ins[0].GetType().GetTensorType().GetShape().GetDim() {
		v := d.GetDimValue()
		if v <= 0 {
			v = []int64{1, 3, height, width}[min(i, 3)]
		}
		dims = append(dims, v)
	}
	return ins[0].GetName(), dims, nil
}

// placer runs graphs on CUDA with ORT's profiler on, feeding them random
// images of dims.
type placer struct {
	r    *Report
	dir  string
	rng  *rand.Rand
	dims []int64
}

// run runs model once and reads where its nodes ran from the profile;
// params feed the training graph's parameters, a zero target and a unit
// loss scale its other inputs.
func (pl *placer) run(name string, model []byte, params map[string]*runtime.Tensor) *runtime.Placement {
	prefix := filepath.Join(pl.dir, name)
	s, err := runtime.NewSession(model, runtime.Options{Device: runtime.DeviceCUDA, Log: io.Discard,
		Tuning: runtime.Tuning{ProfilePrefix: prefix}})
	if err != nil {
		pl.r.Errors = append(pl.r.Errors, name+": "+err.Error())
		return nil
	}
	if s.Device != runtime.DeviceCUDA {
		s.Close()
		pl.r.Errors = append(pl.r.Errors, name+": the session fell back to the CPU")
		return nil
	}
	_, err = s.Run(pl.feed(s, params)...)
	s.Close()
	if err != nil {
		pl.r.Errors = append(pl.r.Errors, name+": "+err.Error())
		return nil
	}
	p, err := runtime.ProfilePlacement(prefix)
	if err != nil {
		pl.r.Errors = append(pl.r.Errors, name+": "+err.Error())
	}
	return p
}

func (pl *placer) feed(s *runtime.Session, params map[string]*runtime.Tensor) []*runtime.Tensor {
	dims := pl.dims
	var out []*runtime.Tensor
	for _, x := range s.Inputs {
		switch {
		case x.Name == grad.TargetName && params != nil:
			v := make([]int64, dims[0]*dims[2]*dims[3])
			out = append(out, runtime.NewInt64([]int64{dims[0], dims[2], dims[3]}, v))
		case params[x.Name] != nil:
			out = append(out, params[x.Name])
		case x.Name == grad.LossScaleName && params != nil:
			out = append(out, runtime.NewFloat32([]int64{1}, []float32{1}))
		default:
			out = append(out, runtime.NewRandomNormal(pl.rng, dims...))
		}
	}
	return out
}
