package grad

import (
	"github.com/segtune/segtune/onnx/onnxpb"
)

// attr returns the node's attribute called name, or nil.
func attr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

func attrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	if a := attr(n, name); a != nil {
		return a.GetI()
	}
	return def
}

func attrFloat(n *onnxpb.NodeProto, name string, def float32) float32 {
	if a := attr(n, name); a != nil {
		return a.GetF()
	}
	return def
}

func attrString(n *onnxpb.NodeProto, name, def string) string {
	if a := attr(n, name); a != nil {
		return string(a.GetS())
	}
	return def
}

// attrInts returns a copy of an INTS attribute, or nil when absent.
func attrInts(n *onnxpb.NodeProto, name string) []int64 {
	if a := attr(n, name); a != nil {
		return append([]int64{}, a.GetInts()...)
	}
	return nil
}

func attrFloats(n *onnxpb.NodeProto, name string) []float32 {
	if a := attr(n, name); a != nil {
		return append([]float32{}, a.GetFloats()...)
	}
	return nil
}

// setAttr replaces or adds an attribute.
func setAttr(n *onnxpb.NodeProto, a *onnxpb.AttributeProto) {
	for i, x := range n.Attribute {
		if x.GetName() == a.GetName() {
			n.Attribute[i] = a
			return
		}
	}
	n.Attribute = append(n.Attribute, a)
}

// delAttr removes an attribute if present.
func delAttr(n *onnxpb.NodeProto, name string) {
	out := n.Attribute[:0]
	for _, a := range n.Attribute {
		if a.GetName() != name {
			out = append(out, a)
		}
	}
	n.Attribute = out
}

// input returns the i-th input name of n, or "" when absent (optional inputs).
func input(n *onnxpb.NodeProto, i int) string {
	if i < len(n.GetInput()) {
		return n.GetInput()[i]
	}
	return ""
}
