package quantize

import (
	"fmt"
	"math"
)

// Weights is a quantized weight tensor: its integers in the tensor's
// element order and the scale and zero point of each slice along Axis
// (one entry, Axis −1, for per-tensor quantization).
type Weights struct {
	Values []int32
	Params []Params
	Axis   int
}

// QuantizeWeights quantizes a float tensor of shape dims to qt. With
// axis ≥ 0, each slice along that axis (an output channel) gets its own
// scale from its own min and max; with axis −1 the tensor shares one.
// Symmetric quantization is what onnxruntime uses for int8 weights.
func QuantizeWeights(data []float32, dims []int64, axis int, qt QType, symmetric, reduceRange bool) (*Weights, error) {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if n != int64(len(data)) {
		return nil, fmt.Errorf("quantize: %d values for dims %v", len(data), dims)
	}
	qmin, qmax := qt.Bounds(symmetric, reduceRange)
	if axis < 0 {
		lo, hi := minMax(data)
		p, err := ComputeParams(lo, hi, qmin, qmax, symmetric)
		if err != nil {
			return nil, err
		}
		w := &Weights{Values: make([]int32, len(data)), Params: []Params{p}, Axis: -1}
		for i, x := range data {
			w.Values[i] = QuantizeValue(x, p, qmin, qmax)
		}
		return w, nil
	}
	if axis >= len(dims) {
		return nil, fmt.Errorf("quantize: channel axis %d of a rank-%d tensor", axis, len(dims))
	}
	// The tensor is outer × channels × inner in memory.
	outer, inner := int64(1), int64(1)
	for i, d := range dims {
		switch {
		case i < axis:
			outer *= d
		case i > axis:
			inner *= d
		}
	}
	ch := dims[axis]
	w := &Weights{Values: make([]int32, len(data)), Params: make([]Params, ch), Axis: axis}
	for c := int64(0); c < ch; c++ {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for o := int64(0); o < outer; o++ {
			l, h := minMax(data[(o*ch+c)*inner : (o*ch+c+1)*inner])
			lo, hi = min(lo, l), max(hi, h)
		}
		p, err := ComputeParams(lo, hi, qmin, qmax, symmetric)
		if err != nil {
			return nil, fmt.Errorf("channel %d: %w", c, err)
		}
		w.Params[c] = p
		for o := int64(0); o < outer; o++ {
			base := (o*ch + c) * inner
			for i := base; i < base+inner; i++ {
				w.Values[i] = QuantizeValue(data[i], p, qmin, qmax)
			}
		}
	}
	return w, nil
}

// minMax returns the smallest and largest value of xs, (0, 0) for none.
func minMax(xs []float32) (float32, float32) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// Bias is a bias quantized to int32 for an integer convolution.
type Bias struct {
	Values []int32
	Scales []float32
	// Clipped counts values that did not fit in an int32 and were
	// saturated (a sign that the input or weight scale is tiny).
	Clipped int
}

// QuantizeBias quantizes a Conv bias (one value per output channel) to
// int32 with zero point 0 and scale inputScale × weightScale[c] (one
// weight scale for all channels when weightScales has one entry): the
// scale of the integer accumulator the bias is added to, so an integer
// kernel adds it without rescaling. Values are rounded half to even in
// float64 and saturated to the int32 range.
func QuantizeBias(bias []float32, inputScale float32, weightScales []float32) (*Bias, error) {
	if len(weightScales) != 1 && len(weightScales) != len(bias) {
		return nil, fmt.Errorf("quantize: %d weight scales for a bias of %d values", len(weightScales), len(bias))
	}
	b := &Bias{Values: make([]int32, len(bias)), Scales: make([]float32, len(bias))}
	for i, v := range bias {
		ws := weightScales[0]
		if len(weightScales) > 1 {
			ws = weightScales[i]
		}
		s := inputScale * ws
		if !(s > 0) {
			return nil, fmt.Errorf("quantize: bias %d: scale %v × %v is not positive", i, inputScale, ws)
		}
		b.Scales[i] = s
		q := math.RoundToEven(float64(v) / float64(s))
		switch {
		case q > math.MaxInt32:
			q, b.Clipped = math.MaxInt32, b.Clipped+1
		case q < math.MinInt32:
			q, b.Clipped = math.MinInt32, b.Clipped+1
		}
		b.Values[i] = int32(q)
	}
	return b, nil
}
