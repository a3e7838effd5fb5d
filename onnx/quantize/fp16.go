package quantize

import (
	"fmt"
	"math"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// float16Inputs lists the operators ToFloat16 runs in float16 and, for
// each, the inputs that become float16 (nil: every float input). The other
// inputs keep their types: Resize's ROI and scales, Reshape's shape,
// Slice's starts and ends stay float32 or int64 as the operator demands.
// Operators that lose accuracy in half precision — Softmax, LogSoftmax,
// Exp, Log, Pow, Sqrt, Div, the Reduce* family, normalisations over whole
// images (InstanceNormalization, LayerNormalization) — and every operator
// not listed stay float32, with Casts around them.
var float16Inputs = map[string][]int{
	"Conv": nil, "ConvTranspose": nil, "Gemm": nil, "MatMul": nil, "BatchNormalization": nil,
	"Relu": nil, "LeakyRelu": nil, "PRelu": nil, "Sigmoid": nil, "Tanh": nil, "HardSigmoid": nil,
	"HardSwish": nil, "Elu": nil, "Clip": nil,
	"Add": nil, "Sub": nil, "Mul": nil, "Concat": nil,
	"MaxPool": {0}, "AveragePool": {0}, "GlobalAveragePool": {0}, "GlobalMaxPool": {0},
	"Resize": {0}, "Reshape": {0}, "Transpose": {0}, "Squeeze": {0}, "Unsqueeze": {0}, "Flatten": {0},
	"Identity": {0}, "Slice": {0}, "Pad": {0, 2}, "Split": {0}, "DepthToSpace": {0}, "SpaceToDepth": {0},
	"Dropout": {0}, "Expand": {0}, "Tile": {0},
	// Type-agnostic readers: taking a shape needs no float32 copy.
	"Shape": {0}, "Size": {0},
}

// Float16Ops lists the operators ToFloat16 converts, sorted.
func Float16Ops() []string {
	var out []string
	for op := range float16Inputs {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// Float16Options configure ToFloat16.
type Float16Options struct {
	// Keep names op types and node names left in float32.
	Keep []string
}

// Float16Summary describes a float16 model.
type Float16Summary struct {
	// Float16Nodes counts the nodes computing in float16, by op type
	// (those the model computed in float16 itself included).
	Float16Nodes map[string]int `json:"float16_nodes"`
	// Float32Nodes lists the nodes with float inputs kept in float32.
	Float32Nodes []KeptNode `json:"float32_nodes,omitempty"`
	// Casts is the number of Cast nodes added at float16/float32
	// boundaries (the model's inputs and outputs included).
	Casts int `json:"casts"`
	// Initializers is the number of float initializers stored as float16;
	// Saturated counts values beyond float16's range set to ±65504.
	Initializers int `json:"float16_initializers"`
	Saturated    int `json:"saturated_values,omitempty"`
}

// float16Data returns the input positions of n that become float16 when
// n runs in float16.
func float16Data(n *onnx.NodeProto, i int) bool {
	idx, ok := float16Inputs[n.GetOpType()]
	if !ok {
		return false
	}
	if idx == nil {
		return true
	}
	for _, j := range idx {
		if j == i {
			return true
		}
	}
	return false
}

// ToFloat16 returns a copy of m that stores its float weights and computes
// its activations in float16 wherever the operator is safe in half
// precision (see float16Inputs), while its inputs and outputs keep their
// float32 types: Casts convert at the graph's edges and around the nodes
// left in float32. types must give the element type of every tensor nodes
// read (see ElemTypes). Graphs with subgraphs (If, Loop, Scan) are
// refused.
func ToFloat16(m *onnx.Model, types ElemTypes, o Float16Options) (*onnx.Model, *Float16Summary, error) {
	keep := newMatcher(o.Keep)
	if bad := keep.unmatched(m.Graph()); len(bad) > 0 {
		sort.Strings(bad)
		return nil, nil, &UnmatchedKeepError{Names: bad}
	}
	c := m.Clone()
	g := c.Graph()
	for _, n := range g.GetNode() {
		for _, a := range n.GetAttribute() {
			if a.GetG() != nil || len(a.GetGraphs()) > 0 {
				return nil, nil, fmt.Errorf("%s has a subgraph; float16 conversion handles graphs without control flow only", onnx.NodeLabel(g, n))
			}
		}
	}
	nm := newNames(g)
	sum := &Float16Summary{Float16Nodes: map[string]int{}}

	half := halfNodes(g, types, keep, sum)
	is16, err := float16Homes(g, types, half, sum)
	if err != nil {
		return nil, nil, err
	}
	sum.Casts = insertCasts(g, nm, types, half, is16)

	// Recorded types follow the tensors' new homes.
	for _, v := range g.GetValueInfo() {
		if tt := v.GetType().GetTensorType(); tt != nil && is16[v.GetName()] && tt.GetElemType() == int32(onnx.Float32) {
			tt.ElemType = proto.Int32(int32(onnx.Float16))
		}
	}
	if err := sortNodes(g); err != nil {
		return nil, nil, fmt.Errorf("float16 graph: %w", err)
	}
	if c.Proto.GetProducerName() != "" {
		c.Proto.ProducerName = proto.String(c.Proto.GetProducerName() + "+segtune-fp16")
	} else {
		c.Proto.ProducerName = proto.String("segtune-fp16")
	}
	return c, sum, nil
}

// halfNodes decides which nodes run in float16: a listed op, not kept,
// with a float32 tensor at one of its float16 positions. It counts them,
// and the float32 nodes with their reasons, in sum.
func halfNodes(g *onnx.GraphProto, types ElemTypes, keep matcher, sum *Float16Summary) map[*onnx.NodeProto]bool {
	half := map[*onnx.NodeProto]bool{}
	for _, n := range g.GetNode() {
		hasFloat := false
		for i, in := range n.GetInput() {
			if types.isFloat32(in) {
				hasFloat = true
				if float16Data(n, i) {
					half[n] = true
				}
			}
		}
		switch {
		case !isDefaultDomain(n):
		case half[n] && keep.match(n):
			half[n] = false
			sum.Float32Nodes = append(sum.Float32Nodes, KeptNode{Node: onnx.NodeLabel(g, n), Op: n.GetOpType(), Reason: KeptOnRequest})
		case half[n]:
			sum.Float16Nodes[n.GetOpType()]++
		case readsFloat16(n, types):
			sum.Float16Nodes[n.GetOpType()]++ // a float16 model's own: counted, left as it is
		case hasFloat:
			sum.Float32Nodes = append(sum.Float32Nodes, KeptNode{Node: onnx.NodeLabel(g, n), Op: n.GetOpType(), Reason: "float32 operator"})
		}
		if !isDefaultDomain(n) {
			half[n] = false
		}
	}
	return half
}

// readsFloat16 says whether n, an operator ToFloat16 runs in float16,
// already reads a float16 tensor at one of its float16 positions.
func readsFloat16(n *onnx.NodeProto, types ElemTypes) bool {
	for i, in := range n.GetInput() {
		if in != "" && float16Data(n, i) && types[in] == onnx.Float16 {
			return true
		}
	}
	return false
}

// float16Homes returns the tensors whose home is float16: float32
// outputs of float16 nodes, and float32 initializers that only float16
// positions read (converted here, saturating at ±65504).
func float16Homes(g *onnx.GraphProto, types ElemTypes, half map[*onnx.NodeProto]bool, sum *Float16Summary) (map[string]bool, error) {
	is16 := map[string]bool{}
	for _, n := range g.GetNode() {
		if !half[n] {
			continue
		}
		for _, out := range n.GetOutput() {
			if types.isFloat32(out) {
				is16[out] = true
			}
		}
	}
	inits := initializers(g)
	readers := map[string][2]int{} // tensor → (float16 reads, float32 reads)
	for _, n := range g.GetNode() {
		for i, in := range n.GetInput() {
			r := readers[in]
			if half[n] && float16Data(n, i) {
				r[0]++
			} else {
				r[1]++
			}
			readers[in] = r
		}
	}
	outs := graphOutputs(g)
	for name, t := range inits {
		r := readers[name]
		if t.GetDataType() != int32(onnx.Float32) || r[0] == 0 || r[1] > 0 || outs[name] {
			continue
		}
		vals, err := onnx.Float32s(t)
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			if v > 65504 || v < -65504 {
				vals[i] = float32(math.Copysign(65504, float64(v)))
				sum.Saturated++
			}
		}
		*t = *float16Tensor(name, t.GetDims(), vals)
		is16[name] = true
		sum.Initializers++
	}
	return is16, nil
}

// insertCasts puts a Cast wherever a tensor crosses between float16 and
// float32 (one per tensor and direction), renames float16 graph outputs
// behind a Cast back to float32, and returns the number of Casts.
func insertCasts(g *onnx.GraphProto, nm *names, types ElemTypes, half map[*onnx.NodeProto]bool, is16 map[string]bool) int {
	var casts []*onnx.NodeProto
	castTo := map[[2]string]string{}
	cast := func(name string, to onnx.DataType) string {
		key := [2]string{name, to.String()}
		if out, ok := castTo[key]; ok {
			return out
		}
		suffix := "_float16"
		if to == onnx.Float32 {
			suffix = "_float32"
		}
		out := nm.fresh(name + suffix)
		casts = append(casts, node("Cast", nm.fresh(name+suffix+"_Cast"), []string{name}, []string{out}, onnx.IntAttr("to", int64(to))))
		castTo[key] = out
		return out
	}
	// Graph outputs produced in float16 are renamed; a Cast restores them.
	for _, v := range g.GetOutput() {
		name := v.GetName()
		if !is16[name] {
			continue
		}
		h := nm.fresh(name + "_float16")
		renameOutput(g, name, h)
		replaceInput(g, name, h)
		is16[h] = true
		casts = append(casts, node("Cast", nm.fresh(name+"_Cast"), []string{h}, []string{name}, onnx.IntAttr("to", int64(onnx.Float32))))
	}
	// A float16 tensor that one of the model's own Casts widens to float32
	// (float16-stored weights behind Casts) is read as it is stored:
	// float16 → float32 → float16 is exact, so no Cast back is added, and
	// the model's Cast goes once nothing reads it.
	widened := map[string]string{} // Cast(float16 → float32) output → its input
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Cast" && isDefaultDomain(n) && len(n.Input) == 1 && len(n.Output) == 1 &&
			onnx.AttrInt(n, "to", 0) == int64(onnx.Float32) && types[n.Input[0]] == onnx.Float16 {
			widened[n.Output[0]] = n.Input[0]
		}
	}
	for _, n := range g.GetNode() {
		for i, in := range n.Input {
			switch {
			case in == "":
			case half[n] && float16Data(n, i) && widened[in] != "":
				n.Input[i] = widened[in]
			case half[n] && float16Data(n, i) && types.isFloat32(in) && !is16[in]:
				n.Input[i] = cast(in, onnx.Float16)
			case !(half[n] && float16Data(n, i)) && is16[in]:
				n.Input[i] = cast(in, onnx.Float32)
			}
		}
	}
	g.Node = append(dropUnreadCasts(g, widened), casts...)
	return len(casts)
}

// dropUnreadCasts returns g's nodes without the Casts producing tensors
// of widened that no node and no graph output reads any more.
func dropUnreadCasts(g *onnx.GraphProto, widened map[string]string) []*onnx.NodeProto {
	read := graphOutputs(g)
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			read[in] = true
		}
	}
	kept := g.Node[:0]
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Cast" && len(n.Output) == 1 && widened[n.Output[0]] != "" && !read[n.Output[0]] {
			continue
		}
		kept = append(kept, n)
	}
	return kept
}
