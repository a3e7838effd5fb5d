package deploy

import (
	"fmt"
	"strings"

	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
)

// Precision is an export precision.
type Precision string

// The export precisions.
const (
	FP32 Precision = "fp32"
	FP16 Precision = "fp16"
	INT8 Precision = "int8"
)

// ParsePrecision reads fp32, fp16 or int8.
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(s)); p {
	case FP32, FP16, INT8:
		return p, nil
	}
	return "", fmt.Errorf("unknown precision %q (want fp32, fp16 or int8)", s)
}

// Options configure Convert.
type Options struct {
	Precision Precision
	// Quant and Calib configure int8; CalibImages are the images ranges
	// are computed on.
	Quant       quantize.Options
	Calib       quantize.CalibOptions
	CalibImages []string
	// Keep names op types and node names left in float32 by fp16 (int8
	// takes Quant.Keep).
	Keep []string
	// Session configures the calibration session.
	Session runtime.Options
	// Progress reports calibration progress.
	Progress func(done, total int)
}

// Converted is a converted model and how it was made.
type Converted struct {
	Model       *onnx.Model
	Quant       *quantize.Summary
	Float16     *quantize.Float16Summary
	Calibration *CalibrationInfo
}

// Convert converts the float model m to o.Precision. ref is m's segmenter
// (it prepares calibration images as inference does).
func Convert(m *onnx.Model, ref *inference.Segmenter, o Options) (*Converted, error) {
	switch o.Precision {
	case FP32, "":
		return &Converted{Model: m.Clone()}, nil
	case FP16:
		types, err := ElemTypes(m)
		if err != nil {
			return nil, err
		}
		h, sum, err := quantize.ToFloat16(m, types, quantize.Float16Options{Keep: o.Keep})
		if err != nil {
			return nil, err
		}
		return &Converted{Model: h, Float16: sum}, nil
	case INT8:
		types, err := ElemTypes(m)
		if err != nil {
			return nil, err
		}
		plan, err := quantize.NewPlan(m, types, o.Quant)
		if err != nil {
			return nil, err
		}
		if len(plan.Calibrate) == 0 {
			return nil, fmt.Errorf("nothing to quantize: the model has no float32 Conv, Gemm or MatMul outside the nodes kept in float")
		}
		cal, err := quantize.NewCalibrator(o.Calib)
		if err != nil {
			return nil, err
		}
		ranges, info, err := Calibrate(m, ref, plan.Calibrate, types, o.CalibImages, cal, o.Session, o.Progress)
		if err != nil {
			return nil, err
		}
		q, sum, err := plan.Apply(ranges)
		if err != nil {
			return nil, err
		}
		return &Converted{Model: q, Quant: sum, Calibration: info}, nil
	}
	return nil, fmt.Errorf("unknown precision %q", o.Precision)
}
