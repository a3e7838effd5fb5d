package grad

import (
	"github.com/segtune/segtune/onnx"
)

// The attribute readers of the onnx package, under the short names the
// rules use.
var (
	attr       = onnx.Attr
	attrInt    = onnx.AttrInt
	attrFloat  = onnx.AttrFloat
	attrString = onnx.AttrString
	attrInts   = onnx.AttrInts
	attrFloats = onnx.AttrFloats
)

// setAttr replaces or adds an attribute.
func setAttr(n *onnx.NodeProto, a *onnx.AttributeProto) {
	for i, x := range n.Attribute {
		if x.GetName() == a.GetName() {
			n.Attribute[i] = a
			return
		}
	}
	n.Attribute = append(n.Attribute, a)
}

// delAttr removes an attribute if present.
func delAttr(n *onnx.NodeProto, name string) {
	out := n.Attribute[:0]
	for _, a := range n.Attribute {
		if a.GetName() != name {
			out = append(out, a)
		}
	}
	n.Attribute = out
}

// input returns the i-th input name of n, or "" when absent (optional inputs).
func input(n *onnx.NodeProto, i int) string {
	if i < len(n.GetInput()) {
		return n.GetInput()[i]
	}
	return ""
}
