package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// transformerFamilies is what `segtune info` calls each family of the
// transformer corpus.
var transformerFamilies = map[string]string{
	"segformer":        "transformer",
	"convnext_upernet": "CNN with LayerNorm, ConvNeXt-style",
	"swin":             "transformer",
	"swin_shifted":     "transformer",
	"unet_gn":          "CNN with GroupNorm or InstanceNorm",
}

// TestTransformerModels takes every model of the transformer corpus
// (SegFormer, ConvNeXt-UperNet, Swin blocks with and without shifted
// windows, GroupNorm U-Net at opset 13 and 17) through the commands a user would run: info names its family and
// no operator fine-tuning would refuse; artifacts compiles the dynamic and
// the fixed-size export; a 20-step finetune of the dynamic export lowers
// the training loss; and export of its best checkpoint keeps the base
// graph's inputs, outputs, contract and head, and computes what the
// training compiler's evaluation graph does with those weights.
// (TestTransformerModelsAgainstPyTorch in onnx/grad checks the gradients.)
func TestTransformerModels(t *testing.T) {
	runtimetest.Require(t)
	dir, exports := testassets.TransformerCorpus(t)
	data := t.TempDir()
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "8", "--val", "4", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	for _, e := range exports {
		if !e.Dynamic {
			continue // the fixed export is compiled with its dynamic twin below
		}
		fixed := strings.Replace(e.File, "_dynamic", "_fixed", 1)
		t.Run(strings.TrimSuffix(e.File, "_dynamic.onnx"), func(t *testing.T) {
			model := filepath.Join(dir, e.File)
			work := t.TempDir()

			out, err := runCLI(t, "info", model, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var info struct {
				Family      string   `json:"family"`
				Unsupported []string `json:"unsupported_ops"`
			}
			if err := json.Unmarshal([]byte(out), &info); err != nil {
				t.Fatal(err)
			}
			if want := transformerFamilies[e.Family]; info.Family != want || info.Unsupported != nil {
				t.Errorf("info: family %q, unsupported %q; want %q and none", info.Family, info.Unsupported, want)
			}

			for _, m := range []struct{ file, batch string }{{e.File, "1"}, {fixed, "2"}} {
				art := filepath.Join(work, "artifacts-"+m.file)
				if _, err := runCLI(t, "artifacts", "--model", filepath.Join(dir, m.file), "--out", art,
					"--size", "64x64", "--batch", m.batch); err != nil {
					t.Fatalf("artifacts %s: %v", m.file, err)
				}
			}

			run := filepath.Join(work, "run")
			if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", run,
				"--steps", "20", "--batch", "2", "--crop", "64x64", "--threads", "2",
				// No random rescaling or flips: the epochs' losses then
				// measure the training, not the draw of the crops.
				"--scale-min", "1", "--scale-max", "1", "--no-flip"); err != nil {
				t.Fatal(err)
			}
			recs, err := history.Read(filepath.Join(run, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var epochs []float64
			for _, r := range recs {
				if r.Kind == history.KindEpoch {
					epochs = append(epochs, r.Loss)
				}
			}
			if len(epochs) < 2 || epochs[len(epochs)-1] >= epochs[0] {
				t.Errorf("20 steps did not lower the training loss: epoch losses %v", epochs)
			}

			exported := filepath.Join(work, "exported.onnx")
			ckpt := filepath.Join(run, "best.ckpt")
			if _, err := runCLI(t, "export", "--checkpoint", ckpt, "--out", exported); err != nil {
				t.Fatal(err)
			}
			checkExportKeepsContract(t, model, exported, ckpt)
			checkSameHead(t, model, exported)
			checkAffineTrained(t, model, exported)
		})
	}
}

// checkAffineTrained fails unless fine-tuning ("all") changed, and export
// wrote back, every parameter outside the operator table: the Linear
// biases, decomposed normalisations' scales and biases, layer scales and
// relative-position tables.
func checkAffineTrained(t *testing.T, basePath, exportedPath string) {
	t.Helper()
	base, err := onnx.Load(basePath)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := onnx.Load(exportedPath)
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]bool{}
	for _, n := range base.Graph().GetNode() {
		for _, i := range onnx.ParameterInputs(n.GetOpType()) {
			if i < len(n.Input) {
				table[n.Input[i]] = true
			}
		}
	}
	checked := 0
	for name := range onnx.ParameterNames(base.Graph()) {
		if table[name] {
			continue
		}
		checked++
		if exp.Initializer(name) == nil {
			t.Errorf("%s: the export has no such initializer", name)
			continue
		}
		b, errB := onnx.Float32s(base.Initializer(name))
		e, errE := onnx.Float32s(exp.Initializer(name))
		if errB != nil || errE != nil {
			t.Errorf("%s: base %v, exported %v", name, errB, errE)
			continue
		}
		if slices.Equal(b, e) {
			t.Errorf("%s: the exported values are the base model's; fine-tuning did not train it or export did not write it", name)
		}
	}
	if checked == 0 {
		t.Error("the model has no parameter outside the operator table: the check is empty")
	}
}

// checkSameHead fails unless the classifier of each output of the
// exported model (the last node with a parameter before it) is the base
// model's: the same operator, inputs of the same names, parameters of the
// same shapes — the head that fine-tuning trained, not a new one.
func checkSameHead(t *testing.T, basePath, exportedPath string) {
	t.Helper()
	base, err := onnx.Load(basePath)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := onnx.Load(exportedPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range base.Proto.Graph.Output {
		b, bdims := classifierOf(base, o.GetName())
		e, edims := classifierOf(exp, o.GetName())
		if b == nil || e == nil {
			t.Fatalf("output %s: no classifier found in the base (%v) or the export (%v)", o.GetName(), b != nil, e != nil)
		}
		if b.GetOpType() != e.GetOpType() || !slices.Equal(b.Input, e.Input) || fmt.Sprint(bdims) != fmt.Sprint(edims) {
			t.Errorf("output %s: base classifier %s%q %v, exported %s%q %v",
				o.GetName(), b.GetOpType(), b.Input, bdims, e.GetOpType(), e.Input, edims)
		}
	}
}

// classifierOf walks back from output through the first computed input of
// each node to the first node that reads a float initializer, and returns
// it with the dims of those initializers.
func classifierOf(m *onnx.Model, output string) (*onnx.NodeProto, [][]int64) {
	inits := map[string]*onnx.TensorProto{}
	for _, x := range m.Proto.Graph.Initializer {
		if x.GetDataType() == int32(onnx.Float32) {
			inits[x.GetName()] = x
		}
	}
	producers := onnx.Producers(m.Proto.Graph)
	for n := producers[output]; n != nil; {
		var dims [][]int64
		next := ""
		for _, in := range n.Input {
			if x := inits[in]; x != nil {
				dims = append(dims, x.GetDims())
			} else if next == "" && in != "" {
				next = in
			}
		}
		if dims != nil {
			return n, dims
		}
		n = producers[next]
	}
	return nil, nil
}

// TestInfoNamesRefusedOperators: info names the operator fine-tuning
// would refuse (a Sin after the Conv) before any work, and artifacts then
// stops at that node.
func TestInfoNamesRefusedOperators(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	b := &onnx.Builder{}
	w := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, []float32{-1, 1, 0, 1, -1, 0}))
	b.Emit("Conv", "conv", []string{"input", w}, []string{"c"})
	b.Emit("Sin", "wave", []string{"c"}, []string{"logits"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("sin",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17)
	model := filepath.Join(dir, "sin.onnx")
	if err := m.Save(model); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "info", model)
	if err != nil {
		t.Fatal(err)
	}
	if want := "fine-tuning  refused: no gradient rule for Sin"; !strings.Contains(out, want) {
		t.Errorf("info does not say %q:\n%s", want, out)
	}
	_, err = runCLI(t, "artifacts", "--model", model, "--out", filepath.Join(dir, "art"), "--size", "8x8")
	if err == nil || !strings.Contains(err.Error(), `node "wave" (Sin): the operator has no gradient rule`) {
		t.Errorf("artifacts: %v, want the Sin node refused", err)
	}
}
