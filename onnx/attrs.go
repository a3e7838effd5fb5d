package onnx

import "github.com/segtune/segtune/onnx/onnxpb"

// Attr returns the node's attribute called name, or nil.
func Attr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// AttrInt returns an INT attribute, or def when the node has none.
func AttrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	if a := Attr(n, name); a != nil {
		return a.GetI()
	}
	return def
}

// AttrFloat returns a FLOAT attribute, or def when the node has none.
func AttrFloat(n *onnxpb.NodeProto, name string, def float32) float32 {
	if a := Attr(n, name); a != nil {
		return a.GetF()
	}
	return def
}

// AttrString returns a STRING attribute, or def when the node has none.
func AttrString(n *onnxpb.NodeProto, name, def string) string {
	if a := Attr(n, name); a != nil {
		return string(a.GetS())
	}
	return def
}

// AttrInts returns a copy of an INTS attribute, or nil when absent.
func AttrInts(n *onnxpb.NodeProto, name string) []int64 {
	if a := Attr(n, name); a != nil {
		return append([]int64{}, a.GetInts()...)
	}
	return nil
}

// AttrFloats returns a copy of a FLOATS attribute, or nil when absent.
func AttrFloats(n *onnxpb.NodeProto, name string) []float32 {
	if a := Attr(n, name); a != nil {
		return append([]float32{}, a.GetFloats()...)
	}
	return nil
}
