package grad_test

import (
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestNodeRoles: the compiler writes on each node it adds the role of what
// it computes — a Conv's input gradient, weight gradient and bias gradient
// apart (the weight seen through autocast's Cast too), the loss and its
// gradient, a MatMul's operands — and the class of every convolution, forward and backward.
func TestNodeRoles(t *testing.T) {
	runtimetest.Require(t)
	for _, half := range []bool{false, true} {
		t.Run(map[bool]string{false: "float32", true: "float16"}[half], func(t *testing.T) {
			m := newOpModel(13)
			x := m.rand("x", 1, 4, 6, 6)
			w := m.rand("w", 4, 1, 3, 3)
			b := m.rand("b", 4)
			m.node("Conv", []string{x, w, b}, []string{"c"}, ais("pads", 1, 1, 1, 1), ai("group", 4))
			m.node("Relu", []string{"c"}, []string{"r"})
			m.node("MatMul", []string{"r", m.rand("v", 6, 6)}, []string{"logits"})
			m.outs = []string{"logits"}
			model := m.model()
			if half {
				if _, err := autocast.Apply(model, autocast.Float16); err != nil {
					t.Fatal(err)
				}
			}
			// x trainable: its gradient is the Conv's input gradient.
			gs, err := grad.Build(model, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"x", "w", "b", "v"}, DirectConvs: true})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, n := range gs.Training.Proto.Graph.Node {
				r, ok := grad.ReadNodeRole(n)
				switch {
				case n.GetName() == "n0_Conv":
					if !ok || r.Role != "" || r.ConvClass != grad.ConvDepthwise {
						t.Errorf("forward Conv: role %+v (%v), want a depthwise class and no role", r, ok)
					}
				case n.GetOpType() == "Cast" && !ok:
					// autocast's, in the forward pass
				case !ok && n.GetDocString() == "":
					if len(n.GetName()) > 4 && (n.GetName()[:4] == "bwd/" || n.GetName()[:5] == "loss/") {
						t.Errorf("%s (%s) has no role", n.GetName(), n.GetOpType())
					}
				}
				if r.Of == "n0_Conv" {
					if r.ConvClass != grad.ConvDepthwise || r.Op != "Conv" {
						t.Errorf("%s (%s): %+v, want Conv's depthwise class", n.GetName(), n.GetOpType(), r)
					}
					seen[r.Role]++
				}
				if r.Of == "n2_MatMul" {
					seen["MatMul "+r.Role]++
				}
				if r.Role == grad.RoleLoss {
					seen[grad.RoleLoss]++
				}
			}
			// The MatMul's right operand is a parameter, behind a Cast in
			// the float16 graph: its gradient is a weight gradient.
			for _, role := range []string{grad.RoleDataGrad, grad.RoleWeightGrad, grad.RoleBiasGrad, grad.RoleLoss, "MatMul " + grad.RoleWeightGrad, "MatMul " + grad.RoleDataGrad} {
				if seen[role] == 0 {
					t.Errorf("no %q node (roles of the Conv's backward and the loss: %v)", role, seen)
				}
			}
		})
	}
}

// TestNodeRoleRoundTrip: what writeRole writes ReadNodeRole reads, with
// the separators of a node name kept out of the fields.
func TestNodeRoleRoundTrip(t *testing.T) {
	n := &onnx.NodeProto{}
	grad.WriteNodeRoleForTest(n, grad.NodeRole{Role: grad.RoleWeightGrad, Of: "a;b=c", Op: "Conv", ConvClass: grad.ConvGrouped})
	r, ok := grad.ReadNodeRole(n)
	if !ok || r.Role != grad.RoleWeightGrad || r.Of != "a,b:c" || r.Op != "Conv" || r.ConvClass != grad.ConvGrouped {
		t.Errorf("read %+v (%v) from %q", r, ok, n.GetDocString())
	}
	if _, ok := grad.ReadNodeRole(&onnx.NodeProto{}); ok {
		t.Error("a node without a doc_string has a role")
	}
}
