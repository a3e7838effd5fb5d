package grad

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// ShapeProber runs a forward graph once. The compiler learns every tensor's
// shape and element type, and the values of constant subgraphs it folds,
// by running the model in the runtime that will train it: that agrees with
// the runtime by construction, which hand-written shape inference would not.
// The compiler builds the probe model for the prober alone: Probe may modify
// it. ortprobe.Prober is the ONNX Runtime implementation.
type ShapeProber interface {
	// Probe runs model with feeds (one per graph input, by name) and returns
	// its outputs by name. An output the runtime cannot return may be left
	// out; one of a type the caller cannot read (float16, bfloat16) comes
	// back widened to float32, with its real DataType. Build returns
	// its errors behind only "grad: ", so they should say that probing
	// failed.
	Probe(model *onnx.ModelProto, feeds map[string]*ProbeTensor) (map[string]*ProbeTensor, error)
}

// ProbeTensor is a dense host tensor crossing a ShapeProber. Exactly one of
// the data slices is set.
type ProbeTensor struct {
	// DataType is the ONNX element type (onnx.DataType).
	DataType int32
	Shape    []int64
	// Float32 holds FLOAT values, and FLOAT16 and BFLOAT16 ones widened.
	Float32 []float32
	// Float64 holds DOUBLE values.
	Float64 []float64
	// Int64 holds INT64 values, and INT32 and BOOL (0 or 1) ones widened.
	Int64 []int64
}

// tensorInfo is what the compiler knows about one tensor of the forward graph.
type tensorInfo struct {
	shape []int64
	dtype int32
}

// probe runs the forward graph once through the prober at the training
// shapes with every node output exposed, and records each tensor's shape
// and element type, plus the values of the tensors listed in want (small
// constant tensors, to be folded).
func probe(prober ShapeProber, g *onnx.GraphProto, opset []*onnx.OperatorSetIdProto, ir int64,
	feeds map[string]*ProbeTensor, want map[string]bool,
) (map[string]*tensorInfo, map[string]*onnx.TensorProto, error) {
	if prober == nil {
		return nil, nil, errors.New("Config.Prober is nil: the compiler needs a ShapeProber (ortprobe.Prober runs ONNX Runtime)")
	}
	pg := proto.Clone(g).(*onnx.GraphProto)
	bf16 := probeBFloat16AsFloat(pg)
	// Every tensor is exposed twice: flattened (its values and element type)
	// and as Concat(Shape, [1]) (its shape), so that rank-0 tensors, which
	// a runtime's host binding may not return, come back as rank-1 ones.
	var names []string
	seen := map[string]bool{}
	for _, n := range g.Node {
		for _, o := range n.Output {
			if o != "" && !seen[o] {
				seen[o] = true
				names = append(names, o)
			}
		}
	}
	pb := newBuilder("probe/", int32(onnx.Float32), func(s string) bool { return seen[s] })
	minus1, one := pb.ints(-1), pb.ints(1)
	flat, shp := map[string]string{}, map[string]string{}
	pg.Output = nil
	zero := pb.ints(0)
	for _, name := range names {
		flat[name] = pb.op1("Reshape", []string{name, minus1})
		if !want[name] {
			// Only the element type is needed: expose at most one element,
			// not a copy of every activation (the probe's memory would
			// otherwise peak at the whole forward pass, twice).
			flat[name] = pb.op1("Slice", []string{flat[name], zero, one})
		}
		shp[name] = pb.op1("Concat", []string{pb.op1("Shape", []string{name}), one}, onnx.IntAttr("axis", 0))
		pg.Output = append(pg.Output, &onnx.ValueInfoProto{Name: proto.String(flat[name])},
			&onnx.ValueInfoProto{Name: proto.String(shp[name])})
	}
	pg.Node = append(pg.Node, pb.nodes...)
	pg.Initializer = append(pg.Initializer, pb.inits...)
	// Drop declared value_info: stale dynamic shapes must not fight the probe.
	pg.ValueInfo = nil
	for _, o := range pg.Output {
		o.Type = nil
	}
	mp := &onnx.ModelProto{IrVersion: proto.Int64(ir), OpsetImport: opset, Graph: pg}
	outs, err := prober.Probe(mp, feeds)
	if err != nil {
		return nil, nil, err
	}
	info := map[string]*tensorInfo{}
	vals := map[string]*onnx.TensorProto{}
	for _, name := range names {
		v, s := outs[flat[name]], outs[shp[name]]
		if v == nil || s == nil {
			continue
		}
		dims := s.Int64
		if len(dims) == 0 {
			return nil, nil, fmt.Errorf("probing shapes: the shape of %q came back empty", name)
		}
		shape := append([]int64{}, dims[:len(dims)-1]...)
		dt := v.DataType
		if bf16[name] && dt == int32(onnx.Float32) {
			dt = int32(onnx.BFloat16)
		}
		info[name] = &tensorInfo{shape: shape, dtype: dt}
		if want[name] {
			if t, err := tensorFromProbe(name, dt, shape, v); err == nil {
				vals[name] = t
			}
		}
	}
	return info, vals, nil
}

// probeBFloat16AsFloat makes the bfloat16 regions of a mixed-precision
// graph (onnx/autocast, whose bfloat16 tensors all descend from its Casts)
// compute in float32 for the probe: ONNX Runtime's CPU provider has no
// bfloat16 Conv or MatMul, and shapes do not depend on the element type. It
// rewrites g's Casts to bfloat16 into Casts to float32 and returns the
// tensors that are bfloat16 in the real graph: a Cast's output by its
// "to", any other node's outputs when one of its inputs is. (Outputs of
// non-float type, such as Shape's, keep the type the probe reports.)
func probeBFloat16AsFloat(g *onnx.GraphProto) map[string]bool {
	var bf16 map[string]bool
	for _, n := range g.Node {
		is := false
		if n.GetOpType() == "Cast" && n.GetDomain() == "" {
			to := onnx.Attr(n, "to")
			is = to.GetI() == int64(onnx.BFloat16)
			if is {
				to.I = proto.Int64(int64(onnx.Float32))
			}
		} else {
			for _, in := range n.Input {
				is = is || bf16[in]
			}
		}
		for _, o := range n.Output {
			if is && o != "" {
				if bf16 == nil {
					bf16 = map[string]bool{}
				}
				bf16[o] = true
			}
		}
	}
	return bf16
}

// tensorFromProbe turns a probed value back into an initializer of the
// original element type and the given shape.
func tensorFromProbe(name string, dt int32, shape []int64, t *ProbeTensor) (*onnx.TensorProto, error) {
	switch onnx.DataType(dt) {
	case onnx.Float32:
		return onnx.NewFloat32Tensor(name, shape, t.Float32), nil
	case onnx.Float64:
		return onnx.NewFloat64Tensor(name, shape, t.Float64), nil
	case onnx.Int64:
		return onnx.NewInt64Tensor(name, shape, t.Int64), nil
	case onnx.Int32:
		raw := make([]byte, 4*len(t.Int64))
		for i, v := range t.Int64 {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		}
		return rawTensor(name, dt, shape, raw), nil
	case onnx.Bool:
		raw := make([]byte, len(t.Int64))
		for i, v := range t.Int64 {
			if v != 0 {
				raw[i] = 1
			}
		}
		return rawTensor(name, dt, shape, raw), nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v cannot be folded", name, onnx.DataType(dt))
}

func rawTensor(name string, dt int32, dims []int64, raw []byte) *onnx.TensorProto {
	return &onnx.TensorProto{Name: proto.String(name), DataType: proto.Int32(dt), Dims: append([]int64{}, dims...), RawData: raw}
}

// zeroFeed makes an all-zero tensor of a graph input's type and shape.
func zeroFeed(dt int32, shape []int64) (*ProbeTensor, error) {
	n, err := onnx.NumElements(shape)
	if err != nil {
		return nil, err
	}
	t := &ProbeTensor{DataType: dt, Shape: shape}
	switch onnx.DataType(dt) {
	case onnx.Float32:
		t.Float32 = make([]float32, n)
	case onnx.Float64:
		t.Float64 = make([]float64, n)
	case onnx.Int64:
		t.Int64 = make([]int64, n)
	default:
		return nil, unsupportedf("graph inputs of type %v are not supported (float, double and int64 are)", onnx.DataType(dt))
	}
	return t, nil
}
