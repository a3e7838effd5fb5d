package onnx

import (
	"cmp"
	"slices"

	"github.com/segtune/segtune/onnx/onnxpb"
)

// Summary describes a model at a glance; it is what `segtune info` prints,
// and its JSON form is `segtune info --json`.
type Summary struct {
	Path            string   `json:"path,omitempty"`
	IRVersion       int64    `json:"ir_version"`
	Opsets          []Opset  `json:"opsets"`
	ProducerName    string   `json:"producer_name,omitempty"`
	ProducerVersion string   `json:"producer_version,omitempty"`
	Graph           string   `json:"graph,omitempty"`
	Inputs          []Value  `json:"inputs"`  // inputs to feed (not initializers)
	Outputs         []Value  `json:"outputs"` // graph outputs
	Nodes           int      `json:"nodes"`   // all nodes, subgraphs included
	Ops             []OpStat `json:"ops"`     // histogram, most frequent first
	// Initializers counts the main graph's initializers; InitializerBytes is
	// their size by dims and element type, whatever the storage.
	Initializers     int   `json:"initializers"`
	InitializerBytes int64 `json:"initializer_bytes"`
	// Parameters counts the elements of floating-point initializers;
	// ParameterBytes is their size.
	Parameters     int64 `json:"parameters"`
	ParameterBytes int64 `json:"parameter_bytes"`
	// Trainable counts the elements of the learned parameters (the rule of
	// ParameterNames: what fine-tuning's "all" trains), TrainableTensors
	// the tensors; running statistics and architecture constants are left
	// out.
	Trainable        int64 `json:"trainable"`
	TrainableTensors int   `json:"trainable_tensors"`
	// Frozen lists the float initializers the rule leaves out, with the
	// reason (FrozenFloats).
	Frozen []Frozen `json:"frozen,omitempty"`
	// WeightInputs counts the initializers the file also listed as graph
	// inputs (IR < 4), read as weights; FileIRVersion is the IR version
	// the file declared where reading them so raised it.
	WeightInputs  int   `json:"weight_inputs,omitempty"`
	FileIRVersion int64 `json:"file_ir_version,omitempty"`
}

// Opset is an imported operator set; Domain "" is the default ai.onnx.
type Opset struct {
	Domain  string `json:"domain"`
	Version int64  `json:"version"`
}

// Value is a graph input or output.
type Value struct {
	Name string `json:"name"`
	Type string `json:"type"` // see TypeString
	// Dims holds one entry per dimension (see Dims); null when the rank is
	// unknown.
	Dims []string `json:"dims"`
}

// OpStat counts the nodes of one operator type. Op is qualified with its
// domain outside the default one, e.g. "com.microsoft.FusedConv".
type OpStat struct {
	Op    string `json:"op"`
	Count int    `json:"count"`
}

// Summary computes the model's summary. It never fails: tensors with
// inconsistent dims (only possible for models built in memory, as Load
// validates) are left out of the byte and parameter counts.
func (m *Model) Summary() Summary {
	p := m.Proto
	g := p.GetGraph()
	s := Summary{
		Path:            m.Path,
		IRVersion:       p.GetIrVersion(),
		ProducerName:    p.GetProducerName(),
		ProducerVersion: p.GetProducerVersion(),
		Graph:           g.GetName(),
		Opsets:          []Opset{},
		Inputs:          values(DataInputs(g)),
		Outputs:         values(g.GetOutput()),
		WeightInputs:    m.WeightInputs,
		FileIRVersion:   m.FileIRVersion,
	}
	for _, o := range p.GetOpsetImport() {
		s.Opsets = append(s.Opsets, Opset{Domain: o.GetDomain(), Version: o.GetVersion()})
	}
	hist := map[string]int{}
	countOps(g, hist, &s.Nodes)
	s.Ops = make([]OpStat, 0, len(hist))
	for op, n := range hist {
		s.Ops = append(s.Ops, OpStat{Op: op, Count: n})
	}
	slices.SortFunc(s.Ops, func(a, b OpStat) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Op, b.Op))
	})
	learned := ParameterNames(g)
	for _, t := range g.GetInitializer() {
		s.Initializers++
		n, err := NumElements(t.GetDims())
		if err != nil {
			continue
		}
		size, ok := rawBytes(t.GetDataType(), n)
		if !ok {
			continue
		}
		s.InitializerBytes += size
		if isFloatType(t.GetDataType()) {
			s.Parameters += n
			s.ParameterBytes += size
		}
		if learned[t.GetName()] {
			s.Trainable += n
			s.TrainableTensors++
		}
	}
	s.Frozen = FrozenFloats(g)
	return s
}

func values(vs []*onnxpb.ValueInfoProto) []Value {
	out := make([]Value, 0, len(vs))
	for _, v := range vs {
		out = append(out, Value{Name: v.GetName(), Type: TypeString(v.GetType()), Dims: Dims(v.GetType())})
	}
	return out
}

// countOps adds the nodes of g and of its subgraphs to hist and *total.
func countOps(g *onnxpb.GraphProto, hist map[string]int, total *int) {
	for _, n := range g.GetNode() {
		op := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			op = d + "." + op
		}
		hist[op]++
		*total++
		for _, a := range n.GetAttribute() {
			if a.GetG() != nil {
				countOps(a.GetG(), hist, total)
			}
			for _, sg := range a.GetGraphs() {
				countOps(sg, hist, total)
			}
		}
	}
}
