package onnxgraph

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// MinOpset is the oldest default-domain opset the emitted nodes are valid
// in (ReduceSum with axes as an input, GatherElements-13, Min-13).
const MinOpset = 13

// Names are the tensors Append adds that a caller may want to read.
type Names struct {
	// TauProj is τ* = min(ō, τ), shaped like τ.
	TauProj string
	// Threshold is ō = ε* = max(0, θ*), shaped like δ ([..., 1]).
	Threshold string
	// Theta is θ*, the unclipped root, shaped like δ.
	Theta string
	// KStar is k*, the number of active coordinates (int64, shaped like δ).
	KStar string
	// Sorted is γ sorted descending (the TopK values).
	Sorted string
}

// Options tunes AppendWith.
type Options struct {
	// Prefix starts the name of every tensor and node added ("" means
	// "projection"). The names are Prefix + "/..." and must be new in the
	// graph.
	Prefix string
	// ElemType is the float type of τ and δ (FLOAT or DOUBLE). Zero means:
	// read it from the graph's inputs, value_info, outputs or initializers
	// declaring τ, and FLOAT when none does.
	ElemType onnx.DataType
}

// Append appends to g the nodes computing the projection of (δ, γ) = (delta,
// tau) onto C = {(ε, τ): τ_i ≤ ε, ε ≥ 0} and returns the names of τ* =
// min(ō, τ) (shaped like tau) and of ō = ε* (shaped like delta).
//
// tau is a float tensor [n] or [B..., n] (the projection acts on the last
// axis, independently for each leading index); delta has the same leading
// dimensions and a last dimension of 1 ([1] for a vector tau). opset is the
// default-domain opset of the model g belongs to (≥ MinOpset); the nodes
// are valid in every opset from 13 on. Every new tensor, node and
// initializer is named prefix + "/...".
func Append(g *onnx.GraphProto, opset int64, tau, delta, prefix string) (tauProj, threshold string, err error) {
	n, err := AppendWith(g, opset, tau, delta, Options{Prefix: prefix})
	if err != nil {
		return "", "", err
	}
	return n.TauProj, n.Threshold, nil
}

// AppendWith is Append with options, returning every named intermediate.
func AppendWith(g *onnx.GraphProto, opset int64, tau, delta string, opt Options) (Names, error) {
	if g == nil {
		return Names{}, errors.New("onnxgraph: nil graph")
	}
	if opset < MinOpset {
		return Names{}, fmt.Errorf("onnxgraph: opset %d < %d", opset, MinOpset)
	}
	if tau == "" || delta == "" || tau == delta {
		return Names{}, fmt.Errorf("onnxgraph: tau %q and delta %q must be distinct non-empty names", tau, delta)
	}
	prefix := opt.Prefix
	if prefix == "" {
		prefix = "projection"
	}
	dt := opt.ElemType
	if dt == 0 {
		dt = elemTypeOf(g, tau)
	}
	if dt != onnx.Float32 && dt != onnx.Float64 {
		return Names{}, fmt.Errorf("onnxgraph: element type %v of %q is not FLOAT or DOUBLE", dt, tau)
	}
	taken := namesIn(g)
	for _, x := range []string{tau, delta} {
		if !taken[x] {
			return Names{}, fmt.Errorf("onnxgraph: %q is not a tensor of the graph", x)
		}
	}
	for name := range taken {
		if strings.HasPrefix(name, prefix+"/") {
			return Names{}, fmt.Errorf("onnxgraph: the graph already has a tensor %q under prefix %q", name, prefix)
		}
	}

	// Names are chosen, not fresh: the prefix check above keeps them new.
	b := &onnx.Builder{Prefix: prefix + "/", Nodes: &g.Node, Inits: &g.Initializer}

	// n = size of the last axis of τ, as a [1] tensor (TopK's K) and as a
	// scalar (Range's limit).
	shape := b.Node("Shape", "shape", []string{tau})
	nK := b.Node("Slice", "n", []string{shape, b.ConstInt64("minus1", []int64{1}, -1),
		b.ConstInt64("intmax", []int64{1}, math.MaxInt64), b.ConstInt64("axis0", []int64{1}, 0)})
	nScalar := b.Node("Reshape", "n_scalar", []string{nK, b.ConstInt64("scalar_shape", []int64{0})})

	// γ sorted descending: g_1 ≥ g_2 ≥ … ≥ g_n. On ties TopK keeps the
	// lower index first; the values (all that is used) do not depend on it.
	sorted, order := b.Name("sorted"), b.Name("order")
	b.Emit("TopK", b.Name("topk"), []string{tau, nK}, []string{sorted, order},
		onnx.IntAttr("axis", -1), onnx.IntAttr("largest", 1), onnx.IntAttr("sorted", 1))

	// c = CumSum([δ, g_1, …, g_n]) = [δ, δ+g_1, …, δ+g_1+…+g_n] and
	// θ_k = c_k/(k+1), k = 0…n: the average of the top k, δ included.
	dg := b.Node("Concat", "delta_sorted", []string{delta, sorted}, onnx.IntAttr("axis", -1))
	csum := b.Node("CumSum", "cumsum", []string{dg, b.ConstInt64("axis_last", nil, -1)})
	lim := b.Node("Add", "count_limit", []string{nScalar, b.ConstInt64("two", nil, 2)})
	cnt := b.Node("Range", "count_int", []string{b.ConstInt64("one", nil, 1), lim, b.ConstInt64("step", nil, 1)})
	cntF := b.Node("Cast", "count", []string{cnt}, onnx.IntAttr("to", int64(dt)))
	thetaAll := b.Node("Div", "theta_all", []string{csum, cntF})

	// k* = #{k ≥ 1 : θ_k < g_k}. g_k > θ_k ⟺ g_k > θ_{k−1} (θ_k is a
	// weighted mean of θ_{k−1} and g_k), and g_k > θ_{k−1} holds on a
	// prefix of k (Lemma 1 of the paper), so the count is the k* with
	// g_{k*+1} ≤ θ_{k*} < g_{k*}. Comparisons carry no gradient.
	thetaK := b.Node("Slice", "theta_k", []string{thetaAll, b.ConstInt64("one_1", []int64{1}, 1),
		b.ConstInt64("intmax_1", []int64{1}, math.MaxInt64), b.ConstInt64("axis_last_1", []int64{1}, -1)})
	active := b.Node("Less", "active", []string{thetaK, sorted})
	activeI := b.Node("Cast", "active_int", []string{active}, onnx.IntAttr("to", int64(onnx.Int64)))
	kstar := b.Node("ReduceSum", "k_star", []string{activeI, b.ConstInt64("axis_last_2", []int64{1}, -1)},
		onnx.IntAttr("keepdims", 1))

	// θ* = θ_{k*}; ō = max(0, θ*); τ* = min(τ, ō) (the relu form).
	theta := b.Node("GatherElements", "theta", []string{thetaAll, kstar}, onnx.IntAttr("axis", -1))
	thr := b.Node("Relu", "threshold", []string{theta})
	proj := b.Node("Min", "tau_proj", []string{tau, thr})
	return Names{TauProj: proj, Threshold: thr, Theta: theta, KStar: kstar, Sorted: sorted}, nil
}

// NewModel returns a standalone model computing the projection: inputs
// "tau" (elemType [n], n dynamic) and "delta" (elemType [1]); outputs
// "tau_proj" [n], "threshold" [1] and "k_star" (int64 [1]).
func NewModel(elemType onnx.DataType, opset int64) (*onnx.Model, error) {
	g := &onnx.GraphProto{
		Name: proto.String("projection"),
		Input: []*onnx.ValueInfoProto{
			onnx.SymbolicValueInfo("tau", elemType, "n"),
			onnx.SymbolicValueInfo("delta", elemType, 1),
		},
	}
	names, err := AppendWith(g, opset, "tau", "delta", Options{Prefix: "proj", ElemType: elemType})
	if err != nil {
		return nil, err
	}
	b := &onnx.Builder{Nodes: &g.Node}
	for _, o := range []struct {
		from, to string
		dt       onnx.DataType
		dim      any
	}{
		{names.TauProj, "tau_proj", elemType, "n"},
		{names.Threshold, "threshold", elemType, 1},
		{names.KStar, "k_star", onnx.Int64, 1},
	} {
		b.Emit("Identity", "out/"+o.to, []string{o.from}, []string{o.to})
		g.Output = append(g.Output, onnx.SymbolicValueInfo(o.to, o.dt, o.dim))
	}
	m := onnx.NewModel(g, opset)
	m.Proto.ProducerName = proto.String("segtune")
	return m, nil
}

// namesIn collects every tensor name of g (inputs, initializers, node
// outputs, value_info, outputs) and every node name.
func namesIn(g *onnx.GraphProto) map[string]bool {
	m := map[string]bool{}
	for _, vs := range [][]*onnx.ValueInfoProto{g.Input, g.Output, g.ValueInfo} {
		for _, v := range vs {
			m[v.GetName()] = true
		}
	}
	for _, t := range g.Initializer {
		m[t.GetName()] = true
	}
	for _, n := range g.Node {
		for _, o := range n.Output {
			if o != "" {
				m[o] = true
			}
		}
		if n.GetName() != "" {
			m[n.GetName()] = true
		}
	}
	return m
}

// elemTypeOf finds the declared element type of name, FLOAT when undeclared.
func elemTypeOf(g *onnx.GraphProto, name string) onnx.DataType {
	for _, vs := range [][]*onnx.ValueInfoProto{g.Input, g.ValueInfo, g.Output} {
		for _, v := range vs {
			if v.GetName() == name {
				if tt := v.GetType().GetTensorType(); tt != nil && tt.GetElemType() != 0 {
					return onnx.DataType(tt.GetElemType())
				}
			}
		}
	}
	for _, t := range g.Initializer {
		if t.GetName() == name {
			return onnx.DataType(t.GetDataType())
		}
	}
	return onnx.Float32
}
