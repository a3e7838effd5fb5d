// Package contract reads what a segmentation model promises at its edges —
// the input's layout and size, the output's layout, its final activation
// and its class count — and turns the model's raw output into per-class
// scores that one arg-max maps to labels.
//
// Exporters disagree on all of these: PyTorch emits NCHW logits,
// tf2onnx NHWC tensors behind Transposes, OpenVINO conversions a final
// Softmax, segmentation_models_pytorch a Sigmoid over foreground channels
// with no background. segtune reads the contract once, before any image is
// processed, and every command (segment, eval, finetune, artifacts, export)
// honours the same reading.
package contract

import (
	"fmt"
	"slices"
	"strings"

	"github.com/segtune/segtune/onnx"
)

// Layout is a 4-D tensor layout.
type Layout string

// The two image layouts.
const (
	NCHW Layout = "NCHW"
	NHWC Layout = "NHWC"
)

// Shape is the shape of a batch of n h×w RGB images in layout l.
func (l Layout) Shape(n, h, w int) []int64 {
	if l == NHWC {
		return []int64{int64(n), int64(h), int64(w), 3}
	}
	return []int64{int64(n), 3, int64(h), int64(w)}
}

// Kind is what the output's values are.
type Kind string

// Output kinds.
const (
	// Logits are unnormalised class scores: argmax gives the class.
	Logits Kind = "logits"
	// Softmax outputs are class probabilities from a final Softmax node.
	Softmax Kind = "softmax"
	// LogSoftmax outputs are log-probabilities from a final LogSoftmax node.
	LogSoftmax Kind = "log-softmax"
	// Sigmoid outputs are independent per-channel probabilities of
	// foreground classes, with no background channel (multi-label heads).
	Sigmoid Kind = "sigmoid"
	// Labels are class indices computed inside the graph (ArgMax).
	Labels Kind = "labels"
)

// DefaultThreshold is the sigmoid probability a channel must exceed to
// claim a pixel.
const DefaultThreshold = 0.5

// Contract is a model's reading.
type Contract struct {
	// Input is the image input; Batch, Height and Width its fixed sizes
	// (0 where dynamic).
	Input       string `json:"input"`
	InputLayout Layout `json:"input_layout"`
	// InputLayoutFrom says how the layout was found: "shape", "graph",
	// "flag" or "default".
	InputLayoutFrom string `json:"input_layout_from"`
	Batch           int64  `json:"batch"`
	Height          int64  `json:"height"`
	Width           int64  `json:"width"`

	// Output is the segmentation output (the first graph output).
	Output           string `json:"output"`
	OutputLayout     Layout `json:"output_layout"`
	OutputLayoutFrom string `json:"output_layout_from"`
	Kind             Kind   `json:"output_kind"`
	// Activation is the final Softmax/LogSoftmax/Sigmoid node, "" for
	// logits and labels.
	Activation string `json:"activation,omitempty"`
	// Scores is the tensor a loss is computed on: the input of the final
	// activation, or the output itself for logits. ScoresClassAxis is its
	// class axis (1 for NCHW, 3 for NHWC).
	Scores          string `json:"scores"`
	ScoresClassAxis int    `json:"scores_class_axis"`
	// Channels is the output's channel count (0 until known); Classes the
	// number of label classes it predicts (Channels+1 for sigmoid heads,
	// whose class 0 is "no channel above the threshold", and for binary
	// heads).
	Channels int `json:"channels"`
	Classes  int `json:"classes"`
	// Binary is set for logits with a single channel (segmentation_models
	// exports with classes=1 and no activation): an arg-max over one
	// channel would be class 0 everywhere, so the channel is read as the
	// foreground's logit, class 1 where its sigmoid exceeds Threshold
	// (the logit exceeds 0 at 0.5).
	Binary bool `json:"binary,omitempty"`
	// Threshold is the sigmoid probability a channel must exceed.
	Threshold float64 `json:"threshold,omitempty"`
	// ResizedAfterActivation is set when a Resize lies between the final
	// activation and the output: the scores are then at another size than
	// the output, and training on them is refused.
	ResizedAfterActivation bool `json:"resized_after_activation,omitempty"`

	// scoresToOut maps each axis of Scores to the output's axis.
	scoresToOut []int
}

// Overrides are what the user says where the graph cannot tell (or is
// read wrongly): flags and sidecars.
type Overrides struct {
	// InputLayout applies to the input; it also sets the output layout
	// when the graph gives no evidence of its own (--nhwc).
	InputLayout Layout
	// OutputLayout overrides the output layout outright (--output-layout).
	OutputLayout Layout
	// Threshold for sigmoid heads; 0 means DefaultThreshold.
	Threshold float64
}

// Read reads m's contract. It fails with an *UnsupportedError on models
// segtune cannot feed or read: other than one float 4-D image input, or no
// output of scores or labels; with a *LayoutError where an axis is misread.
func Read(m *onnx.Model, o Overrides) (*Contract, error) {
	g := m.Graph()
	ins := onnx.DataInputs(g)
	if len(ins) != 1 {
		return nil, unsupported("segmentation models take one image input; this one takes %d", len(ins))
	}
	in := ins[0]
	c := &Contract{Input: in.GetName()}
	dims, known := shapeOf(in)
	if !known || len(dims) != 4 {
		return nil, unsupported("input %q has shape %s; want a 4-D image batch", in.GetName(), dimString(in))
	}
	if et := in.GetType().GetTensorType().GetElemType(); et != int32(onnx.Float32) {
		return nil, unsupported("input %q is %s; segtune feeds float32 images", in.GetName(), onnx.DataType(et))
	}
	if len(g.GetOutput()) == 0 {
		return nil, unsupported("the model has no outputs")
	}
	if err := c.readInput(g, dims, o); err != nil {
		return nil, err
	}
	if err := c.readOutput(m, o); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Contract) readInput(g *onnx.GraphProto, dims []int64, o Overrides) error {
	shape := layoutFromChannels(dims, 3)
	graph := inputLayoutFromGraph(g, c.Input)
	switch {
	case o.InputLayout != "":
		c.InputLayout, c.InputLayoutFrom = o.InputLayout, "flag"
	case shape != "":
		c.InputLayout, c.InputLayoutFrom = shape, "shape"
	case graph != "":
		c.InputLayout, c.InputLayoutFrom = graph, "graph"
	default:
		c.InputLayout, c.InputLayoutFrom = NCHW, "default"
	}
	ch, h, w := dims[1], dims[2], dims[3]
	if c.InputLayout == NHWC {
		h, w, ch = dims[1], dims[2], dims[3]
	}
	if ch > 0 && ch != 3 {
		return &LayoutError{Input: true, Try: other(c.InputLayout),
			Msg: fmt.Sprintf("input %q %v has %d channels in the %s layout; segtune feeds RGB (3)", c.Input, dims, ch, c.InputLayout)}
	}
	c.Batch, c.Height, c.Width = max(dims[0], 0), max(h, 0), max(w, 0)
	return nil
}

// layoutFromChannels returns the layout whose channel axis alone holds
// want, or "" when the shape does not tell.
func layoutFromChannels(d []int64, want int64) Layout {
	first, last := d[1] == want, d[3] == want
	switch {
	case first && !last && d[3] != 0:
		return NCHW
	case last && !first && d[1] != 0:
		return NHWC
	}
	return ""
}

// inputLayoutFromGraph looks for the Transpose that tf2onnx and OpenVINO
// conversions put between an NHWC input and the first (NCHW) convolution,
// through a few elementwise normalisation nodes.
func inputLayoutFromGraph(g *onnx.GraphProto, input string) Layout {
	cons := onnx.Consumers(g)
	frontier := []string{input}
	for depth := 0; depth < 4 && len(frontier) > 0; depth++ {
		var next []string
		for _, t := range frontier {
			for _, n := range cons[t] {
				switch n.GetOpType() {
				case "Transpose":
					switch p := onnx.AttrInts(n, "perm"); {
					case equal(p, 0, 3, 1, 2):
						return NHWC
					case equal(p, 0, 2, 3, 1):
						return NCHW
					}
				case "Conv", "ConvTranspose", "MaxPool", "AveragePool", "BatchNormalization":
					return NCHW
				case "Cast", "Mul", "Add", "Sub", "Div", "Identity", "Clip":
					next = append(next, n.GetOutput()...)
				}
			}
		}
		frontier = next
	}
	return ""
}

// readOutput walks back from the first output through the nodes that do
// not change what the values mean (Identity, Transpose, Resize, a Cast to
// float32), finding
// the final activation and the transposes that set the output's layout.
func (c *Contract) readOutput(m *onnx.Model, o Overrides) error {
	g := m.Graph()
	out := g.GetOutput()[0]
	c.Output = out.GetName()
	c.Kind = Logits
	c.Threshold = o.Threshold
	if dt := out.GetType().GetTensorType().GetElemType(); dt == int32(onnx.Int64) || dt == int32(onnx.Int32) {
		c.Kind, c.OutputLayout, c.OutputLayoutFrom = Labels, NCHW, "labels"
		c.Scores = c.Output
		return nil
	}
	if dt := out.GetType().GetTensorType().GetElemType(); dt != int32(onnx.Float32) && dt != 0 {
		return unsupported("output %q is %s; segtune reads float32 scores or integer labels", c.Output, onnx.DataType(dt))
	}
	dims, known := shapeOf(out)
	if known && len(dims) != 4 {
		if len(dims) == 3 {
			return unsupported("output %q has shape %v: float [N,H,W] outputs are not class scores; segtune reads [N,C,H,W] or [N,H,W,C] scores or integer [N,H,W] labels", c.Output, dims)
		}
		return unsupported("output %q has shape %s; want [N,C,H,W] or [N,H,W,C] class scores", c.Output, dimString(out))
	}
	toOut, outAxis, from := c.walkToScores(m)
	// Without a Softmax axis, the tensor the walk stopped at comes from an
	// ONNX operator, which works in NCHW: transposes after it tell the
	// output's layout.
	if from == "" && hasTranspose(toOut) {
		outAxis, from = toOut[1], "graph"
	}
	if from == "" && known {
		if l := layoutFromShape(dims); l != "" {
			outAxis, from = axisOf(l), "shape"
		}
	}
	switch {
	case o.OutputLayout != "":
		outAxis, from = axisOf(o.OutputLayout), "flag"
	case from != "":
	case o.InputLayout != "":
		outAxis, from = axisOf(o.InputLayout), "input layout flag"
	default:
		outAxis, from = 1, "default"
	}
	if outAxis != 1 && outAxis != 3 {
		return &LayoutError{Msg: fmt.Sprintf("output %q: its class axis reads as axis %d; segtune reads NCHW or NHWC outputs", c.Output, outAxis)}
	}
	c.OutputLayout, c.OutputLayoutFrom = layoutOfAxis(outAxis), from
	// The scores tensor's class axis: the output's, mapped back through
	// the transposes between them.
	c.ScoresClassAxis = -1
	for a, oa := range c.scoresToOut {
		if oa == outAxis {
			c.ScoresClassAxis = a
		}
	}
	if known && dims[outAxis] > 0 {
		c.Channels = int(dims[outAxis])
	} else {
		c.Channels = channelsFromProducer(m, c.Scores)
	}
	c.setClasses()
	return c.checkNormalisedChannels(c.Channels)
}

// walkToScores walks back from the output through the nodes that keep
// the values' meaning, recording the final activation (Kind, Activation,
// Scores). It returns the map from the axes of the tensor it stopped at to
// the output's, and the output's class axis if a Softmax gave it (from
// "graph"; -1 and "" otherwise).
func (c *Contract) walkToScores(m *onnx.Model) (toOut []int, outAxis int, from string) {
	prod := onnx.Producers(m.Graph())
	// toOut maps an axis of the tensor at the walk's position to the
	// output's axis: after walking back through Transpose(p), axis p[j]
	// of its input is axis j of its output.
	toOut = []int{0, 1, 2, 3}
	t := c.Output
	outAxis = -1 // the output's class axis, once evidence gives it
	resized := false
	walk := map[string]bool{}
	for !walk[t] {
		walk[t] = true
		n := prod[t]
		if n == nil || len(n.GetInput()) == 0 {
			break
		}
		op := n.GetOpType()
		if op == "Transpose" {
			p := onnx.AttrInts(n, "perm")
			if !isPerm4(p) {
				break
			}
			next := make([]int, 4)
			for j, pj := range p {
				next[pj] = toOut[j]
			}
			toOut = next
			t = n.GetInput()[0]
			continue
		}
		if op == "Identity" || op == "Resize" || op == "Upsample" {
			resized = resized || op != "Identity"
			t = n.GetInput()[0]
			continue
		}
		if op == "Cast" && onnx.AttrInt(n, "to", 0) == int64(onnx.Float32) {
			// A float16 model's scores cast back to float32 at the edge
			// mean what they meant.
			t = n.GetInput()[0]
			continue
		}
		if c.Activation == "" && (op == "Softmax" || op == "LogSoftmax" || op == "Sigmoid") {
			c.Activation = n.GetName()
			if c.Activation == "" {
				c.Activation = op + " → " + t
			}
			c.Kind = map[string]Kind{"Softmax": Softmax, "LogSoftmax": LogSoftmax, "Sigmoid": Sigmoid}[op]
			if op != "Sigmoid" {
				a := int(onnx.AttrInt(n, "axis", defaultSoftmaxAxis(m)))
				if a < 0 {
					a += 4
				}
				if a >= 0 && a < 4 {
					outAxis, from = toOut[a], "graph"
				}
			}
			c.ResizedAfterActivation = resized
			c.Scores = n.GetInput()[0]
			c.scoresToOut = append([]int(nil), toOut...)
			t = n.GetInput()[0]
			continue
		}
		break
	}
	if c.Scores == "" {
		c.Scores = c.Output
		c.scoresToOut = []int{0, 1, 2, 3}
	}
	return toOut, outAxis, from
}

// isPerm4 reports whether p is a permutation of 0..3.
func isPerm4(p []int64) bool {
	if len(p) != 4 {
		return false
	}
	var seen [4]bool
	for _, v := range p {
		if v < 0 || v > 3 || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func hasTranspose(toOut []int) bool { return !equal(toOut, 0, 1, 2, 3) }

func (c *Contract) setClasses() {
	c.Binary = c.Kind == Logits && c.Channels == 1
	switch {
	case c.Kind == Sigmoid || c.Binary:
		if c.Channels > 0 {
			c.Classes = c.Channels + 1
		}
		if c.Threshold == 0 {
			c.Threshold = DefaultThreshold
		}
	default:
		c.Classes = c.Channels
	}
}

// Thresholded reports whether the scores are independent per-channel
// foreground logits (sigmoid heads, binary heads): trained with binary
// cross entropy, with class 0 where no channel reaches the threshold.
func (c *Contract) Thresholded() bool { return c.Kind == Sigmoid || c.Binary }

// BinaryNote is the line commands print for a binary head ("" for other
// heads): a one-channel model read as two classes should not surprise.
func (c *Contract) BinaryNote() string {
	if !c.Binary {
		return ""
	}
	return fmt.Sprintf("output %q has one logit channel: read as binary, class 1 where sigmoid(logit) > %.2g, else 0", c.Output, c.Threshold)
}

// SetChannels records a channel count learnt by running the model (for
// graphs whose declared shapes do not give it).
func (c *Contract) SetChannels(n int) {
	c.Channels = n
	c.setClasses()
}

// layoutFromShape reads the layout of declared output dims where the class
// axis is the only static non-batch one, or, all being static, the one
// that differs from two equal-looking spatial sizes.
func layoutFromShape(d []int64) Layout {
	switch {
	case d[1] > 0 && d[2] <= 0 && d[3] <= 0:
		return NCHW
	case d[3] > 0 && d[1] <= 0 && d[2] <= 0:
		return NHWC
	case d[1] > 0 && d[2] > 0 && d[3] > 0:
		// Spatial sizes are large, class counts small: the smaller end
		// axis is the class axis when the other is clearly spatial.
		if d[1] < d[3] && d[1] <= 256 && d[3] >= 2*d[1] && d[2] >= 2*d[1] {
			return NCHW
		}
		if d[3] < d[1] && d[3] <= 256 && d[1] >= 2*d[3] && d[2] >= 2*d[3] {
			return NHWC
		}
	}
	return ""
}

func axisOf(l Layout) int {
	if l == NHWC {
		return 3
	}
	return 1
}

func layoutOfAxis(a int) Layout {
	if a == 3 {
		return NHWC
	}
	return NCHW
}

// channelsFromProducer finds the class count from the convolution that
// makes the scores, through the few nodes that keep channels (Resize,
// activations, elementwise arithmetic, and the Casts and
// QuantizeLinear/DequantizeLinear pairs of float16 and int8 exports);
// Transposes are not followed.
func channelsFromProducer(m *onnx.Model, t string) int {
	prod := onnx.Producers(m.Graph())
	for i := 0; i < 12; i++ {
		n := prod[t]
		if n == nil || len(n.GetInput()) == 0 {
			return 0
		}
		switch n.GetOpType() {
		case "Conv", "ConvTranspose":
			if len(n.Input) > 1 {
				if w := weightOf(m, prod, n.Input[1]); w != nil && len(w.Dims) == 4 {
					if n.GetOpType() == "Conv" {
						return int(w.Dims[0])
					}
					return int(w.Dims[1] * onnx.AttrInt(n, "group", 1))
				}
			}
			return 0
		case "Resize", "Upsample", "Identity", "Relu", "Add", "Sub", "Mul", "Div",
			"Cast", "QuantizeLinear", "DequantizeLinear":
			t = n.GetInput()[0]
		default:
			return 0
		}
	}
	return 0
}

// weightOf is the initializer behind a convolution's weight input: the
// initializer itself, or the one a float16 export Casts or an int8 export
// dequantizes (DequantizeLinear keeps the shape).
func weightOf(m *onnx.Model, prod map[string]*onnx.NodeProto, name string) *onnx.TensorProto {
	for range 2 {
		if w := m.Initializer(name); w != nil {
			return w
		}
		n := prod[name]
		if n == nil || len(n.GetInput()) == 0 || (n.GetOpType() != "Cast" && n.GetOpType() != "DequantizeLinear") {
			return nil
		}
		name = n.GetInput()[0]
	}
	return nil
}

func defaultSoftmaxAxis(m *onnx.Model) int64 {
	if m.Opset("") >= 13 {
		return -1
	}
	return 1
}

func shapeOf(v *onnx.ValueInfoProto) ([]int64, bool) {
	tt := v.GetType().GetTensorType()
	if tt == nil || tt.GetShape() == nil {
		return nil, false
	}
	d := make([]int64, len(tt.GetShape().GetDim()))
	for i, x := range tt.GetShape().GetDim() {
		d[i] = x.GetDimValue() // 0 for a symbolic or unknown dim
	}
	return d, true
}

func dimString(v *onnx.ValueInfoProto) string {
	d, ok := shapeOf(v)
	if !ok {
		return "unknown"
	}
	parts := make([]string, len(d))
	for i, x := range d {
		if x > 0 {
			parts[i] = fmt.Sprint(x)
		} else {
			parts[i] = "?"
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func equal[T int | int64](p []T, want ...T) bool { return slices.Equal(p, want) }
