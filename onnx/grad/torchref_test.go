package grad_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// torchTol bounds ‖g_ort − g_torch‖ / ‖g_torch‖ for every checked parameter:
// ONNX Runtime's float32 training graph against PyTorch autograd in float64
// on the same ONNX graph, input and targets. Both differentiate at the same
// point, so what is left is float32 rounding: about 1e-6 for most
// parameters, except that a pre-activation within rounding of a ReLU kink
// can take the other side in float32. One such unit (−4e-7 in ONNX
// Runtime, +3e-7 in float64, in ResNet-18's layer1) moves ResNet-18's
// first-conv gradient by 2e-4; the frozen-kink check (wholemodel_test.go),
// which has no such flips, holds the same gradients to ~1e-5.
const torchTol = 1e-3

// torchPython is the interpreter with Debian's python3-torch and python3-onnx.
// torchPython is the Python with torch and onnx: Debian's by default,
// $SEGTUNE_TORCH_PYTHON where another one holds them (a GPU machine's venv).
var torchPython = func() string {
	if p := os.Getenv("SEGTUNE_TORCH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}()

// requireTorch returns the path of scripts/torch_grads.py, or skips.
func requireTorch(t *testing.T) string {
	t.Helper()
	script := testassets.FindUp(filepath.Join("scripts", "torch_grads.py"))
	if script == "" {
		t.Fatal("scripts/torch_grads.py not found above the working directory")
	}
	out, err := exec.Command(torchPython, "-c", "import torch, onnx").CombinedOutput()
	if err != nil {
		testassets.SkipOrFail(t, "%s cannot import torch and onnx (install them with make python-deps): %v %s",
			torchPython, err, lastLine(out))
	}
	return script
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// roleParam is one parameter picked for the whole-model checks.
type roleParam struct{ role, name string }

func attrInt(n *onnx.NodeProto, name string, def int64) int64 {
	for _, a := range n.Attribute {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

func attrInts(n *onnx.NodeProto, name string) []int64 {
	for _, a := range n.Attribute {
		if a.GetName() == name {
			return a.GetInts()
		}
	}
	return nil
}

func maxOf(v []int64, def int64) int64 {
	m := def
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// pickParams selects, from a DeepLabV3+ graph's structure, the weights of:
// the first conv; the first depthwise conv (or, in a backbone without any,
// the first strided spatial conv after the stem); an ASPP conv (the most
// dilated conv reading the tensor the image-pooling GlobalAveragePool reads);
// the image-pooling conv (the conv right after that pool); the first spatial
// decoder conv (after the last channel Concat); the classifier (the last conv)
// and its bias.
func pickParams(t *testing.T, m *onnx.Model) []roleParam {
	t.Helper()
	g := m.Proto.Graph
	inits := map[string]*onnx.TensorProto{}
	for _, x := range g.Initializer {
		inits[x.GetName()] = x
	}
	type conv struct {
		idx  int
		node *onnx.NodeProto
		w    *onnx.TensorProto
	}
	var convs []conv
	for i, n := range g.Node {
		if n.GetOpType() == "Conv" && len(n.Input) > 1 && inits[n.Input[1]] != nil {
			convs = append(convs, conv{i, n, inits[n.Input[1]]})
		}
	}
	if len(convs) < 5 {
		t.Fatalf("only %d convolutions with initializer weights", len(convs))
	}
	spatial := func(c conv) bool { return len(c.w.GetDims()) == 4 && c.w.GetDims()[2]*c.w.GetDims()[3] > 1 }
	var out []roleParam
	add := func(role, name string) {
		for _, p := range out {
			if p.name == name {
				return
			}
		}
		out = append(out, roleParam{role, name})
	}
	add("first_conv", convs[0].w.GetName())

	depthwise := ""
	for _, c := range convs[1:] {
		if gr := attrInt(c.node, "group", 1); gr > 1 && gr == c.w.GetDims()[0] && c.w.GetDims()[1] == 1 {
			depthwise = c.w.GetName()
			break
		}
	}
	if depthwise != "" {
		add("depthwise", depthwise)
	} else {
		for _, c := range convs[1:] {
			if spatial(c) && maxOf(attrInts(c.node, "strides"), 1) > 1 {
				add("strided(no depthwise)", c.w.GetName())
				break
			}
		}
	}

	consumers := onnx.Consumers(g)
	for _, n := range g.Node {
		if n.GetOpType() != "GlobalAveragePool" {
			continue
		}
		var best *conv
		for _, c := range convs {
			if c.node.Input[0] == n.Input[0] && (best == nil ||
				maxOf(attrInts(c.node, "dilations"), 1) > maxOf(attrInts(best.node, "dilations"), 1)) {
				best = &c
			}
		}
		if best == nil {
			continue // a squeeze-excitation pool
		}
		add("aspp", best.w.GetName())
		for _, c := range consumers[n.Output[0]] {
			if c.GetOpType() == "Conv" && len(c.Input) > 1 && inits[c.Input[1]] != nil {
				add("image_pooling", c.Input[1])
			}
		}
		break
	}

	lastConcat := -1
	for i, n := range g.Node {
		if n.GetOpType() == "Concat" && attrInt(n, "axis", 0) == 1 {
			lastConcat = i
		}
	}
	for _, c := range convs {
		if c.idx > lastConcat && spatial(c) {
			add("decoder", c.w.GetName())
			break
		}
	}
	last := convs[len(convs)-1].node
	add("classifier", last.Input[1])
	if len(last.Input) > 2 && inits[last.Input[2]] != nil {
		add("classifier_bias", last.Input[2])
	}
	for _, role := range []string{"aspp", "decoder"} {
		found := false
		for _, p := range out {
			found = found || p.role == role
		}
		if !found {
			t.Fatalf("no %s conv found in the graph", role)
		}
	}
	return out
}

func paramNames(ps []roleParam) []string {
	var names []string
	for _, p := range ps {
		names = append(names, p.name)
	}
	return names
}

// wholeModelCase is one model of the whole-model checks.
type wholeModelCase struct {
	name  string
	load  func(t *testing.T) *onnx.Model
	shape []int64
}

func wholeModelCases() []wholeModelCase {
	cs := []wholeModelCase{{
		name: "person",
		load: func(t *testing.T) *onnx.Model {
			m, err := onnx.Load(testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		shape: []int64{1, 3, 65, 65}, // the model's batch is fixed at 1
	}}
	for _, b := range []string{"mobilenetv2", "mobilenetv3", "resnet18"} {
		file := "deeplabv3plus_" + b + ".onnx"
		cs = append(cs, wholeModelCase{name: b, load: func(t *testing.T) *onnx.Model { return generatedModel(t, file) },
			shape: []int64{2, 3, 64, 64}})
	}
	return cs
}

// segData is a fixed random input and targets: uniform classes with about
// 15% of the pixels set to the ignore index.
func segData(shape []int64, classes int64, seed uint64) ([]float32, []int64) {
	rng := rand.New(rand.NewPCG(seed, 0xda7a))
	x := make([]float32, numel(shape))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	tg := make([]int64, int(shape[0])*numel(shape[2:]))
	for i := range tg {
		tg[i] = rng.Int64N(classes)
		if rng.IntN(100) < 15 {
			tg[i] = grad.DefaultIgnoreIndex
		}
	}
	return x, tg
}

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// runTraining runs gs.Training on ONNX Runtime and returns its outputs by name.
func runTraining(t *testing.T, gs *grad.Graphs, feeds map[string]*runtime.Tensor) map[string]*runtime.Tensor {
	t.Helper()
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{ConvGradCPU: true}) // for graphs with ConvGrad nodes
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		feeds[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
	}
	return runSession(t, s, feeds)
}

// torchResult is what scripts/torch_grads.py wrote.
type torchResult struct {
	Loss    float64
	Tensors map[string][]float64
}

func runTorch(t *testing.T, script, model string, x []float32, shape []int64, target []int64, params []string) *torchResult {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, v any) string {
		var buf bytes.Buffer
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	prefix := filepath.Join(dir, "torch")
	cmd := exec.Command(torchPython, script, "--model", model,
		"--input", write("input.f32", x), "--input-shape", strings.Join(dims, ","),
		"--target", write("target.i64", target), "--params", strings.Join(params, ","), "--out", prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return readTorchResult(t, prefix)
}

// readTorchResult reads PREFIX.json and PREFIX.f64 in scripts/torch_grads.py's format.
func readTorchResult(t *testing.T, prefix string) *torchResult {
	t.Helper()
	var index struct {
		Loss    float64 `json:"loss"`
		Tensors []struct {
			Name          string
			Offset, Count int
		} `json:"tensors"`
	}
	js, err := os.ReadFile(prefix + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &index); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(prefix + ".f64")
	if err != nil {
		t.Fatal(err)
	}
	res := &torchResult{Loss: index.Loss, Tensors: map[string][]float64{}}
	for _, e := range index.Tensors {
		if 8*(e.Offset+e.Count) > len(raw) {
			t.Fatalf("%s: %s lies past the end of the data", prefix, e.Name)
		}
		v := make([]float64, e.Count)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*(e.Offset+i):]))
		}
		res.Tensors[e.Name] = v
	}
	return res
}

func f32s(t *runtime.Tensor) []float64 {
	out := make([]float64, len(t.Float32))
	for i, x := range t.Float32 {
		out[i] = float64(x)
	}
	return out
}

// relDiff is ‖a − b‖ / ‖b‖ (‖a − b‖ when b is zero).
func relDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d, n float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// TestWholeModelsAgainstPyTorch holds whole training graphs to PyTorch
// autograd: loss, logits and the gradients of the parameters pickParams
// selects (from the stem to the classifier), computed by ONNX Runtime on the
// training graph in float32, against scripts/torch_grads.py, which interprets
// the same ONNX graph with torch functions in float64 and differentiates the
// same loss (mean cross-entropy, ignore index 255) with autograd.
func TestWholeModelsAgainstPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model checks take about 20 s")
	}
	script := requireTorch(t)
	for _, tc := range wholeModelCases() {
		t.Run(tc.name, func(t *testing.T) { checkAgainstTorch(t, tc, script) })
	}
}

// TestWholeModelsAgainstPyTorchWinograd is TestWholeModelsAgainstPyTorch
// with every eligible 3×3 Conv in the Winograd form (at these sizes the
// size rule would leave them direct): the decoder's, and ResNet-18's blocks.
func TestWholeModelsAgainstPyTorchWinograd(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model checks take about 20 s")
	}
	script := requireTorch(t)
	defer grad.SetWinograd(true)()
	for _, tc := range wholeModelCases() {
		if tc.name == "mobilenetv2" || tc.name == "resnet18" {
			t.Run(tc.name, func(t *testing.T) { checkAgainstTorch(t, tc, script) })
		}
	}
}

// checkAgainstTorch is one model of TestWholeModelsAgainstPyTorch.
func checkAgainstTorch(t *testing.T, tc wholeModelCase, script string) {
	m := tc.load(t)
	params := pickParams(t, m)
	in := m.Proto.Graph.Input[0].GetName()
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: paramNames(params),
		InputShapes: map[string][]int64{in: tc.shape}})
	if err != nil {
		t.Fatal(err)
	}
	logitsName := gs.Manifest.ModelOutputs[0]
	var classes int64
	for _, o := range gs.Manifest.Training.Outputs {
		if o.Name == logitsName {
			classes = o.Shape[1]
		}
	}
	x, target := segData(tc.shape, classes, 42)
	outs := runTraining(t, gs, map[string]*runtime.Tensor{
		in:              runtime.NewFloat32(tc.shape, x),
		grad.TargetName: runtime.NewInt64(append([]int64{tc.shape[0]}, tc.shape[2:]...), target),
	})
	path := m.Path
	if path == "" {
		t.Fatal("model has no path")
	}
	ref := runTorch(t, script, path, x, tc.shape, target, paramNames(params))

	loss := float64(outs[grad.LossName].Float32[0])
	if d := math.Abs(loss-ref.Loss) / math.Abs(ref.Loss); d > 1e-5 {
		t.Errorf("loss: ORT %.9g, PyTorch %.9g: relative difference %.2e > 1e-5", loss, ref.Loss, d)
	}
	if d := relDiff(f32s(outs[logitsName]), ref.Tensors["logits"]); d > 1e-4 {
		t.Errorf("logits: relative difference %.2e > 1e-4", d)
	}
	t.Logf("loss ORT %.9g PyTorch %.9g", loss, ref.Loss)
	for _, p := range params {
		got, want := f32s(outs[grad.GradPrefix+p.name]), ref.Tensors[grad.GradPrefix+p.name]
		if norm(want) == 0 {
			t.Errorf("%s %s: PyTorch's gradient is zero: the check would be empty", p.role, p.name)
		}
		d := relDiff(got, want)
		if d > torchTol {
			t.Errorf("%s %s: ‖g_ort − g_torch‖/‖g_torch‖ = %.2e > %g", p.role, p.name, d, torchTol)
		}
		t.Logf("RESULT torch %s %-22s %-60s ‖g‖=%.3e rel_err=%.2e", tc.name, p.role, p.name, norm(want), d)
	}
}
