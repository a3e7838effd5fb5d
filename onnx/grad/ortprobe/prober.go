package ortprobe

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
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
func (p Prober) Probe(model *onnx.ModelProto, feeds map[string]*grad.ProbeTensor) (map[string]*grad.ProbeTensor, error) {
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
func exposeHalvesAsFloat(model *onnx.ModelProto, outs []runtime.IOInfo) (map[string]halfOutput, []byte, error) {
	half := map[string]halfOutput{}
	g := model.GetGraph()
	var taken map[string]bool
	for _, o := range outs {
		dt := elemType(o.Type)
		if dt != int32(onnx.Float16) && dt != int32(onnx.BFloat16) {
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
		g.Node = append(g.Node, &onnx.NodeProto{OpType: proto.String("Cast"), Name: proto.String(cast),
			Input: []string{o.Name}, Output: []string{cast},
			Attribute: []*onnx.AttributeProto{onnx.IntAttr("to", int64(onnx.Float32))}})
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
func tensorNames(g *onnx.GraphProto) map[string]bool {
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

// elemType maps ONNX Runtime's element type names (runtime.IOInfo.Type) to
// ONNX data types; the names of types the probe reads no values of map to
// Undefined.
func elemType(s string) int32 {
	short := map[string]onnx.DataType{
		"float32": onnx.Float32, "float64": onnx.Float64,
		"int64": onnx.Int64, "int32": onnx.Int32,
		"bool": onnx.Bool, "uint8": onnx.Uint8,
		"int8": onnx.Int8, "float16": onnx.Float16,
	}
	return int32(short[strings.ToLower(s)])
}
