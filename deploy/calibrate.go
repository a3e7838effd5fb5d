package deploy

import (
	"fmt"
	"strings"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/segmenter"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
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
	Seconds    float64 `json:"seconds"`
}

// Calibrate runs the float model m on each image, prepared as ref (the
// float model's segmenter) prepares them, with the tensors listed added as
// graph outputs, and feeds their values to cal. It returns the tensors'
// ranges.
func Calibrate(m *onnx.Model, ref *segmenter.Segmenter, tensors []string, types quantize.ElemTypes,
	images []string, cal *quantize.Calibrator, opts runtime.Options, progress func(done, total int)) (map[string]quantize.Range, *CalibrationInfo, error) {
	start := time.Now()
	if len(images) == 0 {
		return nil, nil, fmt.Errorf("no calibration images")
	}
	aug := m.Clone()
	g := aug.Graph()
	listed := map[string]bool{}
	for _, v := range g.GetOutput() {
		listed[v.GetName()] = true
	}
	for _, t := range tensors {
		if types[t] != onnxpb.TensorProto_FLOAT {
			return nil, nil, fmt.Errorf("calibration: tensor %q is %v, not float32", t, types[t])
		}
		if !listed[t] {
			listed[t] = true
			g.Output = append(g.Output, onnx.TensorValueInfo(t, onnxpb.TensorProto_FLOAT))
			g.Output[len(g.Output)-1].Type.GetTensorType().Shape = nil // rank unknown here
		}
	}
	data, err := aug.Marshal()
	if err != nil {
		return nil, nil, err
	}
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("calibration model: %w", err)
	}
	defer sess.Close()
	index := make([]int, len(tensors))
	for i, t := range tensors {
		if index[i] = sess.OutputIndex(t); index[i] < 0 {
			return nil, nil, fmt.Errorf("calibration model has no output %q", t)
		}
	}
	layout := contract.Layout(strings.ToUpper(string(ref.Pre.Layout)))
	batch := max(ref.FixedBatch, 1)
	dec := imageio.Decoder{}
	for i, path := range images {
		img, err := dec.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("calibration image %w", err)
		}
		x, geo, err := ref.Pre.NewTensor(img)
		if err != nil {
			return nil, nil, fmt.Errorf("calibration image %s: %w", path, err)
		}
		// A model with a fixed batch gets the image repeated: copies
		// leave the ranges as they are.
		in := x
		for b := 1; b < batch; b++ {
			in = append(in, x...)
		}
		outs, err := sess.Run(runtime.NewFloat32(layout.Shape(batch, geo.Height, geo.Width), in))
		if err != nil {
			return nil, nil, fmt.Errorf("calibration image %s: %w", path, err)
		}
		for j, t := range tensors {
			if err := cal.Collect(t, outs[index[j]].Float32); err != nil {
				return nil, nil, fmt.Errorf("calibration image %s: %w", path, err)
			}
		}
		if progress != nil {
			progress(i+1, len(images))
		}
	}
	o := cal.Options()
	info := &CalibrationInfo{Method: string(o.Method), Images: len(images), Tensors: len(tensors), Seconds: time.Since(start).Seconds()}
	if o.Method == quantize.Percentile {
		info.Percentile = o.Percentile
	}
	return cal.Ranges(), info, nil
}
