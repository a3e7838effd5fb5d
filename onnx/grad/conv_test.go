package grad_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// convShapes are the convolutions of the Conv cases, reused by
// TestConvWeightGradFolding.
var convShapes = []struct {
	name                string
	cin, cout, group, k int64
	h, w                int64
	attrs               []*onnx.AttributeProto
	bias                bool
}{
	{"plain3x3", 3, 4, 1, 3, 7, 6, nil, true},
	{"pad1", 3, 4, 1, 3, 7, 6, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}, true},
	{"stride2pad1", 3, 4, 1, 3, 9, 8, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 1, 1, 1, 1)}, true},
	{"stride2odd", 2, 3, 1, 3, 8, 9, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 0, 1, 1, 0)}, false},
	{"dilation2", 2, 3, 1, 3, 9, 9, []*onnx.AttributeProto{ais("dilations", 2, 2), ais("pads", 2, 2, 2, 2)}, true},
	{"stride2dil2", 2, 3, 1, 3, 11, 10, []*onnx.AttributeProto{ais("dilations", 2, 2), ais("strides", 2, 2), ais("pads", 1, 2, 1, 2)}, true},
	{"asym_pads", 2, 2, 1, 3, 6, 6, []*onnx.AttributeProto{ais("pads", 0, 2, 1, 0)}, true},
	{"pointwise", 5, 4, 1, 1, 6, 5, nil, true},
	{"pointwise_stride2", 5, 4, 1, 1, 7, 6, []*onnx.AttributeProto{ais("strides", 2, 2)}, true},
	{"same_upper_s2", 2, 3, 1, 3, 8, 7, []*onnx.AttributeProto{as("auto_pad", "SAME_UPPER"), ais("strides", 2, 2)}, true},
	{"same_lower_s2", 2, 3, 1, 4, 8, 7, []*onnx.AttributeProto{as("auto_pad", "SAME_LOWER"), ais("strides", 2, 2)}, true},
	{"same_upper_k4", 2, 3, 1, 4, 6, 6, []*onnx.AttributeProto{as("auto_pad", "SAME_UPPER")}, true},
	{"valid", 2, 3, 1, 3, 6, 7, []*onnx.AttributeProto{as("auto_pad", "VALID"), ais("strides", 2, 1)}, true},
	{"depthwise", 4, 4, 4, 3, 7, 7, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}, true},
	{"depthwise_s2", 4, 4, 4, 3, 9, 8, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1), ais("strides", 2, 2)}, true},
	{"depthwise_dil2", 3, 3, 3, 3, 9, 9, []*onnx.AttributeProto{ais("pads", 2, 2, 2, 2), ais("dilations", 2, 2)}, true},
	{"depthwise_mult2", 3, 6, 3, 3, 6, 6, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}, true},
	{"groups2", 4, 6, 2, 3, 6, 6, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}, true},
	{"groups2_s2", 4, 6, 2, 3, 7, 7, []*onnx.AttributeProto{ais("strides", 2, 2)}, true},
	// One input channel and a stride: the input gradient is a Col2Im in
	// the CPU form (the last one leaves a row and a column no window reads).
	{"onechannel_s2", 1, 3, 1, 3, 9, 8, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 1, 1, 1, 1)}, true},
	{"onechannel_k4s2_dil2", 1, 2, 1, 4, 12, 11, []*onnx.AttributeProto{ais("dilations", 2, 1), ais("strides", 2, 3), ais("pads", 2, 0, 1, 1)}, false},
	{"onechannel_s2_leftover", 1, 2, 1, 3, 10, 11, []*onnx.AttributeProto{ais("strides", 2, 2)}, true},
}

func convCases() []opCase {
	var ops []opCase
	for _, tc := range convShapes {
		for _, batch := range []int64{1, 2} {
			ops = append(ops, opCase{fmt.Sprintf("%s/n%d", tc.name, batch), 0, func(m *opModel) {
				ins := []string{m.rand("x", batch, tc.cin, tc.h, tc.w), m.rand("w", tc.cout, tc.cin/tc.group, tc.k, tc.k)}
				if tc.bias {
					ins = append(ins, m.rand("b", tc.cout))
				}
				attrs := append([]*onnx.AttributeProto{ai("group", tc.group)}, tc.attrs...)
				m.node("Conv", ins, []string{"y"}, attrs...)
			}})
		}
	}
	return append(ops, opCase{"1d", 0, func(m *opModel) {
		m.node("Conv", []string{m.rand("x", 2, 3, 9), m.rand("w", 4, 3, 3), m.rand("b", 4)}, []string{"y"}, ais("strides", 2), ais("pads", 1, 1))
	}})
}

// TestConvWeightGradFolding checks the weight gradient with the batch
// folded into one product and with per-image products summed, whichever
// the size estimate would pick, on every TestConv case at batch 3.
func TestConvWeightGradFolding(t *testing.T) {
	for _, mode := range []int{grad.FoldAlways, grad.FoldNever} {
		for _, tc := range convShapes {
			t.Run(fmt.Sprintf("fold=%v/%s", mode == grad.FoldAlways, tc.name), func(t *testing.T) {
				old := grad.SetFoldWeightGrad(mode)
				defer grad.SetFoldWeightGrad(old)
				m := newOpModel(13)
				ins := []string{m.rand("x", 3, tc.cin, tc.h, tc.w), m.rand("w", tc.cout, tc.cin/tc.group, tc.k, tc.k)}
				if tc.bias {
					ins = append(ins, m.rand("b", tc.cout))
				}
				m.node("Conv", ins, []string{"y"}, append([]*onnx.AttributeProto{ai("group", tc.group)}, tc.attrs...)...)
				m.outs = []string{"y"}
				m.check(t)
			})
		}
	}
}

func convTransposeCases() []opCase {
	cases := []struct {
		name                string
		cin, cout, group, k int64
		attrs               []*onnx.AttributeProto
	}{
		{"plain", 3, 2, 1, 3, nil},
		{"stride2pad1", 3, 2, 1, 3, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 1, 1, 1, 1)}},
		{"stride2outpad", 3, 2, 1, 3, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 1, 1, 1, 1), ais("output_padding", 1, 1)}},
		{"dil2", 2, 2, 1, 3, []*onnx.AttributeProto{ais("dilations", 2, 2)}},
		{"groups2", 4, 4, 2, 3, []*onnx.AttributeProto{ais("strides", 2, 2)}},
		{"depthwise", 3, 3, 3, 4, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 1, 1, 1, 1)}},
		{"output_shape", 2, 2, 1, 3, []*onnx.AttributeProto{ais("strides", 2, 2), ais("output_shape", 10, 10)}},
		{"same_upper", 2, 2, 1, 3, []*onnx.AttributeProto{ais("strides", 2, 2), as("auto_pad", "SAME_UPPER")}},
		{"same_lower", 2, 2, 1, 4, []*onnx.AttributeProto{ais("strides", 2, 2), as("auto_pad", "SAME_LOWER")}},
	}
	var ops []opCase
	for _, tc := range cases {
		ops = append(ops, opCase{tc.name, 0, func(m *opModel) {
			ins := []string{m.rand("x", 2, tc.cin, 5, 5), m.rand("w", tc.cin, tc.cout/tc.group, tc.k, tc.k), m.rand("b", tc.cout)}
			attrs := append([]*onnx.AttributeProto{ai("group", tc.group)}, tc.attrs...)
			m.node("ConvTranspose", ins, []string{"y"}, attrs...)
		}})
	}
	return ops
}

// TestConvWeightGradForms checks the dense weight gradient in both forms:
// im2col + MatMul (the default) and Transpose + Conv.
func TestConvWeightGradForms(t *testing.T) {
	cases := []struct {
		name  string
		k     int64
		h, w  int64
		attrs []*onnx.AttributeProto
	}{
		{"pad1", 3, 7, 6, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}},
		{"stride2odd_crop", 3, 8, 9, []*onnx.AttributeProto{ais("strides", 2, 2), ais("pads", 0, 1, 1, 0)}},
		{"stride2dil2", 3, 11, 10, []*onnx.AttributeProto{ais("dilations", 2, 2), ais("strides", 2, 2), ais("pads", 1, 2, 1, 2)}},
		{"k2x3_dil3_pads", 3, 9, 9, []*onnx.AttributeProto{ais("kernel_shape", 2, 3), ais("dilations", 3, 1), ais("pads", 3, 0, 0, 2)}},
		{"dilated_past_input", 3, 5, 5, []*onnx.AttributeProto{ais("dilations", 6, 6), ais("pads", 6, 6, 6, 6)}},
		{"pointwise_stride2", 1, 7, 6, []*onnx.AttributeProto{ais("strides", 2, 2)}},
		{"depthwise_s2", 3, 9, 8, []*onnx.AttributeProto{ai("group", 3), ais("pads", 1, 1, 1, 1), ais("strides", 2, 2)}},
		{"depthwise_dil2", 3, 9, 9, []*onnx.AttributeProto{ai("group", 3), ais("pads", 2, 2, 2, 2), ais("dilations", 2, 2)}},
		{"depthwise_mult2_crop", 3, 8, 7, []*onnx.AttributeProto{ai("group", 3), ais("pads", 0, 1, 1, 0), ais("strides", 2, 2)}},
		{"groups3", 3, 6, 6, []*onnx.AttributeProto{ai("group", 3), ais("pads", 1, 1, 1, 1)}},
	}
	for _, form := range []bool{true, false} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("im2col=%v/%s", form, tc.name), func(t *testing.T) {
				old := grad.SetIm2colWeightGrad(form)
				defer grad.SetIm2colWeightGrad(old)
				m := newOpModel(13)
				kh, kw := tc.k, tc.k
				cin, cout, group := int64(3), int64(4), int64(1)
				for _, a := range tc.attrs {
					switch a.GetName() {
					case "kernel_shape":
						kh, kw = a.GetInts()[0], a.GetInts()[1]
					case "group":
						group = a.GetI()
					}
				}
				switch tc.name {
				case "depthwise_s2", "depthwise_dil2":
					cin, cout = 3, 3
				case "depthwise_mult2_crop":
					cin, cout = 3, 6
				case "groups3":
					cin, cout = 6, 6
				}
				m.node("Conv", []string{m.rand("x", 2, cin, tc.h, tc.w), m.rand("w", cout, cin/group, kh, kw)}, []string{"y"}, tc.attrs...)
				m.outs = []string{"y"}
				m.check(t)
			})
		}
	}
}

// TestConvFlipForms checks stride-1 input gradients (Conv with the flipped
// kernel) with the flip as a MatMul (default) and as a Slice.
func TestConvFlipForms(t *testing.T) {
	cases := []struct {
		name         string
		cin, cout, g int64
		kh, kw       int64
		attrs        []*onnx.AttributeProto
	}{
		{"dense3x3", 3, 4, 1, 3, 3, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}},
		{"dense2x3_dil2", 3, 4, 1, 2, 3, []*onnx.AttributeProto{ais("pads", 2, 1, 1, 2), ais("dilations", 2, 1)}},
		{"depthwise", 4, 4, 4, 3, 3, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}},
		{"groups2", 4, 6, 2, 3, 1, []*onnx.AttributeProto{ais("pads", 1, 0, 1, 0)}},
	}
	for _, form := range []bool{true, false} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("matmul=%v/%s", form, tc.name), func(t *testing.T) {
				old := grad.SetFlipByMatMul(form)
				defer grad.SetFlipByMatMul(old)
				m := newOpModel(13)
				m.node("Conv", []string{m.rand("x", 2, tc.cin, 6, 7), m.rand("w", tc.cout, tc.cin/tc.g, tc.kh, tc.kw)}, []string{"y"},
					append([]*onnx.AttributeProto{ai("group", tc.g)}, tc.attrs...)...)
				m.outs = []string{"y"}
				m.check(t)
			})
		}
	}
}

// TestStridedConvInputGradSymmetricPads: the input gradient of a strided
// depthwise conv (MobileNetV2's down-sampling blocks) is a ConvTranspose
// with symmetric pads (and output_padding), which ONNX Runtime's CUDA
// provider runs; asymmetric pads would send it to the CPU.
func TestStridedConvInputGradSymmetricPads(t *testing.T) {
	for _, hw := range []int64{8, 9} {
		m := newOpModel(13)
		x := m.rand("x", 1, 4, hw, hw)
		m.node("Conv", []string{x, m.rand("w", 4, 1, 3, 3)}, []string{"y"}, ai("group", 4), ais("strides", 2, 2), ais("pads", 1, 1, 1, 1))
		m.outs = []string{"y"}
		gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"x", "w"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, n := range gs.Training.Proto.Graph.Node {
			if n.GetOpType() != "ConvTranspose" {
				continue
			}
			found = true
			for _, a := range n.Attribute {
				if a.GetName() == "pads" && !slices.Equal(a.Ints[:2], a.Ints[2:]) {
					t.Errorf("%d×%d: ConvTranspose pads %v are asymmetric", hw, hw, a.Ints)
				}
			}
		}
		if !found {
			t.Errorf("%d×%d: no ConvTranspose for the input gradient", hw, hw)
		}
		m.check(t)
	}
}

// TestConvWeightGradSplit checks the split-patches weight gradient of dense
// stride-1 convolutions (forced on, whatever the size estimate says).
func TestConvWeightGradSplit(t *testing.T) {
	defer grad.SetSplitWeightGrad(true)()
	defer grad.SetFoldWeightGrad(grad.SetFoldWeightGrad(grad.FoldNever))
	cases := []struct {
		name   string
		kh, kw int64
		h, w   int64
		attrs  []*onnx.AttributeProto
	}{
		{"plain3x3", 3, 3, 7, 6, nil},
		{"pad1", 3, 3, 7, 6, []*onnx.AttributeProto{ais("pads", 1, 1, 1, 1)}},
		{"asym_pads", 3, 3, 6, 6, []*onnx.AttributeProto{ais("pads", 0, 2, 1, 0)}},
		{"dilation2", 3, 3, 9, 9, []*onnx.AttributeProto{ais("dilations", 2, 2), ais("pads", 2, 2, 2, 2)}},
		{"k2x3_dil3_pads", 2, 3, 9, 9, []*onnx.AttributeProto{ais("dilations", 3, 1), ais("pads", 3, 0, 0, 2)}},
		{"same_upper_k4", 4, 4, 6, 6, []*onnx.AttributeProto{as("auto_pad", "SAME_UPPER")}},
		{"dilated_past_input", 3, 3, 5, 5, []*onnx.AttributeProto{ais("dilations", 6, 6), ais("pads", 6, 6, 6, 6)}},
	}
	for _, tc := range cases {
		for _, batch := range []int64{1, 2} {
			t.Run(fmt.Sprintf("%s/n%d", tc.name, batch), func(t *testing.T) {
				m := newOpModel(13)
				ins := []string{m.rand("x", batch, 3, tc.h, tc.w), m.rand("w", 4, 3, tc.kh, tc.kw), m.rand("b", 4)}
				m.node("Conv", ins, []string{"y"}, tc.attrs...)
				m.outs = []string{"y"}
				m.check(t)
			})
		}
	}
}

// TestConvWinograd checks the Winograd forms of 3×3 pad-1 stride-1
// convolutions (forced on at these small sizes), F(4,3) where 4×4 blocks
// tile the output and F(2,3) otherwise: gradients against finite
// differences, and the forward output against the direct convolution.
func TestConvWinograd(t *testing.T) {
	for _, tc := range []struct {
		name             string
		batch, cin, cout int64
		h, w             int64
		bias             bool
		alpha            int64 // the input tile: 4 for F(2,3), 6 for F(4,3)
		chunks           int   // about K/T examples a chunk (T: tiles an example)
	}{
		{"bias", 2, 3, 4, 6, 8, true, 4, 2},
		{"nobias", 1, 2, 3, 4, 4, false, 6, 1},
		{"wide", 2, 5, 2, 2, 10, true, 4, 2},
		{"f4_per_example", 3, 3, 2, 8, 4, true, 6, 3},
		{"f4_one_chunk", 2, 2, 4, 4, 4, true, 6, 1},
		{"f4_ragged_chunks", 3, 2, 2, 4, 4, false, 6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newOpModel(13)
			ins := []string{m.rand("x", tc.batch, tc.cin, tc.h, tc.w), m.rand("w", tc.cout, tc.cin, 3, 3)}
			if tc.bias {
				ins = append(ins, m.rand("b", tc.cout))
			}
			m.node("Conv", ins, []string{"y"}, ais("pads", 1, 1, 1, 1))
			m.outs = []string{"y"}
			restore := grad.SetWinograd(true)
			defer restore()
			m.check(t)
			gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
			if err != nil {
				t.Fatal(err)
			}
			ops := map[string]int{}
			for _, n := range gs.Eval.Proto.Graph.Node {
				ops[n.GetOpType()]++
			}
			// The kernel transform once (one Gemm), the rest a chunk of
			// examples at a time.
			n := tc.chunks
			split := min(n-1, 1)
			if ops["Conv"] != n || ops["Gemm"] != 1 || ops["MatMul"] != n || ops["ConvTranspose"] != n || ops["Split"] != split || ops["Concat"] != split {
				t.Fatalf("eval graph ops %v, want the Winograd form in %d chunks (%d Conv, 1 Gemm, %d MatMul, %d ConvTranspose, %d Split and Concat)", ops, n, n, n, n, split)
			}
			kernels := 0
			for _, in := range gs.Eval.Proto.Graph.Initializer {
				if slices.Equal(in.GetDims(), []int64{tc.alpha * tc.alpha, 1, tc.alpha, tc.alpha}) {
					kernels++
				}
			}
			if kernels != 1 {
				t.Fatalf("%d input-transform kernels of %d×%d tiles, want 1", kernels, tc.alpha, tc.alpha)
			}
			// The input transform's adjoint: one Col2Im a chunk in the CPU
			// form, none in the GPU form (DirectConvs; forced Winograd).
			col2im := func(gs *grad.Graphs) int {
				k := 0
				for _, n := range gs.Training.Proto.Graph.Node {
					if n.GetOpType() == "Col2Im" {
						k++
					}
				}
				return k
			}
			if k := col2im(gs); k != n {
				t.Fatalf("%d Col2Im in the training graph for %d chunks, want one each", k, n)
			}
			gpu, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs, DirectConvs: true})
			if err != nil {
				t.Fatal(err)
			}
			if k := col2im(gpu); k != 0 {
				t.Fatalf("%d Col2Im in the DirectConvs (GPU) training graph, want none", k)
			}
			restore()
			defer grad.SetWinograd(false)()
			direct, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
			if err != nil {
				t.Fatal(err)
			}
			got, want := runEval(t, gs, m), runEval(t, direct, m)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("output %d: Winograd %g, direct %g", i, got[i], want[i])
				}
			}
		})
	}
}

// TestWinogradLayoutChangesFold: the Winograd form's 3-D layout changes
// are Transposes ONNX Runtime folds into its MatMuls (FusedMatMul's
// transBatch flags), V's in the forward pass and Vᵀ's and dV's in the
// backward one. Left are the four that move the examples of a chunk (V's
// and M's, forward and backward). Written as 4-D permutations, or with
// operands of unequal rank, the swaps were not folded: ORT ran them as
// Transposes, single-threaded.
func TestWinogradLayoutChangesFold(t *testing.T) {
	runtimetest.Require(t)
	// Two examples in one chunk (F(4,3): four tiles an example, K = 8).
	m := newOpModel(13)
	m.node("Conv", []string{m.rand("x", 2, 3, 8, 8), m.rand("w", 8, 3, 3, 3), m.rand("b", 8)}, []string{"y"}, ais("pads", 1, 1, 1, 1))
	m.outs = []string{"y"}
	defer grad.SetWinograd(true)()
	gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
	if err != nil {
		t.Fatal(err)
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	optimized := filepath.Join(t.TempDir(), "optimized.onnx")
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1, Tuning: runtime.Tuning{OptimizedModelPath: optimized}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	om, err := onnx.Load(optimized)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, n := range om.Graph().GetNode() {
		ops[n.GetOpType()]++
		if n.GetOpType() == "Transpose" {
			for _, a := range n.GetAttribute() {
				if a.GetName() == "perm" && len(a.GetInts()) != 4 {
					t.Errorf("ONNX Runtime left Transpose %s with perm %v unfolded", n.GetName(), a.GetInts())
				}
			}
		}
	}
	if ops["Transpose"] != 4 || ops["FusedMatMul"] < 3 {
		t.Fatalf("ONNX Runtime's graph has %d Transposes and %d FusedMatMuls, want 4 and at least 3", ops["Transpose"], ops["FusedMatMul"])
	}
}

// runEval runs gs's eval graph with m's initializers as the parameters and
// returns its first output.
func runEval(t *testing.T, gs *grad.Graphs, m *opModel) []float32 {
	t.Helper()
	data, err := gs.Eval.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var feeds []*runtime.Tensor
	for _, in := range s.Inputs {
		for _, p := range m.inits {
			if p.GetName() == in.Name {
				v, err := onnx.Float32s(p)
				if err != nil {
					t.Fatal(err)
				}
				feeds = append(feeds, runtime.NewFloat32(p.GetDims(), v))
			}
		}
	}
	out, err := s.Run(feeds...)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Float32
}

// TestWinogradChoice: by default only large 3×3 convs take the Winograd
// form (DeepLabV3+'s decoder size here), and Config.DirectConvs keeps them
// direct.
func TestWinogradChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ch, hw int64
		direct bool
		want   bool
	}{
		{"decoder_size", 256, 32, false, true},
		{"direct_convs", 256, 32, true, false},
		{"few_channels", 64, 32, false, false},
		{"small_map", 256, 8, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newOpModel(13)
			m.node("Conv", []string{m.rand("x", 1, tc.ch, tc.hw, tc.hw), m.rand("w", tc.ch, tc.ch, 3, 3)}, []string{"y"}, ais("pads", 1, 1, 1, 1))
			m.outs = []string{"y"}
			gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"w"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs, DirectConvs: tc.direct})
			if err != nil {
				t.Fatal(err)
			}
			got := false
			for _, n := range gs.Eval.Proto.Graph.Node {
				got = got || n.GetOpType() == "MatMul"
			}
			if got != tc.want {
				t.Errorf("Winograd form: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWeightGradConvConfig: Config.WeightGradConv compiles every Conv weight
// gradient as the transposed-roles Conv — the same graph, byte for byte, as
// the form TestConvWeightGradForms checks numerically with im2col off — and
// no im2col patches (a Conv whose kernel is the one-hot patch constant).
func TestWeightGradConvConfig(t *testing.T) {
	build := func(wgradConv bool) *onnx.Model {
		m := newOpModel(13)
		x := m.rand("x", 2, 3, 9, 8)
		m.node("Conv", []string{x, m.rand("w", 4, 3, 3, 3)}, []string{"h"}, ais("pads", 1, 1, 1, 1))
		m.node("Conv", []string{"h", m.rand("dw", 4, 1, 3, 3)}, []string{"y"}, ais("strides", 2, 2), ais("pads", 1, 1, 1, 1), ai("group", 4))
		m.outs = []string{"y"}
		gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone},
			GradInputs: m.outs, DirectConvs: true, WeightGradConv: wgradConv})
		if err != nil {
			t.Fatal(err)
		}
		return gs.Training
	}
	patchConvs := func(m *onnx.Model) int {
		consts := map[string]bool{}
		for _, in := range m.Proto.Graph.Initializer {
			consts[in.GetName()] = true
		}
		n := 0
		for _, node := range m.Proto.Graph.Node {
			if node.GetOpType() == "Conv" && len(node.Input) > 1 && consts[node.Input[1]] && !slices.Contains([]string{"w", "dw"}, node.Input[1]) {
				n++
			}
		}
		return n
	}
	if n := patchConvs(build(false)); n == 0 {
		t.Fatal("the default (CPU) form has no patch Conv: the check below proves nothing")
	}
	got := build(true)
	if n := patchConvs(got); n != 0 {
		t.Errorf("WeightGradConv left %d patch Convs", n)
	}
	old := grad.SetIm2colWeightGrad(false)
	want := build(false)
	grad.SetIm2colWeightGrad(old)
	a, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Error("WeightGradConv's graph differs from the transposed-roles form TestConvWeightGradForms checks")
	}
}

// TestMatrixReductions: with Config.MatrixReductions no ReduceSum of the
// training graph sums over axes that are not one contiguous run (a Conv
// bias's and a per-channel scale's gradients sum over N, H and W), the
// default graph has such sums (else the check says nothing), and the
// gradients of the split form still agree with finite differences.
func TestMatrixReductions(t *testing.T) {
	m := newOpModel(13)
	x := m.rand("x", 2, 3, 5, 4)
	m.node("Conv", []string{x, m.rand("w", 4, 3, 3, 3), m.rand("b", 4)}, []string{"h"}, ais("pads", 1, 1, 1, 1))
	m.node("Mul", []string{"h", m.rand("s", 1, 4, 1, 1)}, []string{"y"})
	m.outs = []string{"y"}
	split := func(matrix bool) int {
		cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs,
			DirectConvs: true, MatrixReductions: matrix}
		gs, err := grad.Build(m.model(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		g := gs.Training.Proto.Graph
		consts := map[string]*onnx.TensorProto{}
		for _, in := range g.Initializer {
			consts[in.GetName()] = in
		}
		n := 0
		for _, node := range g.Node {
			if node.GetOpType() != "ReduceSum" || len(node.Input) < 2 {
				continue
			}
			axes, err := onnx.Int64s(consts[node.Input[1]])
			if err != nil {
				t.Fatalf("ReduceSum %q: axes %q: %v", node.GetName(), node.Input[1], err)
			}
			for i := 1; i < len(axes); i++ {
				if axes[i] != axes[i-1]+1 {
					n++
					break
				}
			}
		}
		return n
	}
	if n := split(false); n == 0 {
		t.Fatal("the default graph sums over no split axes: the check below proves nothing")
	}
	if n := split(true); n != 0 {
		t.Errorf("MatrixReductions left %d ReduceSums over split axes", n)
	}
	cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs,
		DirectConvs: true, MatrixReductions: true}
	// Conv has no double kernel on ONNX Runtime's CPU: float32 differences.
	res, err := gradcheck.Check(m.model(), cfg, nil, gradcheck.Options{Directions: 3, Seed: 1, Step: 3e-3})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Directions {
		if d.RelErr > tol {
			t.Errorf("analytic %.10g numeric %.10g: relative error %.3g > %g", d.Analytic, d.Numeric, d.RelErr, tol)
		}
	}
}
