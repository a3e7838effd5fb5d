package runtime

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of onnx.proto read by graphIO. runtime reads the wire format
// itself so that it depends on no other segtune package (the onnx package,
// which holds the generated types, depends on runtime's callers, not on it).
const (
	modelGraph       = 7  // ModelProto.graph
	graphInitializer = 5  // GraphProto.initializer
	graphInput       = 11 // GraphProto.input
	graphOutput      = 12 // GraphProto.output
	valueName        = 1  // ValueInfoProto.name
	valueType        = 2  // ValueInfoProto.type
	typeTensor       = 1  // TypeProto.tensor_type
	tensorElemType   = 1  // TypeProto.Tensor.elem_type
	tensorShape      = 2  // TypeProto.Tensor.shape
	shapeDim         = 1  // TensorShapeProto.dim
	dimValue         = 1  // TensorShapeProto.Dimension.dim_value
	initializerName  = 8  // TensorProto.name
)

var errWire = errors.New("not a valid ONNX protobuf")

// graphIO reads the main graph's data inputs (inputs that no initializer
// feeds) and outputs from a serialized model, for graphs that ONNX Runtime's
// CPU provider cannot open to report them itself.
func graphIO(model []byte) (inputs, outputs []IOInfo, err error) {
	var graph []byte
	err = eachField(model, func(num protowire.Number, v []byte) error {
		if num == modelGraph {
			graph = v
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if graph == nil {
		return nil, nil, errors.New("not an ONNX model: no graph")
	}
	initialized := map[string]bool{}
	err = eachField(graph, func(num protowire.Number, v []byte) error {
		switch num {
		case graphInitializer:
			return eachField(v, func(n protowire.Number, s []byte) error {
				if n == initializerName {
					initialized[string(s)] = true
				}
				return nil
			})
		case graphInput, graphOutput:
			info, err := valueInfo(v)
			if err != nil {
				return err
			}
			if num == graphInput {
				inputs = append(inputs, info)
			} else {
				outputs = append(outputs, info)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	data := inputs[:0]
	for _, in := range inputs {
		if !initialized[in.Name] {
			data = append(data, in)
		}
	}
	return data, outputs, nil
}

// valueInfo decodes a ValueInfoProto holding a tensor type.
func valueInfo(b []byte) (IOInfo, error) {
	info := IOInfo{Shape: []int64{}}
	elem := 0
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case valueName:
			info.Name = string(v)
		case valueType:
			return eachField(v, func(n protowire.Number, t []byte) error {
				if n != typeTensor {
					return nil
				}
				return eachField(t, func(n protowire.Number, f []byte) error {
					switch n {
					case tensorElemType:
						elem = int(fieldVarint(f))
					case tensorShape:
						return eachField(f, func(n protowire.Number, d []byte) error {
							if n == shapeDim {
								info.Shape = append(info.Shape, dimOf(d))
							}
							return nil
						})
					}
					return nil
				})
			})
		}
		return nil
	})
	if err != nil {
		return IOInfo{}, err
	}
	info.Type = elemTypeName(elem)
	return info, nil
}

// dimOf returns a Dimension's value, or -1 where it is symbolic or unset.
func dimOf(d []byte) int64 {
	v := int64(-1)
	eachField(d, func(n protowire.Number, f []byte) error { //nolint:errcheck // a malformed dim reads as dynamic
		if n == dimValue && int64(fieldVarint(f)) > 0 {
			v = int64(fieldVarint(f))
		}
		return nil
	})
	return v
}

// eachField calls fn for every field of a message: with the payload of
// length-delimited fields, and with the varint's own encoding for varints
// (read back with fieldVarint). Fixed-width fields are skipped.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errWire, protowire.ParseError(n))
		}
		b = b[n:]
		var payload []byte
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("%w: %v", errWire, protowire.ParseError(m))
			}
			payload, n = v, m
		case protowire.VarintType:
			_, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fmt.Errorf("%w: %v", errWire, protowire.ParseError(m))
			}
			payload, n = b[:m], m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errWire, protowire.ParseError(n))
			}
		}
		b = b[n:]
		if payload != nil {
			if err := fn(num, payload); err != nil {
				return err
			}
		}
	}
	return nil
}

func fieldVarint(b []byte) uint64 {
	v, _ := protowire.ConsumeVarint(b)
	return v
}
