package onnx

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// MaxTensorElements bounds the element count of any tensor segtune
// materialises, so that a hostile file cannot make it allocate without limit.
const MaxTensorElements = 1 << 31

// NumElements returns the product of dims, or an error for negative
// dimensions and products beyond MaxTensorElements.
func NumElements(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in %v", d, dims)
		}
		if d != 0 && n > MaxTensorElements/d {
			return 0, fmt.Errorf("dimensions %v hold more than %d elements", dims, int64(MaxTensorElements))
		}
		n *= d
	}
	return n, nil
}

// Data types newer than the IR-8 schema in onnxpb. Models using them parse
// (data_type is a plain int32), so sizes must still be checked.
const (
	typeFloat8E4M3FN   = 17
	typeFloat8E4M3FNUZ = 18
	typeFloat8E5M2     = 19
	typeFloat8E5M2FNUZ = 20
	typeUint4          = 21
	typeInt4           = 22
	typeFloat4E2M1     = 23
	typeFloat8E8M0     = 24
)

// isPacked4 reports the 4-bit types, stored two elements per byte.
func isPacked4(dt int32) bool {
	return dt == typeUint4 || dt == typeInt4 || dt == typeFloat4E2M1
}

// rawBytes returns the raw_data size of n elements of type dt, and false for
// types that have no fixed-size binary encoding.
func rawBytes(dt int32, n int64) (int64, bool) {
	if isPacked4(dt) {
		return (n + 1) / 2, true
	}
	size := int64(ElemSize(dt))
	return n * size, size != 0
}

// ElemSize returns the size in bytes of one element of an ONNX tensor type,
// or 0 for types without a whole-byte fixed size (strings, 4-bit types,
// undefined).
func ElemSize(dt int32) int {
	switch dt {
	case typeFloat8E4M3FN, typeFloat8E4M3FNUZ, typeFloat8E5M2, typeFloat8E5M2FNUZ, typeFloat8E8M0:
		return 1
	}
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32:
		return 4
	case onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64, onnxpb.TensorProto_COMPLEX64:
		return 8
	case onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16, onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16:
		return 2
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL:
		return 1
	case onnxpb.TensorProto_COMPLEX128:
		return 16
	}
	return 0
}

// Float32s returns the tensor's values converted to float32. It accepts
// FLOAT, DOUBLE, FLOAT16 and BFLOAT16 tensors stored in raw_data or in the
// typed fields, and integer tensors (converted exactly where representable).
func Float32s(t *onnxpb.TensorProto) ([]float32, error) {
	n, err := checkedCount(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	raw := t.GetRawData()
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	switch dt {
	case onnxpb.TensorProto_FLOAT:
		if raw != nil {
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		} else {
			copy(out, t.GetFloatData())
		}
	case onnxpb.TensorProto_DOUBLE:
		v, _ := Float64s(t)
		for i := range out {
			out[i] = float32(v[i])
		}
	case onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		conv := Float16ToFloat32
		if dt == onnxpb.TensorProto_BFLOAT16 {
			conv = BFloat16ToFloat32
		}
		for i := range out {
			var h uint16
			if raw != nil {
				h = binary.LittleEndian.Uint16(raw[2*i:])
			} else {
				h = uint16(t.GetInt32Data()[i])
			}
			out[i] = conv(h)
		}
	default:
		v, err := Int64s(t)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: type %v cannot be read as float32", t.GetName(), dt)
		}
		for i := range out {
			out[i] = float32(v[i])
		}
	}
	return out, nil
}

// Float64s returns a DOUBLE or FLOAT tensor's values as float64.
func Float64s(t *onnxpb.TensorProto) ([]float64, error) {
	n, err := checkedCount(t)
	if err != nil {
		return nil, err
	}
	raw := t.GetRawData()
	switch onnxpb.TensorProto_DataType(t.GetDataType()) {
	case onnxpb.TensorProto_DOUBLE:
		out := make([]float64, n)
		if raw != nil {
			for i := range out {
				out[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		} else {
			copy(out, t.GetDoubleData())
		}
		return out, nil
	default:
		f, err := Float32s(t)
		if err != nil {
			return nil, err
		}
		out := make([]float64, n)
		for i, v := range f {
			out[i] = float64(v)
		}
		return out, nil
	}
}

// Int64s returns an integer or boolean tensor's values as int64.
func Int64s(t *onnxpb.TensorProto) ([]int64, error) {
	n, err := checkedCount(t)
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	raw := t.GetRawData()
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	switch dt {
	case onnxpb.TensorProto_INT64:
		if raw != nil {
			for i := range out {
				out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		} else {
			copy(out, t.GetInt64Data())
		}
	case onnxpb.TensorProto_UINT64:
		for i := range out {
			if raw != nil {
				out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			} else {
				out[i] = int64(t.GetUint64Data()[i])
			}
		}
	case onnxpb.TensorProto_INT32, onnxpb.TensorProto_INT16, onnxpb.TensorProto_INT8,
		onnxpb.TensorProto_UINT16, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL:
		size := ElemSize(int32(dt))
		for i := range out {
			if raw == nil {
				out[i] = int64(t.GetInt32Data()[i])
				continue
			}
			b := raw[size*i:]
			switch dt {
			case onnxpb.TensorProto_INT32:
				out[i] = int64(int32(binary.LittleEndian.Uint32(b)))
			case onnxpb.TensorProto_INT16:
				out[i] = int64(int16(binary.LittleEndian.Uint16(b)))
			case onnxpb.TensorProto_UINT16:
				out[i] = int64(binary.LittleEndian.Uint16(b))
			case onnxpb.TensorProto_INT8:
				out[i] = int64(int8(b[0]))
			default:
				out[i] = int64(b[0])
			}
		}
	case onnxpb.TensorProto_UINT32:
		for i := range out {
			if raw != nil {
				out[i] = int64(binary.LittleEndian.Uint32(raw[4*i:]))
			} else {
				out[i] = int64(t.GetUint64Data()[i])
			}
		}
	default:
		return nil, fmt.Errorf("tensor %q: type %v is not an integer type", t.GetName(), dt)
	}
	return out, nil
}

// checkedCount validates that the tensor's stored data matches its dims and
// returns the element count. It is the single place that makes the typed
// readers above safe against short or inconsistent payloads.
func checkedCount(t *onnxpb.TensorProto) (int, error) {
	if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return 0, fmt.Errorf("tensor %q: external data not loaded", t.GetName())
	}
	n64, err := NumElements(t.GetDims())
	if err != nil {
		return 0, fmt.Errorf("tensor %q: %w", t.GetName(), err)
	}
	n := int(n64)
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	if raw := t.GetRawData(); raw != nil {
		want, ok := rawBytes(int32(dt), n64)
		if !ok {
			return 0, fmt.Errorf("tensor %q: raw data of type %v is not supported", t.GetName(), dt)
		}
		if int64(len(raw)) != want {
			return 0, fmt.Errorf("tensor %q: raw data holds %d bytes, dims %v of %v need %d", t.GetName(), len(raw), t.GetDims(), dt, want)
		}
		return n, nil
	}
	// Complex values take two slots of the typed field: real, imaginary.
	var have, per int64 = 0, 1
	switch dt {
	case onnxpb.TensorProto_FLOAT:
		have = int64(len(t.GetFloatData()))
	case onnxpb.TensorProto_COMPLEX64:
		have, per = int64(len(t.GetFloatData())), 2
	case onnxpb.TensorProto_DOUBLE:
		have = int64(len(t.GetDoubleData()))
	case onnxpb.TensorProto_COMPLEX128:
		have, per = int64(len(t.GetDoubleData())), 2
	case onnxpb.TensorProto_INT64:
		have = int64(len(t.GetInt64Data()))
	case onnxpb.TensorProto_UINT64, onnxpb.TensorProto_UINT32:
		have = int64(len(t.GetUint64Data()))
	case onnxpb.TensorProto_INT32, onnxpb.TensorProto_INT16, onnxpb.TensorProto_INT8,
		onnxpb.TensorProto_UINT16, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL,
		onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16,
		typeFloat8E4M3FN, typeFloat8E4M3FNUZ, typeFloat8E5M2, typeFloat8E5M2FNUZ, typeFloat8E8M0:
		have = int64(len(t.GetInt32Data()))
	case onnxpb.TensorProto_STRING:
		have = int64(len(t.GetStringData()))
	default:
		return 0, fmt.Errorf("tensor %q: type %v is not supported", t.GetName(), dt)
	}
	if have != n64*per {
		return 0, fmt.Errorf("tensor %q: holds %d values, dims %v of %v need %d", t.GetName(), have, t.GetDims(), dt, n64*per)
	}
	return n, nil
}

// NewFloat32Tensor builds a FLOAT initializer stored as raw data.
func NewFloat32Tensor(name string, dims []int64, data []float32) *onnxpb.TensorProto {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return rawTensor(name, onnxpb.TensorProto_FLOAT, dims, raw)
}

// NewFloat64Tensor builds a DOUBLE initializer stored as raw data.
func NewFloat64Tensor(name string, dims []int64, data []float64) *onnxpb.TensorProto {
	raw := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
	}
	return rawTensor(name, onnxpb.TensorProto_DOUBLE, dims, raw)
}

// NewInt64Tensor builds an INT64 initializer stored as raw data.
func NewInt64Tensor(name string, dims []int64, data []int64) *onnxpb.TensorProto {
	raw := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	return rawTensor(name, onnxpb.TensorProto_INT64, dims, raw)
}

// NewFloatTensor builds a float initializer of element type dt, FLOAT
// (the values rounded to float32) or DOUBLE; any other type is a
// programming error and panics.
func NewFloatTensor(name string, dt onnxpb.TensorProto_DataType, dims []int64, data []float64) *onnxpb.TensorProto {
	switch dt {
	case onnxpb.TensorProto_DOUBLE:
		return NewFloat64Tensor(name, dims, data)
	case onnxpb.TensorProto_FLOAT:
		f := make([]float32, len(data))
		for i, v := range data {
			f[i] = float32(v)
		}
		return NewFloat32Tensor(name, dims, f)
	}
	panic(fmt.Sprintf("onnx: NewFloatTensor %q: element type %v is not FLOAT or DOUBLE", name, dt))
}

func rawTensor(name string, dt onnxpb.TensorProto_DataType, dims []int64, raw []byte) *onnxpb.TensorProto {
	d := int32(dt)
	return &onnxpb.TensorProto{Name: &name, DataType: &d, Dims: append([]int64(nil), dims...), RawData: raw}
}

// Float16ToFloat32 converts an IEEE 754 half-precision value.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := uint32(127 - 15 + 1)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		frac &= 0x3ff
		return math.Float32frombits(sign | e<<23 | frac<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// BFloat16ToFloat32 converts a bfloat16 value (the top half of a float32).
func BFloat16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}
