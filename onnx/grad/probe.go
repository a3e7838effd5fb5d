package grad

import (
	"encoding/binary"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/runtime"
)

// tensorInfo is what the compiler knows about one tensor of the forward graph.
type tensorInfo struct {
	shape []int64
	dtype int32
}

// probe runs the forward graph once in ONNX Runtime at the training shapes
// with every node output exposed, and records each tensor's shape and element
// type, plus the values of the tensors listed in want (small constant tensors,
// to be folded). Probing agrees with the runtime by construction, which hand
// written shape inference would not.
func probe(g *onnxpb.GraphProto, opset []*onnxpb.OperatorSetIdProto, ir int64,
	feeds map[string]*runtime.Tensor, want map[string]bool, threads int,
) (map[string]*tensorInfo, map[string]*onnxpb.TensorProto, error) {
	pg := proto.Clone(g).(*onnxpb.GraphProto)
	bf16 := probeBFloat16AsFloat(pg)
	// Every tensor is exposed twice: flattened (its values and element type)
	// and as Concat(Shape, [1]) (its shape), so that rank-0 tensors, which
	// the Go binding cannot return, come back as rank-1 ones.
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
	pb := newBuilder("probe/", int32(onnxpb.TensorProto_FLOAT), func(s string) bool { return seen[s] })
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
		pg.Output = append(pg.Output, &onnxpb.ValueInfoProto{Name: proto.String(flat[name])},
			&onnxpb.ValueInfoProto{Name: proto.String(shp[name])})
	}
	pg.Node = append(pg.Node, pb.nodes...)
	pg.Initializer = append(pg.Initializer, pb.inits...)
	// Drop declared value_info: stale dynamic shapes must not fight the probe.
	pg.ValueInfo = nil
	for _, o := range pg.Output {
		o.Type = nil
	}
	mp := &onnxpb.ModelProto{IrVersion: proto.Int64(ir), OpsetImport: opset, Graph: pg}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(mp)
	if err != nil {
		return nil, nil, err
	}
	opts := runtime.Options{Threads: threads, NoOptimize: true}
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("probing shapes in ONNX Runtime: %w", err)
	}
	halfType, halfData, err := exposeHalvesAsFloat(mp, pb, flat, sess.Outputs)
	if err == nil && halfData != nil {
		sess.Close()
		sess, err = runtime.NewSession(halfData, opts)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("probing shapes in ONNX Runtime: %w", err)
	}
	defer sess.Close()
	in := make([]*runtime.Tensor, len(sess.Inputs))
	for i, x := range sess.Inputs {
		t, ok := feeds[x.Name]
		if !ok {
			return nil, nil, fmt.Errorf("probing shapes: no value for graph input %q", x.Name)
		}
		in[i] = t
	}
	outs, err := sess.Run(in...)
	if err != nil {
		return nil, nil, fmt.Errorf("probing shapes: running the forward graph: %w", err)
	}
	byName := map[string]int{}
	for i, o := range sess.Outputs {
		byName[o.Name] = i
	}
	info := map[string]*tensorInfo{}
	vals := map[string]*onnxpb.TensorProto{}
	for _, name := range names {
		fi, si := byName[flat[name]], byName[shp[name]]
		if outs[fi] == nil || outs[si] == nil {
			continue
		}
		dims := outs[si].Int64
		shape := append([]int64{}, dims[:len(dims)-1]...)
		dt := elemType(sess.Outputs[fi].Type)
		if h, ok := halfType[name]; ok {
			dt = h
		}
		if bf16[name] && dt == int32(onnxpb.TensorProto_FLOAT) {
			dt = int32(onnxpb.TensorProto_BFLOAT16)
		}
		info[name] = &tensorInfo{shape: shape, dtype: dt}
		if want[name] {
			v := outs[fi]
			v.Shape = shape
			if t, err := tensorFromRuntime(name, dt, v); err == nil {
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
func probeBFloat16AsFloat(g *onnxpb.GraphProto) map[string]bool {
	var bf16 map[string]bool
	for _, n := range g.Node {
		is := false
		if n.GetOpType() == "Cast" && n.GetDomain() == "" {
			to := onnx.Attr(n, "to")
			is = to.GetI() == int64(onnxpb.TensorProto_BFLOAT16)
			if is {
				to.I = proto.Int64(int64(onnxpb.TensorProto_FLOAT))
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

// exposeHalvesAsFloat casts the exposed values of float16 and bfloat16
// tensors (mixed-precision graphs, onnx/autocast) to float32, which the Go
// binding reads (onnxruntime_go v1.27.0 copies a float16 output's element
// count in bytes, half of it, and fails). Given the probe session's outputs,
// it returns those tensors' real element types by name and the rewritten
// model, or no model when there is none (float32 graphs: the session
// stands).
func exposeHalvesAsFloat(mp *onnxpb.ModelProto, pb *builder, flat map[string]string, outs []runtime.IOInfo) (map[string]int32, []byte, error) {
	types := map[string]int32{}
	for _, o := range outs {
		types[o.Name] = elemType(o.Type)
	}
	half := map[string]int32{}
	g := mp.Graph
	made := len(pb.nodes)
	for name, f := range flat {
		dt := types[f]
		if dt != int32(onnxpb.TensorProto_FLOAT16) && dt != int32(onnxpb.TensorProto_BFLOAT16) {
			continue
		}
		half[name] = dt
		cast := pb.op1("Cast", []string{f}, onnx.IntAttr("to", int64(onnxpb.TensorProto_FLOAT)))
		for _, o := range g.Output {
			if o.GetName() == f {
				o.Name = proto.String(cast)
			}
		}
		flat[name] = cast
	}
	if len(half) == 0 {
		return half, nil, nil
	}
	g.Node = append(g.Node, pb.nodes[made:]...)
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(mp)
	return half, data, err
}

// elemType maps ONNX Runtime's element type names to ONNX data types.
func elemType(s string) int32 {
	short := map[string]onnxpb.TensorProto_DataType{
		"float32": onnxpb.TensorProto_FLOAT, "float64": onnxpb.TensorProto_DOUBLE,
		"int64": onnxpb.TensorProto_INT64, "int32": onnxpb.TensorProto_INT32,
		"bool": onnxpb.TensorProto_BOOL, "uint8": onnxpb.TensorProto_UINT8,
		"int8": onnxpb.TensorProto_INT8, "float16": onnxpb.TensorProto_FLOAT16,
	}
	if dt, ok := short[strings.ToLower(s)]; ok {
		return int32(dt)
	}
	s = strings.TrimPrefix(s, "ONNX_TENSOR_ELEMENT_DATA_TYPE_")
	return onnxpb.TensorProto_DataType_value[s]
}

// tensorFromRuntime turns a probed value back into an initializer of the
// original element type.
func tensorFromRuntime(name string, dt int32, t *runtime.Tensor) (*onnxpb.TensorProto, error) {
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT:
		return onnx.NewFloat32Tensor(name, t.Shape, t.Float32), nil
	case onnxpb.TensorProto_DOUBLE:
		return onnx.NewFloat64Tensor(name, t.Shape, t.Float64), nil
	case onnxpb.TensorProto_INT64:
		return onnx.NewInt64Tensor(name, t.Shape, t.Int64), nil
	case onnxpb.TensorProto_INT32:
		raw := make([]byte, 4*len(t.Int64))
		for i, v := range t.Int64 {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		}
		return rawTensor(name, dt, t.Shape, raw), nil
	case onnxpb.TensorProto_BOOL:
		raw := make([]byte, len(t.Int64))
		for i, v := range t.Int64 {
			if v != 0 {
				raw[i] = 1
			}
		}
		return rawTensor(name, dt, t.Shape, raw), nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v cannot be folded", name, onnxpb.TensorProto_DataType(dt))
}

func rawTensor(name string, dt int32, dims []int64, raw []byte) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(dt), Dims: append([]int64{}, dims...), RawData: raw}
}

// zeroFeed makes an all-zero tensor of a graph input's type and shape.
func zeroFeed(dt int32, shape []int64) (*runtime.Tensor, error) {
	n, err := onnx.NumElements(shape)
	if err != nil {
		return nil, err
	}
	switch onnxpb.TensorProto_DataType(dt) {
	case onnxpb.TensorProto_FLOAT:
		return runtime.NewFloat32(shape, make([]float32, n)), nil
	case onnxpb.TensorProto_DOUBLE:
		return runtime.NewFloat64(shape, make([]float64, n)), nil
	case onnxpb.TensorProto_INT64:
		return runtime.NewInt64(shape, make([]int64, n)), nil
	}
	return nil, unsupportedf("graph inputs of type %v are not supported (float, double and int64 are)", onnxpb.TensorProto_DataType(dt))
}
