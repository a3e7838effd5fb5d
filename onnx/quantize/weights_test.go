package quantize

import (
	"math"
	"slices"
	"testing"
)

// A Conv weight [2 out, 1 in, 1, 3]: channel 0 spans ±127/64 (scale 1/64),
// channel 1 ±127/8192 (scale 1/8192); powers of two keep the arithmetic
// exact, so ties are ties.
func TestQuantizeWeightsPerChannel(t *testing.T) {
	data := []float32{127.0 / 64, -127.0 / 64, 32.5 / 64, 127.0 / 8192, -63.5 / 8192, 1.0 / 8192}
	dims := []int64{2, 1, 1, 3}
	w, err := QuantizeWeights(data, dims, 0, Int8, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Params) != 2 || w.Axis != 0 {
		t.Fatalf("params %+v axis %d", w.Params, w.Axis)
	}
	if w.Params[0].Scale != 1.0/64 || w.Params[1].Scale != 1.0/8192 {
		t.Errorf("scales %v %v, want 1/64 and 1/8192", w.Params[0].Scale, w.Params[1].Scale)
	}
	for _, p := range w.Params {
		if p.ZeroPoint != 0 {
			t.Errorf("symmetric weights with zero point %d", p.ZeroPoint)
		}
	}
	// ±max maps to ±127; 32.5 and −63.5 levels round to even 32 and −64.
	want := []int32{127, -127, 32, 127, -64, 1}
	for i := range want {
		if w.Values[i] != want[i] {
			t.Errorf("value %d: %d, want %d (all %v)", i, w.Values[i], want[i], w.Values)
		}
	}
	// One scale for both channels flattens the small one.
	pt, err := QuantizeWeights(data, dims, -1, Int8, true, false)
	if err != nil {
		t.Fatal(err)
	}
	errOf := func(w *Weights, i int) float64 {
		p := w.Params[0]
		if w.Axis >= 0 {
			p = w.Params[i/3]
		}
		return math.Abs(float64(Dequantize(w.Values[i], p) - data[i]))
	}
	for i := 3; i < 6; i++ {
		if a, b := errOf(w, i), errOf(pt, i); !(a < b) && b != 0 {
			t.Errorf("value %d: per-channel error %g not below per-tensor %g", i, a, b)
		}
	}
}

// Gemm's B [K=2, N=2] without transB: output channels are columns (axis 1).
func TestQuantizeWeightsAxis1(t *testing.T) {
	data := []float32{127.0 / 64, 63.5 / 8192, -127.0 / 64, 127.0 / 8192}
	w, err := QuantizeWeights(data, []int64{2, 2}, 1, Int8, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if w.Params[0].Scale != 1.0/64 || w.Params[1].Scale != 1.0/8192 {
		t.Errorf("column scales %v", w.Params)
	}
	if want := []int32{127, 64, -127, 127}; !slices.Equal(w.Values, want) {
		t.Errorf("values %v, want %v", w.Values, want)
	}
	if _, err := QuantizeWeights(data, []int64{2, 2}, 2, Int8, true, false); err == nil {
		t.Error("axis beyond the rank accepted")
	}
	if _, err := QuantizeWeights(data, []int64{3, 2}, 0, Int8, true, false); err == nil {
		t.Error("dims not matching the data accepted")
	}
}

func TestReduceRangeWeights(t *testing.T) {
	w, err := QuantizeWeights([]float32{-1, 1}, []int64{2}, -1, Int8, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if w.Values[0] != -64 || w.Values[1] != 64 {
		t.Errorf("7-bit weights %v, want ±64", w.Values)
	}
}

func TestQuantizeBias(t *testing.T) {
	b, err := QuantizeBias([]float32{0.5, -0.25}, 0.01, []float32{0.1, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// Scales 0.01·0.1 and 0.01·0.5; 0.5/0.001 = 500, −0.25/0.005 = −50.
	if b.Values[0] != 500 || b.Values[1] != -50 {
		t.Errorf("values %v, want [500 -50]", b.Values)
	}
	if b.Scales[0] != float32(0.01)*float32(0.1) || b.Scales[1] != float32(0.01)*float32(0.5) {
		t.Errorf("scales %v", b.Scales)
	}
	// One weight scale for every channel.
	b, err = QuantizeBias([]float32{1, 2}, 0.5, []float32{0.25})
	if err != nil || b.Values[0] != 8 || b.Values[1] != 16 {
		t.Errorf("per-tensor: %+v %v", b, err)
	}
	// Beyond int32: saturated and counted.
	b, err = QuantizeBias([]float32{1e9, -1e9}, 1e-3, []float32{1e-3})
	if err != nil || b.Values[0] != math.MaxInt32 || b.Values[1] != math.MinInt32 || b.Clipped != 2 {
		t.Errorf("saturation: %+v %v", b, err)
	}
	if _, err := QuantizeBias([]float32{1, 2, 3}, 1, []float32{1, 2}); err == nil {
		t.Error("mismatched scales accepted")
	}
	if _, err := QuantizeBias([]float32{1}, 0, []float32{1}); err == nil {
		t.Error("zero input scale accepted")
	}
}
