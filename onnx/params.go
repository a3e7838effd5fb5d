package onnx

import "github.com/segtune/segtune/onnx/onnxpb"

// parameterInputs lists, per default-domain operator, the input positions
// that hold learned parameters. Every other input of every other operator
// (Resize scales and ROI, Reshape shapes, Pad values, Clip bounds, the
// constant operand of Mul/Add, BatchNormalization's running statistics...)
// is a constant of the architecture, never a parameter, even when it is a
// float initializer.
var parameterInputs = map[string][]int{
	"Conv":               {1, 2}, // weight, bias
	"ConvTranspose":      {1, 2}, // weight, bias
	"Gemm":               {1, 2}, // B, C
	"MatMul":             {1},    // the constant right operand (x·W)
	"BatchNormalization": {1, 2}, // scale, bias (not mean, var)
	"PRelu":              {1},    // slope
	// The normalisations' scale and bias (the opset-13 decomposition of
	// LayerNorm has them as the operand of a Mul and an Add instead).
	"LayerNormalization":    {1, 2},
	"InstanceNormalization": {1, 2},
	"GroupNormalization":    {1, 2},
}

// ParameterInputs returns the input positions of a default-domain operator
// that hold learned parameters (nil for operators without parameters). It
// is the one table of what "trainable" can mean: the fine-tuning presets
// and the gradient compiler's patterns select only initializers found at
// these positions.
func ParameterInputs(opType string) []int {
	return append([]int(nil), parameterInputs[opType]...)
}

// ParameterOps lists the operators that have parameter inputs, sorted.
func ParameterOps() []string { return sortedKeys(parameterInputs) }

// IsParameterInput reports whether input i of opType holds a parameter.
func IsParameterInput(opType string, i int) bool {
	for _, p := range parameterInputs[opType] {
		if p == i {
			return true
		}
	}
	return false
}

// ParameterNames returns the names of the float initializers of g that some
// default-domain node takes at a parameter input position.
func ParameterNames(g *onnxpb.GraphProto) map[string]bool {
	floats := map[string]bool{}
	for _, t := range g.GetInitializer() {
		switch onnxpb.TensorProto_DataType(t.GetDataType()) {
		case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_BFLOAT16:
			floats[t.GetName()] = true
		}
	}
	out := map[string]bool{}
	for _, n := range g.GetNode() {
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			continue
		}
		for _, i := range parameterInputs[n.GetOpType()] {
			if i < len(n.Input) && floats[n.Input[i]] {
				out[n.Input[i]] = true
			}
		}
	}
	return out
}
