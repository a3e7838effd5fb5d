package onnx

import (
	"fmt"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// Builder emits the nodes and initializers of a graph built in code. It is
// the one graph builder of the project: the gradient compiler (onnx/grad),
// the projection graph (projection/onnxgraph), the models package and the
// tests' hand-built models all write their nodes through it.
//
// Names come in two kinds. Name(s) is Prefix+s, for callers that choose
// their names (a layer "aspp.b1", a tensor "proj/theta"); Fresh(hint) is
// Prefix+hint+"_N" with a counter, skipping every name Taken reports, for
// callers that only need a name nobody uses yet.
//
// The zero Builder is ready to use: no prefix, nothing taken, and slices of
// its own for the nodes and initializers.
type Builder struct {
	// Prefix starts every name that Name, Fresh and the emitting methods
	// make; names passed to Emit are used as given.
	Prefix string
	// Taken, when set, reports names the graph already uses; Fresh never
	// returns one of them.
	Taken func(string) bool
	// Nodes and Inits are the slices the builder appends its nodes and
	// initializers to. They may point into the caller's own data (a
	// GraphProto's Node and Initializer, say), which the caller may read,
	// reorder or reset between calls, for instance to place helper nodes
	// around the node they serve. Nil means a slice of the builder's own,
	// allocated on first use.
	Nodes *[]*onnxpb.NodeProto
	Inits *[]*onnxpb.TensorProto

	count  int
	consts map[string]string // constant key (value or name) → initializer name
}

// Name returns Prefix + s.
func (b *Builder) Name(s string) string { return b.Prefix + s }

// Fresh returns a new name Prefix+hint+"_N" that Taken does not report; N
// counts up over the builder's life, so names never repeat.
func (b *Builder) Fresh(hint string) string {
	for {
		b.count++
		name := fmt.Sprintf("%s%s_%d", b.Prefix, hint, b.count)
		if b.Taken == nil || !b.Taken(name) {
			return name
		}
	}
}

// Emit appends a node of type opType named name, with the given inputs and
// outputs, all names used as given (no prefix). Nil attributes are skipped,
// so callers can pass optional ones inline. The node is returned for
// callers that place it themselves.
func (b *Builder) Emit(opType, name string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	n := &onnxpb.NodeProto{
		Name:   &name,
		OpType: &opType,
		Input:  append([]string{}, inputs...),
		Output: append([]string{}, outputs...),
	}
	for _, a := range attrs {
		if a != nil {
			n.Attribute = append(n.Attribute, a)
		}
	}
	if b.Nodes == nil {
		b.Nodes = new([]*onnxpb.NodeProto)
	}
	*b.Nodes = append(*b.Nodes, n)
	return n
}

// Node appends a node with one output, naming both the node and its output
// Name(name), and returns the output's name.
func (b *Builder) Node(opType, name string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	full := b.Name(name)
	b.Emit(opType, full, inputs, []string{full}, attrs...)
	return full
}

// Op appends a node with nOut outputs, all with fresh names (hinted by
// opType), and returns the outputs' names.
func (b *Builder) Op(opType string, inputs []string, nOut int, attrs ...*onnxpb.AttributeProto) []string {
	outs := make([]string, nOut)
	for i := range outs {
		outs[i] = b.Fresh(opType)
	}
	b.OpTo(opType, inputs, outs, attrs...)
	return outs
}

// Op1 is Op with one output, returning its name.
func (b *Builder) Op1(opType string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	return b.Op(opType, inputs, 1, attrs...)[0]
}

// OpTo appends a node with a fresh name writing to the given outputs.
func (b *Builder) OpTo(opType string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return b.Emit(opType, b.Fresh("node_"+opType), inputs, outputs, attrs...)
}

// Initializer appends t (a parameter, say) as it is and returns its name.
func (b *Builder) Initializer(t *onnxpb.TensorProto) string {
	if b.Inits == nil {
		b.Inits = new([]*onnxpb.TensorProto)
	}
	*b.Inits = append(*b.Inits, t)
	return t.GetName()
}

// maxSharedConst bounds the size of the unnamed constants shared by value:
// larger ones are rare and keying them would cost more than it saves.
const maxSharedConst = 64

// ConstInt64 returns the name of an INT64 initializer of shape dims
// holding vals (dims nil: a scalar). With a name, the initializer is
// Name(name) and is added on the first request only, so a builder can ask
// for "const.zero" wherever it needs it. Without one ("") it gets a fresh
// name, and requests for the same small constant share one initializer.
func (b *Builder) ConstInt64(name string, dims []int64, vals ...int64) string {
	key := func() string { return fmt.Sprintf("i%v%v", dims, vals) }
	return b.constant(name, key, len(vals), func(full string) *onnxpb.TensorProto {
		return NewInt64Tensor(full, dims, vals)
	})
}

// ConstFloat is ConstInt64 for a float initializer of element type dt
// (FLOAT or DOUBLE, chosen by the caller: a float64 model's constants must
// be float64 too).
func (b *Builder) ConstFloat(name string, dt onnxpb.TensorProto_DataType, dims []int64, vals ...float64) string {
	key := func() string { return fmt.Sprintf("f%d%v%v", dt, dims, vals) }
	return b.constant(name, key, len(vals), func(full string) *onnxpb.TensorProto {
		return NewFloatTensor(full, dt, dims, vals)
	})
}

// constant adds (or finds) a constant initializer of n values: named ones
// are keyed by name, unnamed small ones by valueKey().
func (b *Builder) constant(name string, valueKey func() string, n int, tensor func(string) *onnxpb.TensorProto) string {
	var key string
	switch {
	case name != "":
		key = "=" + name // cannot collide with a value key, which starts with a letter
	case n <= maxSharedConst:
		key = valueKey()
	}
	if have, ok := b.consts[key]; ok && key != "" {
		return have
	}
	full := b.Name(name)
	if name == "" {
		full = b.Fresh("const")
	}
	b.Initializer(tensor(full))
	if key != "" {
		if b.consts == nil {
			b.consts = map[string]string{}
		}
		b.consts[key] = full
	}
	return full
}

// Graph returns a graph named name holding the builder's nodes and
// initializers (the slices themselves, not copies) and the given inputs
// and outputs.
func (b *Builder) Graph(name string, inputs, outputs []*onnxpb.ValueInfoProto) *onnxpb.GraphProto {
	g := &onnxpb.GraphProto{Name: &name, Input: inputs, Output: outputs}
	if b.Nodes != nil {
		g.Node = *b.Nodes
	}
	if b.Inits != nil {
		g.Initializer = *b.Inits
	}
	return g
}
