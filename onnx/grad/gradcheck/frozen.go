package gradcheck

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
)

// Frozen kinks.
//
// A segmentation network is piecewise smooth: every Relu, Clip (ReLU6),
// LeakyRelu, HardSigmoid and MaxPool is a kink, and a float32 central
// difference with a step large enough to beat rounding crosses thousands of
// them, so it measures something other than the derivative at θ. With
// Options.FreezeKinks the differences are taken on a copy of the evaluation
// graph in which each kink keeps, at every element, the linear piece it is
// on at θ:
//
//	Relu, Clip, LeakyRelu, HardSigmoid:  y = M ⊙ x + C   (M the slope at θ, C = y(θ) − M ⊙ x(θ))
//	MaxPool:                             y = x.flat[I]   (I the argmax indices at θ)
//
// The frozen graph has the original's value and gradient at θ, and is
// smooth: a network of convolutions, resizes and kinks becomes affine in
// any single weight tensor, so its central differences are exact up to
// rounding for steps as large as the weights. The analytic gradient still
// comes from the training graph of the original model.

// frozenOps are the kinked operators FreezeKinks has a recipe for; any
// other operator the compiler's registry marks as kinked (grad.HasKinks)
// is an error rather than a difference taken across its kinks.
var frozenOps = map[string]bool{"Relu": true, "Clip": true, "LeakyRelu": true, "HardSigmoid": true, "MaxPool": true}

// kinked reports whether n is a default-domain operator with kinks, and
// fails on one without a recipe.
func kinked(n *onnx.NodeProto) (bool, error) {
	if n.GetDomain() != "" && n.GetDomain() != "ai.onnx" {
		return false, nil
	}
	op := n.GetOpType()
	if frozenOps[op] {
		return true, nil
	}
	if grad.HasKinks(op) {
		return false, fmt.Errorf("freezing kinks: no recipe for %s (node %q), whose kinks a finite difference would cross", op, n.GetName())
	}
	return false, nil
}

// FreezeKinks returns a copy of eval with its kinks frozen at the values
// that run (evaluating a model at θ and returning its outputs by name)
// gives; f64 stores the slopes and offsets as doubles. Check uses it for
// Options.FreezeKinks; tests with checks of their own call it directly.
func FreezeKinks(eval *onnx.Model, f64 bool, run func(*onnx.Model) (map[string]*runtime.Tensor, error)) (*onnx.Model, error) {
	probe := eval.Clone()
	g := probe.Proto.Graph
	var watch []string
	indices := map[string]string{} // MaxPool output → its Indices output
	for _, n := range g.Node {
		if k, err := kinked(n); err != nil {
			return nil, err
		} else if !k {
			continue
		}
		if n.GetOpType() == "MaxPool" {
			// The compiler gives MaxPool an Indices output for its rule;
			// add one where it has none.
			if len(n.Output) < 2 || n.Output[1] == "" {
				n.Output = append(n.Output[:1], "frozen/"+n.Output[0]+"/indices")
			}
			for _, a := range n.Attribute {
				if a.GetName() == "storage_order" && a.GetI() != 0 {
					return nil, fmt.Errorf("freezing kinks: MaxPool %q has storage_order %d", n.GetName(), a.GetI())
				}
			}
			indices[n.Output[0]] = n.Output[1]
			watch = append(watch, n.Output[1])
			continue
		}
		watch = append(watch, n.Input[0], n.Output[0])
	}
	if len(watch) == 0 {
		return eval, nil
	}
	for _, w := range watch {
		g.Output = append(g.Output, &onnx.ValueInfoProto{Name: proto.String(w)})
	}
	vals, err := run(probe)
	if err != nil {
		return nil, fmt.Errorf("freezing kinks: %w", err)
	}
	fz := eval.Clone()
	g = fz.Proto.Graph
	dt := onnx.Float32
	if f64 {
		dt = onnx.Float64
	}
	var nodes []*onnx.NodeProto
	b := &onnx.Builder{Nodes: &nodes, Inits: &g.Initializer}
	for _, n := range g.Node {
		op := n.GetOpType()
		if k, _ := kinked(n); !k { // errors were returned by the probe pass
			nodes = append(nodes, n)
			continue
		}
		base := "frozen/" + n.Output[0]
		if op == "MaxPool" {
			idx := vals[indices[n.Output[0]]]
			if idx == nil {
				return nil, fmt.Errorf("freezing kinks: node %q: no probed indices", n.GetName())
			}
			b.Initializer(onnx.NewInt64Tensor(base+"/indices", idx.Shape, idx.Int64))
			b.Initializer(onnx.NewInt64Tensor(base+"/flat", []int64{1}, []int64{-1}))
			b.Emit("Reshape", base+"/reshape", []string{n.Input[0], base + "/flat"}, []string{base + "/x"})
			b.Emit("Gather", base+"/gather", []string{base + "/x", base + "/indices"}, []string{n.Output[0]})
			continue
		}
		xt, yt := vals[n.Input[0]], vals[n.Output[0]]
		if xt == nil || yt == nil {
			return nil, fmt.Errorf("freezing kinks: node %q: no probed values", n.GetName())
		}
		xv, yv := floats(xt), floats(yt)
		alpha := 0.2
		if op == "LeakyRelu" {
			alpha = 0.01
		}
		if a := onnx.Attr(n, "alpha"); a != nil {
			alpha = float64(a.GetF())
		}
		slope := make([]float64, len(xv))
		offset := make([]float64, len(xv))
		for i, x := range xv {
			y := yv[i]
			switch op {
			case "Relu":
				if x > 0 {
					slope[i] = 1
				}
			case "LeakyRelu":
				slope[i] = 1
				if x < 0 {
					slope[i] = alpha
				}
			case "Clip": // inside [min, max], bounds included
				if y == x {
					slope[i] = 1
				}
			case "HardSigmoid": // strictly inside (0, 1)
				if y > 0 && y < 1 {
					slope[i] = alpha
				}
			}
			offset[i] = y - slope[i]*x
		}
		b.Initializer(onnx.NewFloatTensor(base+"/slope", dt, xt.Shape, slope))
		b.Initializer(onnx.NewFloatTensor(base+"/offset", dt, xt.Shape, offset))
		b.Emit("Mul", base+"/mul", []string{n.Input[0], base + "/slope"}, []string{base + "/lin"})
		b.Emit("Add", base+"/add", []string{base + "/lin", base + "/offset"}, []string{n.Output[0]})
	}
	g.Node = nodes
	return fz, nil
}
