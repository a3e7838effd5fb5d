package network

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
)

// TestTrainableTransformerParameters: "all" trains every PyTorch parameter
// of the transformer corpus — the Linear biases, the opset-13 LayerNorm's
// scale and bias, ConvNeXt's layer scale and Swin's relative-position
// table included — and a name pattern selects such a tensor, while a
// Linear's bias counts with its MatMul (one layer, not two).
func TestTrainableTransformerParameters(t *testing.T) {
	dir, exports := testassets.TransformerCorpus(t)
	for _, e := range exports {
		t.Run(strings.TrimSuffix(e.File, ".onnx"), func(t *testing.T) {
			m, err := onnx.Load(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			all, err := Trainable(m, "all")
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for name := range e.Params {
				want = append(want, name)
			}
			got := slices.Clone(all)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("all selects %d tensors, the PyTorch module has %d parameters; missing %v, extra %v",
					len(got), len(want), minus(want, got), minus(got, want))
			}
			pattern := map[string]string{
				"segformer": "*attn.q.bias", "convnext_upernet": "*gamma", "swin": "*bias_table", "swin_shifted": "*bias_table", "unet_gn": "onnx::Add_*",
			}[e.Family]
			if e.NoFold && e.Family == "unet_gn" {
				pattern = "*.1.weight" // GroupNorm's scale, stored as itself (behind a Reshape) without folding
			}
			if e.Opset == 13 && e.Family != "unet_gn" {
				pattern += ",*.norm*.weight"
			}
			if sel, err := Trainable(m, pattern); err != nil || len(sel) == 0 {
				t.Errorf("trainable %q: %v, %v", pattern, sel, err)
			}
			layers, err := Layers(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				if l.Node.GetOpType() == "Add" {
					t.Errorf("Add node %s is a layer of its own (%v); a bias belongs to the layer it follows", l.Node.GetName(), l.Params)
				}
			}
		})
	}
}

// TestTrainableDeepLabUnchanged: a DeepLabV3+ keeps the trainable set of
// the operator table alone (its Convs' and BatchNorms' weights and biases):
// the affine rule adds nothing to a network without Linear layers.
func TestTrainableDeepLabUnchanged(t *testing.T) {
	for _, name := range []string{"deeplabv3plus_mobilenetv2.onnx", "deeplabv3plus_mobilenetv3.onnx", "deeplabv3plus_resnet18.onnx"} {
		t.Run(name, func(t *testing.T) {
			m, err := onnx.Load(testassets.Generated(t, name))
			if err != nil {
				t.Fatal(err)
			}
			var table []string
			for _, n := range m.Graph().GetNode() {
				for _, i := range onnx.ParameterInputs(n.GetOpType()) {
					if i < len(n.Input) && m.Initializer(n.Input[i]) != nil {
						table = append(table, n.Input[i])
					}
				}
			}
			all, err := Trainable(m, "all")
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(all)
			slices.Sort(got)
			slices.Sort(table)
			if len(table) == 0 || !slices.Equal(got, table) {
				t.Errorf("all selects %d tensors, the operator table %d; extra %v, missing %v",
					len(got), len(table), minus(got, table), minus(table, got))
			}
		})
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// A quantized model asked to train is told why it cannot (its weights
// are integers) and what to do, not that no layer has float parameters.
func TestTrainableNamesAQuantizedModel(t *testing.T) {
	var nodes []*onnx.NodeProto
	var inits []*onnx.TensorProto
	b := &onnx.Builder{Nodes: &nodes, Inits: &inits}
	w := b.Initializer(&onnx.TensorProto{Name: proto.String("w"), Dims: []int64{4, 3, 3, 3}, DataType: proto.Int32(int32(onnx.Int8)), RawData: make([]byte, 4*3*3*3)})
	b.Emit("DynamicQuantizeLinear", "q", []string{"x"}, []string{"xq", "xs", "xz"})
	b.Emit("ConvInteger", "c", []string{"xq", w, "xz"}, []string{"y"})
	x := &onnx.ValueInfoProto{Name: proto.String("x")}
	y := &onnx.ValueInfoProto{Name: proto.String("y")}
	m := onnx.NewModel(b.Graph("q", []*onnx.ValueInfoProto{x}, []*onnx.ValueInfoProto{y}), 13)
	_, err := Trainable(m, "all")
	var qe *QuantizedError
	if !errors.As(err, &qe) || !strings.Contains(err.Error(), "ConvInteger ×1, DynamicQuantizeLinear ×1") || !strings.Contains(err.Error(), "an int8 export quantizes") {
		t.Fatalf("Trainable: %v, want a QuantizedError naming the operators", err)
	}
}

// TestTrainableSameWithoutConstantFolding: one network exported with and
// without constant folding (each Linear then MatMul(x, Transpose(W)) +
// Add(b), every initializer also a graph input) has the same trainable
// count in info's summary and the same trainable tensors for finetune's
// "all", and info leaves no float initializer of it frozen.
func TestTrainableSameWithoutConstantFolding(t *testing.T) {
	dir, exports := testassets.TransformerCorpus(t)
	found := 0
	for _, e := range exports {
		if !e.NoFold {
			continue
		}
		found++
		t.Run(strings.TrimSuffix(e.File, ".onnx"), func(t *testing.T) {
			folded, err := onnx.Load(filepath.Join(dir, strings.Replace(e.File, "_nofold", "", 1)))
			if err != nil {
				t.Fatal(err)
			}
			nofold, err := onnx.Load(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			a, b := folded.Summary(), nofold.Summary()
			if a.Trainable != b.Trainable || a.TrainableTensors != b.TrainableTensors || b.TrainableTensors != len(e.Params) {
				t.Errorf("trainable: %d in %d tensors folded, %d in %d without folding; the module has %d tensors",
					a.Trainable, a.TrainableTensors, b.Trainable, b.TrainableTensors, len(e.Params))
			}
			if len(b.Frozen) != 0 {
				t.Errorf("info leaves float initializers frozen: %v", b.Frozen)
			}
			all, err := Trainable(nofold, "all")
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(e.Params) {
				t.Errorf(`"all" trains %d tensors, the module has %d`, len(all), len(e.Params))
			}
		})
	}
	if found == 0 {
		testassets.SkipOrFail(t, "%s has no export without constant folding: rerun make transformer-models", dir)
	}
}
