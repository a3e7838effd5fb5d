package runtime

import (
	"fmt"
	"math/rand/v2"

	ort "github.com/yalue/onnxruntime_go"
)

// Tensor is a dense host tensor. Exactly one of the data slices is set; its
// length equals the product of Shape.
type Tensor struct {
	Shape   []int64
	Float32 []float32
	Float64 []float64
	Int64   []int64
	// Uint8 holds uint8 outputs (label maps an arg-max inside the graph
	// made): a byte a value crosses back, not eight.
	Uint8 []uint8
}

// NewFloat32 wraps data (not copied) as a float32 tensor.
func NewFloat32(shape []int64, data []float32) *Tensor {
	return &Tensor{Shape: shape, Float32: data}
}

// NewFloat64 wraps data (not copied) as a float64 tensor.
func NewFloat64(shape []int64, data []float64) *Tensor {
	return &Tensor{Shape: shape, Float64: data}
}

// NewInt64 wraps data (not copied) as an int64 tensor.
func NewInt64(shape []int64, data []int64) *Tensor {
	return &Tensor{Shape: shape, Int64: data}
}

// NewRandomNormal returns a float32 tensor of the given shape filled with
// standard-normal values drawn from rng (a stand-in image or weight for
// probes and benchmarks).
func NewRandomNormal(rng *rand.Rand, shape ...int64) *Tensor {
	t := &Tensor{Shape: shape}
	t.Float32 = make([]float32, t.Len())
	for i := range t.Float32 {
		t.Float32[i] = float32(rng.NormFloat64())
	}
	return t
}

// Len returns the number of elements the shape describes.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= int(d)
	}
	return n
}

// ortValue wraps the tensor's memory for ONNX Runtime without copying.
func (t *Tensor) ortValue() (ort.Value, error) {
	shape := ort.NewShape(t.Shape...)
	n := t.Len()
	switch {
	case t.Float32 != nil:
		if len(t.Float32) != n {
			return nil, fmt.Errorf("float32 tensor of shape %v holds %d values", t.Shape, len(t.Float32))
		}
		return ort.NewTensor(shape, t.Float32)
	case t.Float64 != nil:
		if len(t.Float64) != n {
			return nil, fmt.Errorf("float64 tensor of shape %v holds %d values", t.Shape, len(t.Float64))
		}
		return ort.NewTensor(shape, t.Float64)
	case t.Uint8 != nil:
		if len(t.Uint8) != n {
			return nil, fmt.Errorf("uint8 tensor of shape %v holds %d values", t.Shape, len(t.Uint8))
		}
		return ort.NewTensor(shape, t.Uint8)
	case t.Int64 != nil:
		if len(t.Int64) != n {
			return nil, fmt.Errorf("int64 tensor of shape %v holds %d values", t.Shape, len(t.Int64))
		}
		return ort.NewTensor(shape, t.Int64)
	}
	if n == 0 {
		return ort.NewTensor(shape, []float32{})
	}
	return nil, fmt.Errorf("tensor of shape %v has no data", t.Shape)
}

// fromOrt turns an output Run allocated (an output given no value) into a
// Tensor. onnxruntime_go has already copied ONNX Runtime's memory into a Go
// slice of its own (NewTensor over make) and released the C value, so that
// slice is handed over as it is, not copied a second time: the value
// wraps, but does not own, it, and the caller Destroys the value only.
// Element types the Tensor has no field for are converted.
func fromOrt(v ort.Value) (*Tensor, error) {
	shape := []int64(v.GetShape().Clone())
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		return &Tensor{Shape: shape, Float32: x.GetData()}, nil
	case *ort.Tensor[float64]:
		return &Tensor{Shape: shape, Float64: x.GetData()}, nil
	case *ort.Tensor[int64]:
		return &Tensor{Shape: shape, Int64: x.GetData()}, nil
	case *ort.Tensor[uint8]:
		return &Tensor{Shape: shape, Uint8: x.GetData()}, nil
	case *ort.Tensor[int32]:
		d := x.GetData()
		out := make([]int64, len(d))
		for i, e := range d {
			out[i] = int64(e)
		}
		return &Tensor{Shape: shape, Int64: out}, nil
	case *ort.Tensor[bool]:
		d := x.GetData()
		out := make([]int64, len(d))
		for i, e := range d {
			if e {
				out[i] = 1
			}
		}
		return &Tensor{Shape: shape, Int64: out}, nil
	}
	return nil, fmt.Errorf("output of ONNX type %v and element type %v is not supported", v.GetONNXType(), v.DataType())
}
