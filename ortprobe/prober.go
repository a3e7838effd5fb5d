package ortprobe

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/runtime"
)

// Prober is a grad.ShapeProber that runs the probe model on ONNX Runtime's
// CPU provider, without graph optimisations (the probe must see every
// tensor the model declares).
type Prober struct {
	// Threads is ONNX Runtime's thread count (0: its default).
	Threads int
}

var _ grad.ShapeProber = Prober{}

// Probe runs model once with feeds and returns its outputs by name.
func (p Prober) Probe(model *onnxpb.ModelProto, feeds map[string]*grad.ProbeTensor) (map[string]*grad.ProbeTensor, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(model)
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{Threads: p.Threads, NoOptimize: true}
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, fmt.Errorf("probing shapes in ONNX Runtime: %w", err)
	}
	halfType, halfData, err := exposeHalvesAsFloat(model, sess.Outputs)
	if err == nil && halfData != nil {
		sess.Close()
		sess, err = runtime.NewSession(halfData, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("probing shapes in ONNX Runtime: %w", err)
	}
	defer sess.Close()
	in := make([]*runtime.Tensor, len(sess.Inputs))
	for i, x := range sess.Inputs {
		t, ok := feeds[x.Name]
		if !ok {
			return nil, fmt.Errorf("probing shapes: no value for graph input %q", x.Name)
		}
		in[i] = &runtime.Tensor{Shape: t.Shape, Float32: t.Float32, Float64: t.Float64, Int64: t.Int64}
	}
	outs, err := sess.Run(in...)
	if err != nil {
		return nil, fmt.Errorf("probing shapes: running the forward graph: %w", err)
	}
	got := make(map[string]*grad.ProbeTensor, len(outs))
	for i, o := range sess.Outputs {
		v := outs[i]
		if v == nil {
			continue
		}
		name, dt := o.Name, elemType(o.Type)
		if h, ok := halfType[name]; ok {
			name, dt = h.name, h.dtype
		}
		got[name] = &grad.ProbeTensor{DataType: dt, Shape: v.Shape, Float32: v.Float32, Float64: v.Float64, Int64: v.Int64}
	}
	return got, nil
}

// halfOutput is an output that the probe reads through a Cast to float32:
// the output's own name and real element type.
type halfOutput struct {
	name  string
	dtype int32
}

// exposeHalvesAsFloat routes model's float16 and bfloat16 outputs through
// Casts to float32, which the Go binding reads (onnxruntime_go v1.27.0
// copies a float16 output's element count in bytes, half of it, and fails).
// Given the first session's outputs, it returns the Casts' outputs by name
// with what they stand for, and the rewritten model, or no model when there
// is none (float32 graphs: the session stands).
func exposeHalvesAsFloat(model *onnxpb.ModelProto, outs []runtime.IOInfo) (map[string]halfOutput, []byte, error) {
	half := map[string]halfOutput{}
	g := model.GetGraph()
	var taken map[string]bool
	for _, o := range outs {
		dt := elemType(o.Type)
		if dt != int32(onnxpb.TensorProto_FLOAT16) && dt != int32(onnxpb.TensorProto_BFLOAT16) {
			continue
		}
		if taken == nil {
			taken = tensorNames(g)
		}
		cast := o.Name + "/float32"
		for i := 2; taken[cast]; i++ {
			cast = fmt.Sprintf("%s/float32_%d", o.Name, i)
		}
		taken[cast] = true
		g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Cast"), Name: proto.String(cast),
			Input: []string{o.Name}, Output: []string{cast},
			Attribute: []*onnxpb.AttributeProto{onnx.IntAttr("to", int64(onnxpb.TensorProto_FLOAT))}})
		for _, v := range g.Output {
			if v.GetName() == o.Name {
				v.Name = proto.String(cast)
			}
		}
		half[cast] = halfOutput{name: o.Name, dtype: dt}
	}
	if len(half) == 0 {
		return half, nil, nil
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(model)
	return half, data, err
}

// tensorNames returns every tensor and node name of g's top level.
func tensorNames(g *onnxpb.GraphProto) map[string]bool {
	names := map[string]bool{}
	for _, t := range g.GetInitializer() {
		names[t.GetName()] = true
	}
	for _, v := range g.GetInput() {
		names[v.GetName()] = true
	}
	for _, n := range g.GetNode() {
		names[n.GetName()] = true
		for _, o := range n.GetOutput() {
			names[o] = true
		}
	}
	return names
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
