package onnx

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// typedTensor stores vals of type dt in the typed field the ONNX schema
// assigns to it, and rawTensorOf stores them in raw_data.
func typedTensor(dt onnxpb.TensorProto_DataType, vals []float64) *onnxpb.TensorProto {
	t := &onnxpb.TensorProto{Name: str("t"), DataType: i32(int32(dt)), Dims: []int64{int64(len(vals))}}
	for _, v := range vals {
		switch dt {
		case onnxpb.TensorProto_FLOAT:
			t.FloatData = append(t.FloatData, float32(v))
		case onnxpb.TensorProto_DOUBLE:
			t.DoubleData = append(t.DoubleData, v)
		case onnxpb.TensorProto_INT64:
			t.Int64Data = append(t.Int64Data, int64(v))
		case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
			t.Uint64Data = append(t.Uint64Data, uint64(v))
		case onnxpb.TensorProto_FLOAT16:
			t.Int32Data = append(t.Int32Data, int32(Float32ToFloat16(float32(v))))
		case onnxpb.TensorProto_BFLOAT16:
			t.Int32Data = append(t.Int32Data, int32(Float32ToBFloat16(float32(v))))
		default:
			t.Int32Data = append(t.Int32Data, int32(v))
		}
	}
	return t
}

func rawTensorOf(dt onnxpb.TensorProto_DataType, vals []float64) *onnxpb.TensorProto {
	size := ElemSize(int32(dt))
	raw := make([]byte, size*len(vals))
	for i, v := range vals {
		b := raw[size*i:]
		switch dt {
		case onnxpb.TensorProto_FLOAT:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		case onnxpb.TensorProto_DOUBLE:
			binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		case onnxpb.TensorProto_FLOAT16:
			binary.LittleEndian.PutUint16(b, Float32ToFloat16(float32(v)))
		case onnxpb.TensorProto_BFLOAT16:
			binary.LittleEndian.PutUint16(b, Float32ToBFloat16(float32(v)))
		default: // two's complement integers, little-endian, truncated to size
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], uint64(int64(v)))
			copy(b[:size], buf[:])
		}
	}
	return rawTensor("t", dt, []int64{int64(len(vals))}, raw)
}

var (
	floatTypes = []onnxpb.TensorProto_DataType{onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE,
		onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16}
	signedTypes = []onnxpb.TensorProto_DataType{onnxpb.TensorProto_INT64, onnxpb.TensorProto_INT32,
		onnxpb.TensorProto_INT16, onnxpb.TensorProto_INT8}
	unsignedTypes = []onnxpb.TensorProto_DataType{onnxpb.TensorProto_UINT64, onnxpb.TensorProto_UINT32,
		onnxpb.TensorProto_UINT16, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL}
)

type storage struct {
	name  string
	build func(onnxpb.TensorProto_DataType, []float64) *onnxpb.TensorProto
}

var storages = []storage{{"raw", rawTensorOf}, {"typed", typedTensor}}

func TestReadersEveryTypeAndStorage(t *testing.T) {
	cases := []struct {
		types []onnxpb.TensorProto_DataType
		vals  []float64
	}{
		{floatTypes, []float64{1.5, -2, 0, 3.25}},
		{signedTypes, []float64{1, -2, 0, 127}},
		{unsignedTypes, []float64{1, 0, 1, 1}},
	}
	for _, c := range cases {
		for _, dt := range c.types {
			for _, st := range storages {
				t.Run(dt.String()+"/"+st.name, func(t *testing.T) {
					tensor := st.build(dt, c.vals)
					f32, err := Float32s(tensor)
					if err != nil {
						t.Fatal(err)
					}
					f64, err := Float64s(tensor)
					if err != nil {
						t.Fatal(err)
					}
					for i, want := range c.vals {
						if float64(f32[i]) != want || f64[i] != want {
							t.Fatalf("value %d: float32 %v, float64 %v, want %v", i, f32[i], f64[i], want)
						}
					}
					if slices.Contains(floatTypes, dt) {
						if _, err := Int64s(tensor); err == nil {
							t.Error("Int64s accepted a float tensor")
						}
						return
					}
					ints, err := Int64s(tensor)
					if err != nil {
						t.Fatal(err)
					}
					for i, want := range c.vals {
						if ints[i] != int64(want) {
							t.Fatalf("Int64s[%d] = %d, want %v", i, ints[i], want)
						}
					}
				})
			}
		}
	}
}

func TestReadersRejectMismatchedLengths(t *testing.T) {
	all := slices.Concat(floatTypes, signedTypes, unsignedTypes)
	for _, dt := range all {
		for _, st := range storages {
			tensor := st.build(dt, []float64{1, 0, 1})
			tensor.Dims = []int64{4} // one more than stored
			for name, read := range map[string]func(*onnxpb.TensorProto) error{
				"Float32s": func(t *onnxpb.TensorProto) error { _, err := Float32s(t); return err },
				"Float64s": func(t *onnxpb.TensorProto) error { _, err := Float64s(t); return err },
				"Int64s":   func(t *onnxpb.TensorProto) error { _, err := Int64s(t); return err },
			} {
				if err := read(tensor); err == nil {
					t.Errorf("%v/%s: %s accepted 3 values for dims [4]", dt, st.name, name)
				}
			}
			tensor.Dims = []int64{2} // fewer than stored is as wrong
			if _, err := Float32s(tensor); err == nil {
				t.Errorf("%v/%s: Float32s accepted 3 values for dims [2]", dt, st.name)
			}
		}
	}
}

func TestPayloadSizesOfNewerTypes(t *testing.T) {
	for _, c := range []struct {
		dt      int32
		raw, ok int // raw bytes for dims [3], and whether valid
	}{
		{typeFloat8E4M3FN, 3, 1}, {typeFloat8E5M2, 2, 0},
		{typeInt4, 2, 1}, {typeUint4, 3, 0}, {typeFloat4E2M1, 2, 1},
		{99, 3, 0},
	} {
		tensor := rawTensor("q", onnxpb.TensorProto_DataType(c.dt), []int64{3}, make([]byte, c.raw))
		if _, err := checkedCount(tensor); (err == nil) != (c.ok == 1) {
			t.Errorf("%s with %d raw bytes for 3 elements: err = %v", DataTypeName(c.dt), c.raw, err)
		}
	}
}

func TestComplexAndStringPayloadsAreChecked(t *testing.T) {
	c := &onnxpb.TensorProto{Name: str("c"), DataType: i32(int32(onnxpb.TensorProto_COMPLEX64)),
		Dims: []int64{2}, FloatData: []float32{1, 2, 3, 4}}
	if _, err := checkedCount(c); err != nil {
		t.Errorf("2 complex64 in 4 floats: %v", err)
	}
	c.FloatData = c.FloatData[:3]
	if _, err := checkedCount(c); err == nil {
		t.Error("2 complex64 in 3 floats accepted")
	}
	s := &onnxpb.TensorProto{Name: str("s"), DataType: i32(int32(onnxpb.TensorProto_STRING)),
		Dims: []int64{2}, StringData: [][]byte{[]byte("a")}}
	if _, err := checkedCount(s); err == nil {
		t.Error("2 strings in 1 accepted")
	}
	if _, err := Float32s(s); err == nil {
		t.Error("Float32s read a string tensor")
	}
}

func TestSetFloat32sKeepsType(t *testing.T) {
	want := []float32{0.5, 4, -1, 8}
	for _, dt := range floatTypes {
		for _, st := range storages {
			tensor := st.build(dt, []float64{1, 2, 3, 4})
			if err := SetFloat32s(tensor, want); err != nil {
				t.Fatalf("%v/%s: %v", dt, st.name, err)
			}
			if tensor.GetDataType() != int32(dt) {
				t.Errorf("%v/%s: type became %v", dt, st.name, onnxpb.TensorProto_DataType(tensor.GetDataType()))
			}
			if len(tensor.FloatData)+len(tensor.DoubleData)+len(tensor.Int32Data) != 0 {
				t.Errorf("%v/%s: typed fields not cleared", dt, st.name)
			}
			got, err := Float32s(tensor)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%v/%s: read back %v, %v; want %v", dt, st.name, got, err, want)
			}
		}
	}
}

// A dropped tensor keeps its type and dims, refuses to be read (never
// zeros in place of the values) and takes its values back with
// SetFloat32s.
func TestDropData(t *testing.T) {
	want := []float32{0.5, 4, -1, 8}
	for _, dt := range floatTypes {
		for _, st := range storages {
			tensor := st.build(dt, []float64{1, 2, 3, 4})
			DropData(tensor)
			if tensor.GetDataType() != int32(dt) || len(tensor.GetDims()) == 0 {
				t.Fatalf("%v/%s: type or dims lost", dt, st.name)
			}
			if v, err := Float32s(tensor); err == nil {
				t.Errorf("%v/%s: a dropped tensor read as %v", dt, st.name, v)
			}
			if err := SetFloat32s(tensor, want); err != nil {
				t.Fatalf("%v/%s: %v", dt, st.name, err)
			}
			if got, err := Float32s(tensor); err != nil || !slices.Equal(got, want) {
				t.Errorf("%v/%s: read back %v, %v; want %v", dt, st.name, got, err, want)
			}
		}
	}
}

func TestSetFloat32sErrors(t *testing.T) {
	tensor := NewFloat32Tensor("w", []int64{2, 2}, []float32{1, 2, 3, 4})
	before := slices.Clone(tensor.RawData)
	err := SetFloat32s(tensor, []float32{1, 2, 3})
	if err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Errorf("short slice: err = %v, want one naming the tensor", err)
	}
	if !slices.Equal(tensor.RawData, before) {
		t.Error("failed SetFloat32s changed the tensor")
	}
	if err := SetFloat32s(tensor, make([]float32, 5)); err == nil {
		t.Error("long slice accepted")
	}
	if err := SetFloat32s(NewInt64Tensor("i", []int64{1}, []int64{1}), []float32{1}); err == nil {
		t.Error("int64 tensor accepted float values")
	}
	ext := NewFloat32Tensor("e", []int64{1}, []float32{1})
	ext.RawData = nil
	ext.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
	ext.ExternalData = []*onnxpb.StringStringEntryProto{{Key: str("location"), Value: str("x.data")}}
	if err := SetFloat32s(ext, []float32{7}); err != nil {
		t.Fatal(err)
	}
	if got, err := Float32s(ext); err != nil || got[0] != 7 {
		t.Errorf("external tensor after SetFloat32s: %v, %v", got, err)
	}
}

func TestFloat16s(t *testing.T) {
	for _, st := range storages {
		for _, dt := range []onnxpb.TensorProto_DataType{onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16} {
			got, err := Float16s(st.build(dt, []float64{1, -2}))
			if err != nil {
				t.Fatal(err)
			}
			conv := Float32ToFloat16
			if dt == onnxpb.TensorProto_BFLOAT16 {
				conv = Float32ToBFloat16
			}
			if want := []uint16{conv(1), conv(-2)}; !slices.Equal(got, want) {
				t.Errorf("%v/%s: %x, want %x", dt, st.name, got, want)
			}
		}
	}
	if _, err := Float16s(NewFloat32Tensor("f", []int64{1}, []float32{1})); err == nil {
		t.Error("Float16s read a float32 tensor")
	}
}

func TestFloat16RoundTripsEveryValue(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		back := Float32ToFloat16(f)
		if f != f { // NaN: any NaN pattern will do
			if Float16ToFloat32(back) == Float16ToFloat32(back) {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestFloat16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00}, // halfway, rounds to even (down)
		{1 + 3.0/2048, 0x3c02}, // halfway, rounds to even (up)
		{1 + 1.0/2048 + 1e-7, 0x3c01},
		{65504, 0x7bff}, // largest half
		{65520, 0x7c00}, // rounds past it to +Inf
		{1e10, 0x7c00},
		{-1e10, 0xfc00},
		{0x1p-24, 0x0001},           // smallest subnormal
		{0x1p-25, 0x0000},           // half of it: ties to even zero
		{0x1.8p-25, 0x0001},         // above half: rounds up
		{0x1p-14 - 0x1p-25, 0x0400}, // rounds up into the normals
		{float32(math.Copysign(0, -1)), 0x8000},
	}
	for _, c := range cases {
		if got := Float32ToFloat16(c.in); got != c.want {
			t.Errorf("Float32ToFloat16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := Float32ToBFloat16(1 + 0x1p-8); got != 0x3f80 { // tie, even down
		t.Errorf("bfloat16 tie = %#04x", got)
	}
	if got := Float32ToBFloat16(1 + 0x1p-8 + 0x1p-20); got != 0x3f81 {
		t.Errorf("bfloat16 above tie = %#04x", got)
	}
	nan := Float32ToBFloat16(float32(math.NaN()))
	if v := BFloat16ToFloat32(nan); v == v {
		t.Errorf("bfloat16 NaN became %v", v)
	}
}

func TestInitializerLookup(t *testing.T) {
	m := tinyModel()
	if got := m.Initializer("w"); got == nil || got.GetName() != "w" {
		t.Errorf("Initializer(w) = %v", got)
	}
	if got := m.Initializer("x"); got != nil {
		t.Errorf("Initializer(x) = %v, want nil for a graph input", got)
	}
	if err := SetFloat32s(m.Initializer("w"), []float32{9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if v, _ := Float32s(m.Initializer("w")); v[0] != 9 {
		t.Error("SetFloat32s through Initializer did not change the model")
	}
}
