package onnx

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// quantizedOps are the operators of quantized models: integer
// convolutions and products, and the QDQ pairs around integer weights.
var quantizedOps = map[string]bool{
	"ConvInteger": true, "MatMulInteger": true, "QLinearConv": true, "QLinearMatMul": true,
	"QuantizeLinear": true, "DequantizeLinear": true, "DynamicQuantizeLinear": true,
}

// Quantization describes how a model is quantized: each quantized
// operator type of its main graph and how many nodes have it; empty for a
// float model.
type Quantization map[string]int

// Quantized counts m's quantized operators (ConvInteger, QLinearConv,
// QuantizeLinear/DequantizeLinear …).
func Quantized(m *Model) Quantization {
	q := Quantization{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if d := n.GetDomain(); (d == "" || d == "ai.onnx") && quantizedOps[n.GetOpType()] {
			q[n.GetOpType()]++
		}
	}
	return q
}

// String lists the operators, most frequent first: "ConvInteger ×52,
// DynamicQuantizeLinear ×52".
func (q Quantization) String() string {
	ops := slices.SortedFunc(maps.Keys(q), func(a, b string) int {
		if q[a] != q[b] {
			return q[b] - q[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s ×%d", op, q[op])
	}
	return strings.Join(parts, ", ")
}
