package grad_test

import (
	"encoding/binary"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// transformerShape is the shape of the corpus's reference input.
var transformerShape = []int64{2, 3, 64, 64}

// TestTransformerModelsAgainstPyTorch holds the training graph of every
// model of the transformer corpus (SegFormer, ConvNeXt-UperNet, Swin
// blocks with and without shifted windows, GroupNorm U-Net; opset 13 and 17; dynamic and fixed size) to the
// gradients PyTorch autograd computed in float64 on the module the model
// was exported from: the loss, the logits, and every parameter tensor at
// torchTol relative error. Gradients smaller than a thousandth of the
// model's largest are held to torchTol of that floor instead, since float32
// rounding of the whole backward pass does not shrink with them.
func TestTransformerModelsAgainstPyTorch(t *testing.T) {
	runtimetest.Require(t)
	dir, exports := testassets.TransformerCorpus(t)
	for _, e := range exports {
		t.Run(strings.TrimSuffix(e.File, ".onnx"), func(t *testing.T) {
			checkTransformer(t, filepath.Join(dir, e.File), filepath.Join(dir, e.Family), e.Params)
		})
	}
}

// checkTransformer is one model of TestTransformerModelsAgainstPyTorch;
// params maps its initializers to the reference's parameter names.
func checkTransformer(t *testing.T, path, refBase string, params map[string]string) {
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if u := grad.Unsupported(m); u != nil {
		t.Fatalf("operators without a gradient rule: %s", strings.Join(u, ", "))
	}
	var inits []string
	for _, p := range m.Proto.Graph.Initializer {
		if p.GetDataType() == int32(onnx.Float32) {
			inits = append(inits, p.GetName())
		}
	}
	if len(inits) != len(params) {
		t.Fatalf("%d float initializers; the manifest maps %d", len(inits), len(params))
	}
	// Every float initializer of these models is a PyTorch parameter, so
	// "*" (the parameter rule, onnx.ParameterNames) must select them all:
	// Linear biases, decomposed normalisations' scales, layer scales and
	// relative-position tables included.
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{"input": transformerShape}})
	if err != nil {
		t.Fatal(err)
	}
	x := readLE[float32](t, refBase+".ref_input.f32")
	target := readLE[int64](t, refBase+".ref_target.i64")
	if len(x) != numel(transformerShape) || len(target) != 2*64*64 {
		t.Fatalf("%s: reference input of %d values and target of %d, want %d and %d",
			refBase, len(x), len(target), numel(transformerShape), 2*64*64)
	}
	outs := runTraining(t, gs, map[string]*runtime.Tensor{
		"input":         runtime.NewFloat32(transformerShape, x),
		grad.TargetName: runtime.NewInt64([]int64{2, 64, 64}, target),
	})
	ref := readTorchResult(t, refBase+".ref")

	loss := float64(outs[grad.LossName].Float32[0])
	if d := math.Abs(loss-ref.Loss) / math.Abs(ref.Loss); d > 1e-5 {
		t.Errorf("loss: ORT %.9g, PyTorch %.9g: relative difference %.2e > 1e-5", loss, ref.Loss, d)
	}
	if d := relDiff(f32s(outs["logits"]), ref.Tensors["logits"]); d > 1e-4 {
		t.Errorf("logits: relative difference %.2e > 1e-4", d)
	}
	var largest float64
	for _, p := range inits {
		largest = max(largest, norm(ref.Tensors[grad.GradPrefix+params[p]]))
	}
	if largest == 0 {
		t.Fatal("every PyTorch gradient is zero: the check would be empty")
	}
	floor := 1e-3 * largest
	var worst float64 // the largest error relative to max(‖g_torch‖, floor)
	for _, p := range inits {
		want, ok := ref.Tensors[grad.GradPrefix+params[p]]
		if !ok {
			t.Errorf("%s: the reference has no gradient for %q", p, params[p])
			continue
		}
		if !slices.ContainsFunc(gs.Manifest.Params, func(pi grad.ParamInfo) bool { return pi.Name == p }) {
			t.Errorf("%s (%s): a PyTorch parameter that \"*\" does not train", p, params[p])
			continue
		}
		got := f32s(outs[grad.GradPrefix+p])
		diff := make([]float64, len(got))
		for i := range got {
			if i < len(want) {
				diff[i] = got[i] - want[i]
			}
		}
		ref := max(norm(want), floor)
		worst = max(worst, norm(diff)/ref)
		if len(got) != len(want) || norm(diff) > torchTol*ref {
			t.Errorf("%s (%s): ‖g_ort − g_torch‖ = %.2e > %g × %.2e (‖g_torch‖ %.2e, %d values, want %d)",
				p, params[p], norm(diff), torchTol, ref, norm(want), len(got), len(want))
		}
	}
	t.Logf("loss ORT %.9g PyTorch %.9g; %d parameter tensors, largest ‖g‖ %.3e, worst relative error %.2e",
		loss, ref.Loss, len(inits), largest, worst)
}

// readLE reads a raw little-endian array.
func readLE[T float32 | int64](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var zero T
	out := make([]T, len(b)/binary.Size(zero))
	if _, err := binary.Decode(b, binary.LittleEndian, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// TestTransformerParameterKindsFiniteDifference holds the compiled
// gradient of one tensor of each parameter kind that only the affine and
// Gather rules of onnx.NodeParameters make trainable — Linear biases (Add
// after MatMul), decomposed LayerNorm and GroupNorm scales and biases,
// layer scales, Swin's relative-position tables — in every dynamic export
// of the corpus, to central differences of the reference loss that the
// generator took in float64 on the ONNX graph itself (not on the PyTorch
// module, and not by autograd). ONNX Runtime has no double Conv kernel, so
// gradcheck could only difference these models in float32, where
// rounding swamps the differences of a single bias.
func TestTransformerParameterKindsFiniteDifference(t *testing.T) {
	runtimetest.Require(t)
	dir, exports := testassets.TransformerCorpus(t)
	seen := map[string]bool{}
	for _, e := range exports {
		if !e.Dynamic {
			continue
		}
		if len(e.FiniteDifferences) == 0 {
			t.Errorf("%s: the manifest has no finite differences (rerun make transformer-models)", e.File)
			continue
		}
		t.Run(strings.TrimSuffix(e.File, ".onnx"), func(t *testing.T) {
			m, err := onnx.Load(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			var trainable []string
			for _, fd := range e.FiniteDifferences {
				seen[fd.Kind] = true
				trainable = append(trainable, fd.Initializer)
			}
			gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: trainable, InputShapes: map[string][]int64{"input": transformerShape}})
			if err != nil {
				t.Fatal(err)
			}
			refBase := filepath.Join(dir, e.Family)
			outs := runTraining(t, gs, map[string]*runtime.Tensor{
				"input":         runtime.NewFloat32(transformerShape, readLE[float32](t, refBase+".ref_input.f32")),
				grad.TargetName: runtime.NewInt64([]int64{2, 64, 64}, readLE[int64](t, refBase+".ref_target.i64")),
			})
			for _, fd := range e.FiniteDifferences {
				g := f32s(outs[grad.GradPrefix+fd.Initializer])
				// Elements far smaller than their tensor carry its float32
				// rounding: they are held to torchTol of a thousandth of its norm.
				floor := 1e-3 * norm(g)
				for j, i := range fd.Elements {
					if i >= len(g) {
						t.Fatalf("%s (%s): element %d of a gradient of %d values", fd.Initializer, fd.Kind, i, len(g))
					}
					want := fd.Gradient[j]
					if d := math.Abs(g[i] - want); d > torchTol*max(math.Abs(want), floor) {
						t.Errorf("%s (%s) element %d: compiled %.6e, float64 finite difference %.6e: |difference| %.2e > %g × %.2e",
							fd.Initializer, fd.Kind, i, g[i], want, d, torchTol, max(math.Abs(want), floor))
					}
				}
			}
		})
	}
	for _, kind := range []string{"Add after MatMul", "Mul after Div", "Gather"} {
		if !seen[kind] {
			t.Errorf("no %q parameter in the corpus: the check of that kind would be empty (kinds seen: %v)", kind, slices.Sorted(maps.Keys(seen)))
		}
	}
}
