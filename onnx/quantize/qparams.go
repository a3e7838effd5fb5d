package quantize

import (
	"fmt"
	"math"

	"github.com/segtune/segtune/onnx"
)

// QType is an 8-bit quantized element type.
type QType int

// The quantized types ONNX Runtime's CPU kernels take.
const (
	Uint8 QType = iota
	Int8
)

// String names the type as ONNX Runtime does ("uint8", "int8").
func (q QType) String() string {
	if q == Int8 {
		return "int8"
	}
	return "uint8"
}

// ParseQType reads "uint8" or "int8".
func ParseQType(s string) (QType, error) {
	switch s {
	case "uint8", "u8":
		return Uint8, nil
	case "int8", "s8":
		return Int8, nil
	}
	return 0, fmt.Errorf("unknown quantized type %q (want uint8 or int8)", s)
}

// DataType is the ONNX element type of q.
func (q QType) DataType() onnx.DataType {
	if q == Int8 {
		return onnx.Int8
	}
	return onnx.Uint8
}

// Bounds returns the integer range [qmin, qmax] of q as onnxruntime's
// quantizer uses it: symmetric int8 leaves out −128 so that the range is
// symmetric around the zero point 0, and reduceRange (7-bit values, for
// CPUs without VNNI whose u8×s8 products can saturate) halves the range.
func (q QType) Bounds(symmetric, reduceRange bool) (qmin, qmax int32) {
	if q == Uint8 {
		if reduceRange {
			return 0, 127
		}
		return 0, 255
	}
	switch {
	case reduceRange:
		return -64, 64
	case symmetric:
		return -127, 127
	}
	return -128, 127
}

// Range is a closed interval of real values a tensor is expected to take.
type Range struct {
	Min float32 `json:"min"`
	Max float32 `json:"max"`
}

// Params are the scale and zero point of a linear quantization:
// real = scale · (q − zero point).
type Params struct {
	Scale     float32 `json:"scale"`
	ZeroPoint int32   `json:"zero_point"`
}

// ComputeParams returns the scale and zero point that map [rmin, rmax]
// onto [qmin, qmax]. The range is first widened to contain 0 (so that 0,
// the padding value, is exact); symmetric quantization widens it to
// [−a, a] with a = max(|rmin|, |rmax|) and puts the zero point in the
// middle of the integer range. A range of (almost) zero width gets scale
// 1 and zero point 0. The arithmetic is done in float64 and the scale
// rounded to float32 last, as onnxruntime's compute_scale_zp does.
func ComputeParams(rmin, rmax float32, qmin, qmax int32, symmetric bool) (Params, error) {
	if qmin >= qmax {
		return Params{}, fmt.Errorf("quantize: empty integer range [%d, %d]", qmin, qmax)
	}
	lo, hi := float64(rmin), float64(rmax)
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return Params{}, fmt.Errorf("quantize: range [%v, %v] is not finite", rmin, rmax)
	}
	if lo > hi {
		return Params{}, fmt.Errorf("quantize: range [%v, %v] has min above max", rmin, rmax)
	}
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if symmetric {
		a := math.Max(math.Abs(lo), math.Abs(hi))
		lo, hi = -a, a
	}
	scale := (hi - lo) / float64(qmax-qmin)
	if scale < minNormalFloat32 {
		return Params{Scale: 1, ZeroPoint: 0}, nil
	}
	var zp float64
	if symmetric {
		zp = math.RoundToEven(float64(qmin+qmax) / 2)
	} else {
		zp = math.RoundToEven(float64(qmin) - lo/scale)
	}
	return Params{Scale: float32(scale), ZeroPoint: int32(zp)}, nil
}

// minNormalFloat32 is numpy's finfo(float32).tiny, the smallest normal
// float32: scales below it are replaced by 1.
const minNormalFloat32 = 0x1p-126

// QuantizeValue maps x to its integer: round(x / scale) + zero point
// (rounding half to even, as QuantizeLinear does), saturated to
// [qmin, qmax].
func QuantizeValue(x float32, p Params, qmin, qmax int32) int32 {
	// The division is done in float32, as ONNX Runtime's kernel does, so
	// that ties round the same way offline and at run time.
	v := math.RoundToEven(float64(float32(x/p.Scale))) + float64(p.ZeroPoint)
	switch {
	case math.IsNaN(v):
		return p.ZeroPoint
	case v < float64(qmin):
		return qmin
	case v > float64(qmax):
		return qmax
	}
	return int32(v)
}

// Dequantize maps an integer back to its real value.
func Dequantize(q int32, p Params) float32 {
	return p.Scale * float32(q-p.ZeroPoint)
}
