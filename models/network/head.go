package network

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
)

// ReplaceClassifier gives the model k label classes, for a new label set:
// the final classifier gets k output channels, or k−1 for a sigmoid head
// (whose class 0 is "no channel"). Its weight is drawn from N(0, 0.01²)
// with seed (so the same seed gives the same head) and its bias is zero.
// Downstream of it, the declared channel count of the first output (on
// its class axis) and constant Resize sizes that carry the old channel
// count are updated, and stale value_info is dropped; a final Softmax or
// Sigmoid stays.
func ReplaceClassifier(m *onnx.Model, k int, seed uint64) error {
	if k < 1 || k > 256 {
		return fmt.Errorf("classes: %d is outside 1..256", k)
	}
	outAxis := 1
	if ct, err := contract.Read(m, contract.Overrides{}); err == nil {
		if ct.Kind == contract.Sigmoid {
			if k < 2 {
				return fmt.Errorf("classes: a sigmoid head needs at least 2 classes (background and one channel), not %d", k)
			}
			k--
		}
		if ct.OutputLayout == contract.NHWC {
			outAxis = 3
		}
	}
	cls, err := Classifier(m)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e97a11))
	var old int64
	// Heads such as LR-ASPP's add two classifiers (low- and high-level
	// features): every one that reaches the output through unparameterised
	// nodes is replaced, the final one first.
	for i, l := range finalLayers(m, cls) {
		n := l.Node
		if n.GetOpType() != "Conv" {
			return fmt.Errorf("the final classifier is a %s node (%s); replacing it is supported for Conv classifiers", n.GetOpType(), n.GetName())
		}
		w := m.Initializer(n.Input[1])
		if w == nil || len(w.Dims) != 4 {
			return fmt.Errorf("classifier %s: weight %q is not a 4-D initializer", n.GetName(), n.Input[1])
		}
		if i == 0 {
			old = w.Dims[0]
		} else if w.Dims[0] != old {
			return fmt.Errorf("classifiers %s and %s feed the output with %d and %d channels", cls.Node.GetName(), n.GetName(), old, w.Dims[0])
		}
		if group := onnx.AttrInt(n, "group", 1); group != 1 {
			return fmt.Errorf("classifier %s is a grouped convolution (group %d)", n.GetName(), group)
		}
		per := w.Dims[1] * w.Dims[2] * w.Dims[3]
		data := make([]float32, int64(k)*per)
		for i := range data {
			data[i] = float32(0.01 * rng.NormFloat64())
		}
		w.Dims[0] = int64(k)
		if err := onnx.SetFloat32s(w, data); err != nil {
			return err
		}
		if len(n.Input) > 2 && n.Input[2] != "" {
			b := m.Initializer(n.Input[2])
			if b == nil {
				return fmt.Errorf("classifier %s: bias %q is not an initializer", n.GetName(), n.Input[2])
			}
			b.Dims = []int64{int64(k)}
			if err := onnx.SetFloat32s(b, make([]float32, k)); err != nil {
				return err
			}
		}
		patchDownstream(m, n, old, int64(k), outAxis)
	}
	return nil
}

// finalLayers returns cls and the other parameterised layers whose outputs
// reach the first output through unparameterised nodes only.
func finalLayers(m *onnx.Model, cls Layer) []Layer {
	layers, err := Layers(m)
	if err != nil {
		return []Layer{cls}
	}
	byNode := map[*onnx.NodeProto]Layer{}
	for _, l := range layers {
		byNode[l.Node] = l
	}
	out := []Layer{cls}
	walkUpstream(m.Graph(), m.Graph().Output[0].GetName(), func(n *onnx.NodeProto) bool {
		l, ok := byNode[n]
		if ok && n != cls.Node {
			out = append(out, l)
		}
		return !ok
	})
	return out
}

// patchDownstream updates what records the classifier's channel count after
// it: constant 4-D Resize sizes (NCHW, or NHWC behind a Transpose), the
// first output's declared class axis outAxis, and the value_info of
// downstream tensors (dropped: ONNX Runtime re-infers it).
func patchDownstream(m *onnx.Model, cls *onnx.NodeProto, old, k int64, outAxis int) {
	g := m.Graph()
	cons := onnx.Consumers(g)
	down := map[string]bool{}
	stack := append([]string(nil), cls.Output...)
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if down[t] {
			continue
		}
		down[t] = true
		for _, c := range cons[t] {
			if c.GetOpType() == "Resize" && len(c.Input) > 3 {
				if s := m.Initializer(c.Input[3]); s != nil {
					if v, err := onnx.Int64s(s); err == nil && len(v) == 4 && (v[1] == old || v[3] == old) {
						if v[1] == old {
							v[1] = k
						} else {
							v[3] = k
						}
						*s = *onnx.NewInt64Tensor(s.GetName(), s.Dims, v)
					}
				}
			}
			stack = append(stack, c.Output...)
		}
	}
	var keep []*onnx.ValueInfoProto
	for _, vi := range g.ValueInfo {
		if !down[vi.GetName()] {
			keep = append(keep, vi)
		}
	}
	g.ValueInfo = keep
	if out := g.Output[0]; down[out.GetName()] {
		if tt := out.GetType().GetTensorType(); tt != nil && len(tt.GetShape().GetDim()) > outAxis {
			d := tt.Shape.Dim[outAxis]
			if d.GetDimValue() == old {
				d.Value = &onnx.DimValue{DimValue: k}
			}
		}
	}
}

// TapFeatures adds a GlobalAveragePool of tensor to the graph and returns
// the pooled tensor's name ([N, C, 1, 1]): the representation a(x) the size
// regularizer's linear head reads. An empty tensor means the input of the
// final classifier, the features the paper's a_l stands for.
func TapFeatures(m *onnx.Model, tensor string) (pooled string, err error) {
	if tensor == "" {
		cls, err := Classifier(m)
		if err != nil {
			return "", err
		}
		tensor = cls.Node.Input[0]
	} else if onnx.Producers(m.Graph())[tensor] == nil {
		return "", fmt.Errorf("feature tensor %q is not produced by any node", tensor)
	}
	pooled = "segtune/size_features"
	name, op := "segtune/size_pool", "GlobalAveragePool"
	g := m.Graph()
	g.Node = append(g.Node, &onnx.NodeProto{Name: &name, OpType: &op, Input: []string{tensor}, Output: []string{pooled}})
	return pooled, nil
}

// Weight is a named parameter value.
type Weight struct {
	Name  string
	Shape []int64
	Data  []float32
}

// SetWeights writes trained values into the model's initializers, keeping
// each initializer's data type. Shapes must match.
func SetWeights(m *onnx.Model, ws []Weight) error {
	for _, w := range ws {
		t := m.Initializer(w.Name)
		if t == nil {
			return fmt.Errorf("the model has no initializer %q", w.Name)
		}
		if !slices.Equal(t.Dims, w.Shape) {
			return fmt.Errorf("initializer %q has shape %v, the weights %v", w.Name, t.Dims, w.Shape)
		}
		for _, v := range w.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("weights %q hold non-finite values", w.Name)
			}
		}
		if err := onnx.SetFloat32s(t, w.Data); err != nil {
			return fmt.Errorf("initializer %q: %w", w.Name, err)
		}
	}
	return nil
}
