package onnx

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// Initializer returns the main graph's initializer called name, or nil.
func (m *Model) Initializer(name string) *onnxpb.TensorProto {
	for _, t := range m.Proto.GetGraph().GetInitializer() {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

// SetFloat32s replaces the values of a FLOAT, FLOAT16, BFLOAT16 or DOUBLE
// tensor, converting them to its data type (rounding to nearest even for the
// 16-bit types). The dims stay as they are, so data must hold exactly as many
// values. The result is stored in raw_data, the typed fields are cleared, and
// a tensor that referenced external data becomes self-contained.
func SetFloat32s(t *onnxpb.TensorProto, data []float32) error {
	n, err := NumElements(t.GetDims())
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.GetName(), err)
	}
	if int64(len(data)) != n {
		return fmt.Errorf("tensor %q: got %d values, dims %v need %d", t.GetName(), len(data), t.GetDims(), n)
	}
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	var raw []byte
	switch dt {
	case onnxpb.TensorProto_FLOAT:
		raw = make([]byte, 4*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	case onnxpb.TensorProto_DOUBLE:
		raw = make([]byte, 8*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(float64(v)))
		}
	case onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		conv := Float32ToFloat16
		if dt == onnxpb.TensorProto_BFLOAT16 {
			conv = Float32ToBFloat16
		}
		raw = make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(raw[2*i:], conv(v))
		}
	default:
		return fmt.Errorf("tensor %q: cannot store float32 values in a %v tensor", t.GetName(), dt)
	}
	t.RawData = raw
	t.FloatData, t.DoubleData, t.Int32Data = nil, nil, nil
	t.ExternalData, t.DataLocation = nil, nil
	return nil
}

// DropData empties a tensor of its values, keeping its name, type and
// dims: for a copy of a model whose values are kept elsewhere and written
// back with SetFloat32s before it is used.
func DropData(t *onnxpb.TensorProto) {
	t.RawData, t.FloatData, t.DoubleData, t.Int32Data, t.Int64Data, t.Uint64Data, t.StringData = nil, nil, nil, nil, nil, nil, nil
	t.ExternalData, t.DataLocation = nil, nil
}

// Float16s returns a FLOAT16 or BFLOAT16 tensor's values as their 16-bit
// patterns, without conversion.
func Float16s(t *onnxpb.TensorProto) ([]uint16, error) {
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	if dt != onnxpb.TensorProto_FLOAT16 && dt != onnxpb.TensorProto_BFLOAT16 {
		return nil, fmt.Errorf("tensor %q: type %v is not a 16-bit float type", t.GetName(), dt)
	}
	n, err := checkedCount(t)
	if err != nil {
		return nil, err
	}
	out := make([]uint16, n)
	if raw := t.GetRawData(); raw != nil {
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		return out, nil
	}
	for i, v := range t.GetInt32Data() {
		out[i] = uint16(v) // the low 16 bits hold the pattern
	}
	return out, nil
}

// Float32ToFloat16 converts to IEEE 754 half precision, rounding to nearest
// even; values beyond the half range become infinities, NaN stays NaN.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	frac := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN; keep NaN quiet and non-zero
		if frac != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		h := uint32(exp-127+15)<<10 | frac>>13
		return sign | uint16(roundShifted(h, frac&0x1fff, 13))
	case exp-127 >= -25: // subnormal half (or rounds up to the smallest)
		m := frac | 0x800000 // implicit leading one
		shift := uint32(-14-(exp-127)) + 13
		return sign | uint16(roundShifted(m>>shift, m&(1<<shift-1), shift))
	}
	return sign // underflows to zero
}

// roundShifted rounds the kept value h to nearest even, given the dropped
// low bits rest out of a shift of n bits. A carry out of the mantissa
// correctly bumps the exponent.
func roundShifted(h, rest, n uint32) uint32 {
	half := uint32(1) << (n - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++
	}
	return h
}

// Float32ToBFloat16 converts to bfloat16, rounding to nearest even; NaN stays
// NaN.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16(roundShifted(b>>16, b&0xffff, 16))
}
