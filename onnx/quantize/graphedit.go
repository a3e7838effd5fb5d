package quantize

import (
	"encoding/binary"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx"
)

// ElemTypes maps tensor names (graph inputs, initializers, node outputs)
// to their element types. The quantizers need them to tell float
// activations from shape arithmetic; package deploy reads them from ONNX
// Runtime.
type ElemTypes map[string]onnx.DataType

// isFloat32 reports whether name is known to be a float32 tensor.
func (t ElemTypes) isFloat32(name string) bool {
	return name != "" && t[name] == onnx.Float32
}

// names hands out tensor and node names that do not clash with any name
// already in the graph.
type names struct{ used map[string]bool }

func newNames(g *onnx.GraphProto) *names {
	n := &names{used: map[string]bool{}}
	for _, v := range g.GetInput() {
		n.used[v.GetName()] = true
	}
	for _, v := range g.GetOutput() {
		n.used[v.GetName()] = true
	}
	for _, t := range g.GetInitializer() {
		n.used[t.GetName()] = true
	}
	for _, x := range g.GetNode() {
		n.used[x.GetName()] = true
		for _, o := range x.GetOutput() {
			n.used[o] = true
		}
	}
	return n
}

// fresh returns base, or base_2, base_3 … if it is taken, and reserves it.
func (n *names) fresh(base string) string {
	name := base
	for i := 2; n.used[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	n.used[name] = true
	return name
}

func node(op, name string, inputs, outputs []string, attrs ...*onnx.AttributeProto) *onnx.NodeProto {
	return &onnx.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: inputs, Output: outputs, Attribute: attrs}
}

// intTensor builds an initializer of an 8- or 32-bit integer type.
func intTensor(name string, dt onnx.DataType, dims []int64, values []int32) *onnx.TensorProto {
	var raw []byte
	switch dt {
	case onnx.Int8, onnx.Uint8:
		raw = make([]byte, len(values))
		for i, v := range values {
			raw[i] = byte(v)
		}
	case onnx.Int32:
		raw = make([]byte, 4*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
		}
	default:
		panic("intTensor: " + dt.String())
	}
	d := int32(dt)
	return &onnx.TensorProto{Name: proto.String(name), DataType: &d, Dims: append([]int64(nil), dims...), RawData: raw}
}

// float16Tensor builds a FLOAT16 initializer from float32 values.
func float16Tensor(name string, dims []int64, values []float32) *onnx.TensorProto {
	raw := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(raw[2*i:], onnx.Float32ToFloat16(v))
	}
	d := int32(onnx.Float16)
	return &onnx.TensorProto{Name: proto.String(name), DataType: &d, Dims: append([]int64(nil), dims...), RawData: raw}
}

// isDefaultDomain reports nodes of the standard ONNX operator set.
func isDefaultDomain(n *onnx.NodeProto) bool {
	d := n.GetDomain()
	return d == "" || d == "ai.onnx"
}

// matcher tells whether a node is named by a list of op types, node
// names and output tensor names (a keep list; exporters often
// leave nodes unnamed, but their outputs always have names).
type matcher struct{ items map[string]bool }

func newMatcher(items []string) matcher {
	m := matcher{items: map[string]bool{}}
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			m.items[it] = true
		}
	}
	return m
}

func (m matcher) match(n *onnx.NodeProto) bool {
	if m.items[n.GetOpType()] || (n.GetName() != "" && m.items[n.GetName()]) {
		return true
	}
	for _, o := range n.GetOutput() {
		if o != "" && m.items[o] {
			return true
		}
	}
	return false
}

// unmatched returns the items that name no node of g, so that a typo in
// a keep list is reported rather than silently ignored.
func (m matcher) unmatched(g *onnx.GraphProto) []string {
	seen := map[string]bool{}
	for _, n := range g.GetNode() {
		seen[n.GetOpType()] = true
		seen[n.GetName()] = true
		for _, o := range n.GetOutput() {
			seen[o] = true
		}
	}
	var out []string
	for it := range m.items {
		if !seen[it] {
			out = append(out, it)
		}
	}
	return out
}

// graphOutputs is the set of g's output names.
func graphOutputs(g *onnx.GraphProto) map[string]bool {
	out := map[string]bool{}
	for _, v := range g.GetOutput() {
		out[v.GetName()] = true
	}
	return out
}

// initializers maps g's initializers by name.
func initializers(g *onnx.GraphProto) map[string]*onnx.TensorProto {
	out := map[string]*onnx.TensorProto{}
	for _, t := range g.GetInitializer() {
		out[t.GetName()] = t
	}
	return out
}

// replaceInput points every input of the nodes in g reading from at to,
// except in the nodes listed in skip.
func replaceInput(g *onnx.GraphProto, from, to string, skip ...*onnx.NodeProto) {
	for _, n := range g.GetNode() {
		if containsNode(skip, n) {
			continue
		}
		for i, in := range n.Input {
			if in == from {
				n.Input[i] = to
			}
		}
	}
}

func containsNode(list []*onnx.NodeProto, n *onnx.NodeProto) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// pruneInitializers drops the initializers no node reads any more (and
// their graph-input entries, for models from before IR 4).
func pruneInitializers(g *onnx.GraphProto) {
	read := map[string]bool{}
	for _, n := range g.GetNode() {
		for _, in := range onnx.NodeInputs(n) {
			read[in] = true
		}
	}
	for _, v := range g.GetOutput() {
		read[v.GetName()] = true
	}
	var keep []*onnx.TensorProto
	dropped := map[string]bool{}
	for _, t := range g.GetInitializer() {
		if read[t.GetName()] {
			keep = append(keep, t)
		} else {
			dropped[t.GetName()] = true
		}
	}
	g.Initializer = keep
	var ins []*onnx.ValueInfoProto
	for _, v := range g.GetInput() {
		if !dropped[v.GetName()] {
			ins = append(ins, v)
		}
	}
	g.Input = ins
}

// dropValueInfo removes the value_info entries of the named tensors.
func dropValueInfo(g *onnx.GraphProto, drop map[string]bool) {
	var keep []*onnx.ValueInfoProto
	for _, v := range g.GetValueInfo() {
		if !drop[v.GetName()] {
			keep = append(keep, v)
		}
	}
	g.ValueInfo = keep
}

// sortNodes puts g's nodes back in topological order after edits that
// appended nodes at the end.
func sortNodes(g *onnx.GraphProto) error {
	sorted, err := onnx.TopoSort(g)
	if err != nil {
		return err
	}
	g.Node = sorted
	return nil
}

// UnmatchedKeepError reports names in the list of nodes to keep in float32
// (Keep of the options) that no node of the model has as op type, name or
// output; the list is the setting keep_float.
type UnmatchedKeepError struct {
	Names []string // sorted
}

func (e *UnmatchedKeepError) Error() string { return e.Named(setting.Key) }

// Named is the message with its setting called name(key).
func (e *UnmatchedKeepError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "{keep_float} names %s, which no node of the model has as op type, name or output", strings.Join(e.Names, ", "))
}
