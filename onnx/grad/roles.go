package grad

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// Roles: the compiler writes on each node it adds what the node computes,
// in the node's doc_string, which ONNX Runtime ignores, so that a profile
// of the training graph can be summed per role (onnx/grad/roleprofile):
// node names alone tell only the builder ("bwd/", "loss/"), not whether a
// backward node computes a data, weight or bias gradient.
const (
	RoleLoss = "loss"
	// RoleDataGrad is the gradient of an activation (a non-parameter input).
	RoleDataGrad = "data gradient"
	// RoleWeightGrad is the gradient of a weight (a parameter input other
	// than a bias), and the sums of a parameter's gradient contributions.
	RoleWeightGrad = "weight gradient"
	// RoleBiasGrad is the gradient of a bias: a Conv's, Gemm's or
	// normalisation's input 2, or a parameter added to an activation.
	RoleBiasGrad = "bias gradient"
	// RoleConvGrad is a ConvGrad node: data and weight gradient together.
	RoleConvGrad = "conv grad"
)

// roleDocPrefix starts the doc_string of an annotated node.
const roleDocPrefix = "segtune:"

// NodeRole is what a training graph's node computes, as the compiler
// annotated it.
type NodeRole struct {
	// Role is one of the Role constants, several of them joined by "+" for
	// a node shared by the gradients of several inputs, or "" for a node of
	// the forward pass.
	Role string
	// Of is the forward node (or, for a parameter's gradient sum, the
	// parameter) the node serves.
	Of string
	// Op is the forward node's operator type.
	Op string
	// ConvClass is the class of the convolution the node computes or
	// differentiates (ClassOfConv), 0 for other nodes.
	ConvClass ConvClasses
}

// ReadNodeRole returns the role the compiler wrote on n (false when it
// wrote none).
func ReadNodeRole(n *onnx.NodeProto) (NodeRole, bool) {
	rest, ok := strings.CutPrefix(n.GetDocString(), roleDocPrefix)
	if !ok {
		return NodeRole{}, false
	}
	var r NodeRole
	for _, kv := range strings.Split(rest, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "role":
			r.Role = v
		case "of":
			r.Of = v
		case "op":
			r.Op = v
		case "class":
			r.ConvClass, _ = ParseConvClasses(v)
		}
	}
	return r, true
}

// writeRole annotates n; fields are written in a fixed order, and names
// holding the separators are kept as they are (Of is informative only).
func writeRole(n *onnx.NodeProto, r NodeRole) {
	var parts []string
	if r.Role != "" {
		parts = append(parts, "role="+r.Role)
	}
	if r.Of != "" {
		parts = append(parts, "of="+strings.NewReplacer(";", ",", "=", ":").Replace(r.Of))
	}
	if r.Op != "" {
		parts = append(parts, "op="+r.Op)
	}
	if r.ConvClass != 0 {
		parts = append(parts, "class="+r.ConvClass.String())
	}
	n.DocString = proto.String(roleDocPrefix + strings.Join(parts, ";"))
}

// convClassOf is the class of forward Conv, ConvTranspose or ConvGrad
// node n (0 for other operators or an unknown weight shape).
func (c *compiler) convClassOf(n *onnx.NodeProto) ConvClasses {
	switch n.GetOpType() {
	case "Conv", "ConvTranspose", ConvGradOp:
	default:
		return 0
	}
	w := input(n, 1)
	if n.GetOpType() == ConvGradOp {
		w = input(n, 2)
	}
	i := c.info[w]
	if i == nil || len(i.shape) < 2 {
		return 0
	}
	return ClassOfConv(i.shape, attrInt(n, "group", 1))
}

// annotateForward writes the class of every forward convolution (role "").
func (c *compiler) annotateForward(fwd []*onnx.NodeProto) {
	for _, n := range fwd {
		if k := c.convClassOf(n); k != 0 {
			writeRole(n, NodeRole{Op: n.GetOpType(), ConvClass: k})
		}
	}
}

// inputRole is the role of the gradient of forward node n's input i: by
// position for the layers (input 0 the data, 1 the weight, 2 the bias,
// whatever is trainable), and elsewhere by whether the input is a
// parameter (a bias where it is added).
func (c *compiler) inputRole(n *onnx.NodeProto, i int) string {
	switch n.GetOpType() {
	case "Conv", "ConvTranspose", "Gemm", "BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization":
		return []string{RoleDataGrad, RoleWeightGrad, RoleBiasGrad}[min(i, 2)]
	}
	x := input(n, i)
	param := c.isTrain[x]
	if p := c.producer[x]; !param && p != nil && p.GetOpType() == "Cast" {
		param = c.isTrain[input(p, 0)] // autocast's half copy of a parameter
	}
	switch {
	case !param:
		return RoleDataGrad
	case n.GetOpType() == "Add" || n.GetOpType() == "Sub":
		return RoleBiasGrad
	}
	return RoleWeightGrad
}

// annotateRule writes the roles of the nodes the rule of forward node n
// emitted (nodes), which produced the input gradients dX: each node takes
// the roles of the gradients it feeds, so a Conv rule's ReduceSum is a
// bias gradient and its ConvTranspose a data gradient.
func (c *compiler) annotateRule(n *onnx.NodeProto, nodes []*onnx.NodeProto, dX []string) {
	feeds := map[string]map[string]bool{} // tensor → the roles it feeds
	for i, g := range dX {
		if g != "" {
			if feeds[g] == nil {
				feeds[g] = map[string]bool{}
			}
			feeds[g][c.inputRole(n, i)] = true
		}
	}
	class := c.convClassOf(n)
	for j := len(nodes) - 1; j >= 0; j-- {
		m := nodes[j]
		roles := map[string]bool{}
		for _, o := range m.Output {
			for r := range feeds[o] {
				roles[r] = true
			}
		}
		for _, x := range m.Input {
			if feeds[x] == nil {
				feeds[x] = map[string]bool{}
			}
			for r := range roles {
				feeds[x][r] = true
			}
		}
		role := joinRoles(roles)
		if m.GetDomain() == ConvGradDomain && m.GetOpType() == ConvGradOp {
			role = RoleConvGrad
		}
		writeRole(m, NodeRole{Role: role, Of: n.GetName(), Op: n.GetOpType(), ConvClass: class})
	}
}

// joinRoles names a set of roles in a fixed order; a node that feeds no
// gradient (pruned later) is a data gradient.
func joinRoles(roles map[string]bool) string {
	var out []string
	for _, r := range []string{RoleDataGrad, RoleWeightGrad, RoleBiasGrad} {
		if roles[r] {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return RoleDataGrad
	}
	return strings.Join(out, "+")
}

// annotateRest writes role on every node of nodes not yet annotated.
func annotateRest(nodes []*onnx.NodeProto, r NodeRole) {
	for _, n := range nodes {
		if n.DocString == nil {
			writeRole(n, r)
		}
	}
}
