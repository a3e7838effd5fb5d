package deploy

import (
	"fmt"
	"strings"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
)

// Sample returns n paths spread evenly over paths (all of them when n is
// 0 or at least their number), keeping their order: frames of a video
// next to each other are alike, so taking every k-th covers more.
func Sample(paths []string, n int) []string {
	if n <= 0 || n >= len(paths) {
		return append([]string(nil), paths...)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = paths[i*len(paths)/n]
	}
	return out
}

// CalibrationInfo says what the ranges were computed on.
type CalibrationInfo struct {
	Method     string  `json:"method"`
	Percentile float64 `json:"percentile,omitempty"`
	Images     int     `json:"images"`
	Tensors    int     `json:"tensors"`
	// Passes is the number of runs per image (more than one when the
	// tensors of one image would not fit in memory together).
	Passes  int     `json:"passes"`
	Seconds float64 `json:"seconds"`
}

// Calibrate runs the float model m on each image, prepared as ref (the
// float model's segmenter) prepares them, with the tensors listed added as
// graph outputs, and feeds their values to cal. It returns the tensors'
// ranges. The tensors of one image must fit in memory: a first run on a
// small blank input measures how their size grows with the image, and
// when all of them together would take more than a quarter of the memory
// limit they are fetched over several runs per image.
func Calibrate(m *onnx.Model, ref *inference.Segmenter, tensors []string, types quantize.ElemTypes,
	images []string, cal *quantize.Calibrator, opts runtime.Options, progress func(done, total int)) (map[string]quantize.Range, *CalibrationInfo, error) {
	start := time.Now()
	if len(images) == 0 {
		return nil, nil, fmt.Errorf("no calibration images")
	}
	for _, t := range tensors {
		if types[t] != onnx.Float32 {
			return nil, nil, fmt.Errorf("calibration: tensor %q is %v, not float32", t, types[t])
		}
	}
	layout := contract.Layout(strings.ToUpper(string(ref.Pre.Layout)))
	batch := max(ref.FixedBatch, 1)
	dec := imageio.Decoder{}
	// Prepare the first image now: its size sets the memory estimate.
	first, err := prepare(dec, ref, images[0], batch)
	if err != nil {
		return nil, nil, err
	}
	groups, err := calibrationPasses(m, ref, tensors, first, layout, batch, opts)
	if err != nil {
		return nil, nil, err
	}
	var passes []*calibrationPass
	defer func() {
		for _, p := range passes {
			p.sess.Close()
		}
	}()
	for _, g := range groups {
		p, err := newCalibrationPass(m, g, opts)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	for i, path := range images {
		in := first
		if i > 0 {
			if in, err = prepare(dec, ref, path, batch); err != nil {
				return nil, nil, err
			}
		}
		for _, p := range passes {
			outs, err := p.sess.Run(runtime.NewFloat32(layout.Shape(batch, in.h, in.w), in.data))
			if err != nil {
				return nil, nil, fmt.Errorf("calibration image %s: %w", path, err)
			}
			for j, t := range p.tensors {
				if err := cal.Collect(t, outs[p.index[j]].Float32); err != nil {
					return nil, nil, fmt.Errorf("calibration image %s: %w", path, err)
				}
			}
		}
		if progress != nil {
			progress(i+1, len(images))
		}
	}
	o := cal.Options()
	info := &CalibrationInfo{Method: string(o.Method), Images: len(images), Tensors: len(tensors),
		Passes: len(passes), Seconds: time.Since(start).Seconds()}
	if o.Method == quantize.Percentile {
		info.Percentile = o.Percentile
	}
	return cal.Ranges(), info, nil
}

// prepared is one calibration input: a batch of one image (repeated to a
// fixed batch: copies leave the ranges as they are).
type prepared struct {
	data []float32
	h, w int
}

func prepare(dec imageio.Decoder, ref *inference.Segmenter, path string, batch int) (prepared, error) {
	img, err := dec.ReadFile(path)
	if err != nil {
		return prepared{}, fmt.Errorf("calibration image %w", err)
	}
	x, geo, err := ref.Pre.NewTensor(img)
	if err != nil {
		return prepared{}, fmt.Errorf("calibration image %s: %w", path, err)
	}
	in := x
	for b := 1; b < batch; b++ {
		in = append(in, x...)
	}
	return prepared{data: in, h: geo.Height, w: geo.Width}, nil
}

// calibrationPass is a session of the float model with some tensors
// added as outputs.
type calibrationPass struct {
	sess    *runtime.Session
	tensors []string
	index   []int
}

func newCalibrationPass(m *onnx.Model, tensors []string, opts runtime.Options) (*calibrationPass, error) {
	aug := m.Clone()
	g := aug.Graph()
	listed := map[string]bool{}
	for _, v := range g.GetOutput() {
		listed[v.GetName()] = true
	}
	for _, t := range tensors {
		if !listed[t] {
			listed[t] = true
			vi := onnx.TensorValueInfo(t, onnx.Float32)
			vi.Type.GetTensorType().Shape = nil // rank unknown here
			g.Output = append(g.Output, vi)
		}
	}
	data, err := aug.Marshal()
	if err != nil {
		return nil, err
	}
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, fmt.Errorf("calibration model: %w", err)
	}
	p := &calibrationPass{sess: sess, tensors: tensors, index: make([]int, len(tensors))}
	for i, t := range tensors {
		if p.index[i] = sess.OutputIndex(t); p.index[i] < 0 {
			sess.Close()
			return nil, fmt.Errorf("calibration model has no output %q", t)
		}
	}
	return p, nil
}

// FixCalibration is the advice on a calibrated tensor over its share of
// the memory limit, naming the settings by {key} (setting.Messagef).
const FixCalibration = "calibrate at a smaller size ({size}/{scale}), or leave its layer in float with {keep_float}"

// calibrationPasses splits tensors into groups whose values for one input
// like first fit in a quarter of the memory limit. The size of each
// tensor is measured on a blank input of a quarter of first's sides (the
// input itself for a model with a fixed size) and scaled by the area.
func calibrationPasses(m *onnx.Model, ref *inference.Segmenter, tensors []string, first prepared,
	layout contract.Layout, batch int, opts runtime.Options) ([][]string, error) {
	ph, pw := first.h, first.w
	if ref.Contract.Height <= 0 || ref.Contract.Width <= 0 {
		ph, pw = max(first.h/4, 33), max(first.w/4, 33)
	}
	probe, err := newCalibrationPass(m, tensors, opts)
	if err != nil {
		return nil, err
	}
	defer probe.sess.Close()
	outs, err := probe.sess.Run(runtime.NewFloat32(layout.Shape(batch, ph, pw), make([]float32, batch*imageio.Channels*ph*pw)))
	if err != nil {
		// A model that cannot run at the probe's size is fetched in one
		// pass, as before any estimate.
		return [][]string{tensors}, nil
	}
	scale := float64(first.h*first.w) / float64(ph*pw)
	limit, _ := memlimit.Limit()
	budget := limit / 4
	var groups [][]string
	var cur []string
	var used int64
	for j, t := range tensors {
		bytes := int64(float64(len(outs[probe.index[j]].Float32))*scale) * 4
		if bytes > budget {
			_, from := memlimit.Limit()
			return nil, setting.Messagef("calibration: tensor %q of a %dx%d input takes about %s, more than a quarter of the memory limit of %s ("+strings.ReplaceAll(string(from), "%", "%%")+"): "+FixCalibration+": %w",
				t, first.w, first.h, memlimit.Human(bytes), memlimit.Human(limit), memlimit.ErrTooLarge)
		}
		if used+bytes > budget && len(cur) > 0 {
			groups, cur, used = append(groups, cur), nil, 0
		}
		cur, used = append(cur, t), used+bytes
	}
	return append(groups, cur), nil
}
