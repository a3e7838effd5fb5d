package grad

import (
	"encoding/json"

	"github.com/segtune/segtune/onnx"
)

// Manifest describes the compiled graphs for tools and users.
type Manifest struct {
	Format string `json:"format"`
	Opset  int64  `json:"opset"`
	// BatchSize is the fixed batch dimension (dimension 0 of the first input).
	BatchSize int64 `json:"batch_size"`
	// Loss is the loss output's name, or "" when the loss kind is LossNone.
	Loss string `json:"loss,omitempty"`
	// LossKind is "cross_entropy" or "sigmoid_bce"; Logits is the tensor
	// the loss reads, ClassAxis its class axis (1 for NCHW, 3 for NHWC) and
	// Classes its size (channels; sigmoid_bce targets go up to Classes).
	LossKind string `json:"loss_kind,omitempty"`
	// Focal, Dice, Lovasz and NoPixel are those of Loss.
	Focal        float64     `json:"focal,omitempty"`
	Dice         float64     `json:"dice,omitempty"`
	Lovasz       float64     `json:"lovasz,omitempty"`
	NoPixel      bool        `json:"no_pixel,omitempty"`
	Logits       string      `json:"logits,omitempty"`
	ClassAxis    int         `json:"class_axis,omitempty"`
	Classes      int64       `json:"classes,omitempty"`
	Target       string      `json:"target,omitempty"`
	IgnoreIndex  *int64      `json:"ignore_index,omitempty"`
	LossScale    string      `json:"loss_scale,omitempty"`
	ModelOutputs []string    `json:"model_outputs"`
	ExtraOutputs []string    `json:"extra_outputs,omitempty"`
	GradInputs   []GradInput `json:"grad_inputs,omitempty"`
	Params       []ParamInfo `json:"params"`
	// Training and Eval list each graph's inputs and outputs in order.
	Training Signature `json:"training"`
	Eval     Signature `json:"eval"`
}

// ParamInfo describes one trainable parameter.
type ParamInfo struct {
	Name  string  `json:"name"`
	Grad  string  `json:"grad"`
	Shape []int64 `json:"shape"`
	// Unused is true when the parameter does not influence anything that is
	// differentiated; its gradient output is then all zeros.
	Unused bool `json:"unused,omitempty"`
}

// GradInput pairs an intermediate tensor with its upstream-gradient input.
type GradInput struct {
	Tensor string  `json:"tensor"`
	Input  string  `json:"input"`
	Shape  []int64 `json:"shape"`
}

// Signature lists a graph's inputs and outputs.
type Signature struct {
	Inputs  []TensorSpec `json:"inputs"`
	Outputs []TensorSpec `json:"outputs"`
}

// TensorSpec is a named, typed, static-shaped tensor.
type TensorSpec struct {
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Shape []int64 `json:"shape"`
}

// ManifestFormat identifies the manifest layout.
const ManifestFormat = "segtune-training-artifacts/1"

// JSON encodes the manifest with indentation.
func (m *Manifest) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (c *compiler) manifestBase() Manifest {
	m := Manifest{Format: ManifestFormat, Opset: c.opset, Params: []ParamInfo{}}
	if len(c.inputs) > 0 {
		if s := c.info[c.inputs[0]].shape; len(s) > 0 {
			m.BatchSize = s[0]
		}
	}
	if k := c.cfg.Loss.Kind; k == LossCrossEntropy || k == LossSigmoidBCE {
		m.Loss, m.Target = LossName, TargetName
		m.LossKind, m.Logits, m.ClassAxis = "cross_entropy", c.lossOn, c.classAxis
		if i := c.info[c.lossOn]; i != nil && c.classAxis < len(i.shape) {
			m.Classes = i.shape[c.classAxis]
		}
		if k == LossSigmoidBCE {
			m.LossKind = "sigmoid_bce"
		}
		l := c.cfg.Loss
		m.Focal, m.Dice, m.Lovasz, m.NoPixel = l.Focal, l.Dice, l.Lovasz, l.NoPixel
		if !c.cfg.Loss.NoIgnore {
			ign := c.ignoreIndex()
			m.IgnoreIndex = &ign
		}
		if c.cfg.Loss.Scale {
			m.LossScale = LossScaleName
		}
	}
	for _, o := range c.g.Output {
		m.ModelOutputs = append(m.ModelOutputs, o.GetName())
	}
	m.ExtraOutputs = append(m.ExtraOutputs, c.cfg.ExtraOutputs...)
	for _, t := range c.cfg.GradInputs {
		m.GradInputs = append(m.GradInputs, GradInput{Tensor: t, Input: GradInPrefix + t, Shape: c.info[t].shape})
	}
	return m
}

func (m *Manifest) fill(train, eval *onnx.GraphProto) {
	m.Training = signature(train)
	m.Eval = signature(eval)
}

func signature(g *onnx.GraphProto) Signature {
	spec := func(vs []*onnx.ValueInfoProto) []TensorSpec {
		out := make([]TensorSpec, 0, len(vs))
		for _, v := range vs {
			s, _ := onnx.TensorShape(v)
			if s == nil {
				s = []int64{} // JSON [], not null
			}
			out = append(out, TensorSpec{Name: v.GetName(), Type: TypeName(v.GetType().GetTensorType().GetElemType()), Shape: s})
		}
		return out
	}
	return Signature{Inputs: spec(g.Input), Outputs: spec(g.Output)}
}

// TypeName gives the short name of an ONNX element type ("float32", ...).
func TypeName(dt int32) string {
	switch onnx.DataType(dt) {
	case onnx.Float32:
		return "float32"
	case onnx.Float64:
		return "float64"
	case onnx.Int64:
		return "int64"
	case onnx.Int32:
		return "int32"
	case onnx.Bool:
		return "bool"
	}
	return onnx.DataType(dt).String()
}
