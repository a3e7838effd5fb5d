package runtime

import (
	"reflect"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx/grad"
)

func packedStrides(dims []int) []int {
	s := make([]int, len(dims))
	acc := 1
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= dims[i]
	}
	return s
}

func toInts(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// TestConvGradCUDAPlanDescriptors checks every descriptor the cuDNN kernel
// sets, against the fake table, for each convolution class and element
// type, with TF32 on and off.
func TestConvGradCUDAPlanDescriptors(t *testing.T) {
	cases := append(append([]cgCase(nil), cgCases[:6]...),
		// Asymmetric pads that symmetric cuDNN padding expresses exactly:
		// the end pad of 0 instead of 1 never changes the output size.
		cgCase{"asymmetric-exact", 2, 3, 8, 8, 4, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 0, 0}, 1})
	types := []struct{ elem, cudnn string }{{"float32", "FLOAT"}, {"float16", "HALF"}, {"bfloat16", "BFLOAT16"}}
	for _, c := range cases {
		for _, ty := range types {
			for _, tf32 := range []bool{true, false} {
				dy, x, w, _ := c.shapes()
				attrs := ConvGradAttrs{KernelShape: []int64{c.kh, c.kw}, Strides: c.strides, Dilations: c.dil, Pads: c.pads, Group: c.group}
				p, err := PlanConvGradCUDA(attrs, ConvGradCUDASettings{AllowTF32: tf32}, ty.elem, dy, x, w)
				if err != nil {
					t.Fatalf("%s %s tf32=%v: %v", c.name, ty.elem, tf32, err)
				}
				wantTensor := func(dims []int64) CUDNNTensor {
					d := toInts(dims)
					return CUDNNTensor{DataType: ty.cudnn, Dims: d, Strides: packedStrides(d)}
				}
				math := "TENSOR_OP_MATH" // half types: tensor cores, float accumulation
				if ty.elem == "float32" {
					math = map[bool]string{true: "DEFAULT_MATH", false: "FMA_MATH"}[tf32]
				}
				want := &ConvGradCUDAPlan{
					DY: wantTensor(dy), X: wantTensor(x), DB: wantTensor([]int64{1, c.co, 1, 1}),
					W: CUDNNFilter{DataType: ty.cudnn, Format: "NCHW", Dims: toInts(w)},
					Conv: CUDNNConvolution{
						Pads: []int{int(c.pads[0]), int(c.pads[1])}, Strides: toInts(c.strides), Dilations: toInts(c.dil),
						Groups: int(c.group), Mode: "CROSS_CORRELATION", ComputeType: "FLOAT",
					},
					// The fake fails algorithm 0 and offers 1, whose workspace
					// it sizes at 4096 (data) and 8192 (filter) per algo+1.
					DataAlgo: 1, FilterAlgo: 1, DataMath: math, FilterMath: math,
					DataWorkspace: 8192, FilterWorkspace: 16384,
					Searches: 2, SearchMath: math,
				}
				if !reflect.DeepEqual(p, want) {
					t.Errorf("%s %s tf32=%v:\n got %+v\nwant %+v", c.name, ty.elem, tf32, p, want)
				}
			}
		}
	}
}

// TestConvGradCUDAPlanCache: a shape planned before searches no more; a
// new shape (the last, smaller batch) does; an output first asked for
// later searches only its own algorithm.
func TestConvGradCUDAPlanCache(t *testing.T) {
	c := cgCases[0]
	pl, err := NewConvGradCUDAPlanner(ConvGradAttrs{KernelShape: []int64{3, 3}, Strides: c.strides, Dilations: c.dil, Pads: c.pads, Group: 1},
		ConvGradCUDASettings{AllowTF32: true, Exhaustive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	dy, x, w, _ := c.shapes()
	plan := func(dy, x []int64, wantDX bool) *ConvGradCUDAPlan {
		t.Helper()
		p, err := pl.Plan("float16", dy, x, w, wantDX, true)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := plan(dy, x, false); p.Searches != 1 || p.Finds != 1 || p.FilterAlgo != 1 || p.DataAlgo != -1 {
		t.Errorf("first call, dW only: %d searches (%d exhaustive), filter algo %d, data algo %d; want 1 (1), 1, none",
			p.Searches, p.Finds, p.FilterAlgo, p.DataAlgo)
	}
	if p := plan(dy, x, false); p.Searches != 0 {
		t.Errorf("same shape again: %d searches, want 0", p.Searches)
	}
	if p := plan(dy, x, true); p.Searches != 1 || p.DataAlgo != 1 {
		t.Errorf("same shape, dX now wanted: %d searches, data algo %d; want 1 and 1", p.Searches, p.DataAlgo)
	}
	dy1, x1 := append([]int64{1}, dy[1:]...), append([]int64{1}, x[1:]...)
	if p := plan(dy1, x1, true); p.Searches != 2 || p.X.Dims[0] != 1 {
		t.Errorf("new batch size: %d searches, X dims %v; want 2 and batch 1", p.Searches, p.X.Dims)
	}
	if p := plan(dy, x, true); p.Searches != 0 {
		t.Errorf("first shape again: %d searches, want 0 (still cached)", p.Searches)
	}
	heur, err := PlanConvGradCUDA(ConvGradAttrs{Pads: c.pads}, ConvGradCUDASettings{}, "float32", dy, x, w)
	if err != nil {
		t.Fatal(err)
	}
	if heur.Searches != 2 || heur.Finds != 0 {
		t.Errorf("heuristic planner: %d searches, %d exhaustive; want 2 and 0", heur.Searches, heur.Finds)
	}
}

func TestConvGradCUDAPlanErrors(t *testing.T) {
	c := cgCases[0]
	dy, x, w, _ := c.shapes()
	good := ConvGradAttrs{KernelShape: []int64{3, 3}, Strides: c.strides, Dilations: c.dil, Pads: c.pads, Group: 1}
	for _, tc := range []struct {
		name   string
		attrs  ConvGradAttrs
		elem   string
		dy, x  []int64
		substr string
	}{
		{"3-D strides", ConvGradAttrs{Strides: []int64{1, 1, 1}}, "float32", dy, x, "strides has 3 values"},
		{"zero group", ConvGradAttrs{Group: -1}, "float32", dy, x, "group = -1"},
		{"group not dividing", ConvGradAttrs{Group: 2, Pads: c.pads}, "float32", dy, x, "group 2 does not divide"},
		{"3-D input", good, "float32", dy, x[:3], "input X has rank 3"},
		{"double", good, "float64", dy, x, `element type "float64"`},
		// pads (0, 1) with stride 2: symmetric 0 gives 3 rows, the node 4.
		{"asymmetric pads cuDNN cannot express", ConvGradAttrs{Strides: []int64{2, 2}, Pads: []int64{0, 0, 1, 1}}, "float32",
			[]int64{2, 4, 4, 4}, []int64{2, 3, 8, 8}, "cuDNN pads symmetrically"},
	} {
		_, err := PlanConvGradCUDA(tc.attrs, ConvGradCUDASettings{}, tc.elem, tc.dy, tc.x, w)
		if err == nil || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.substr)
		}
	}
}

func TestConvGradCUDASettings(t *testing.T) {
	for _, tc := range []struct {
		opts             map[string]string
		tf32, exhaustive bool
		workspace        int
		bad              bool
	}{
		{nil, true, true, 1 << 30, false},
		{map[string]string{"use_tf32": "0", "cudnn_conv_algo_search": "HEURISTIC"}, false, false, 1 << 30, false},
		{map[string]string{"use_tf32": "1", "cudnn_conv_algo_search": "DEFAULT", "cudnn_conv_use_max_workspace": "0"}, true, false, 32 << 20, false},
		{map[string]string{"cudnn_conv_algo_search": "exhaustive"}, true, true, 1 << 30, false},
		{map[string]string{"use_tf32": "maybe"}, false, false, 0, true},
		{map[string]string{"cudnn_conv_use_max_workspace": "2"}, false, false, 0, true},
		{map[string]string{"cudnn_conv_algo_search": "FAST"}, false, false, 0, true},
	} {
		tf32, ex, ws, err := convGradCUDASettings(tc.opts)
		if (err != nil) != tc.bad || (!tc.bad && (tf32 != tc.tf32 || ex != tc.exhaustive || ws != tc.workspace)) {
			t.Errorf("%v: tf32=%v exhaustive=%v workspace=%d err=%v; want %v %v %d bad=%v", tc.opts, tf32, ex, ws, err, tc.tf32, tc.exhaustive, tc.workspace, tc.bad)
		}
	}
}

// TestConvGradNamesMatchCompiler: the names runtime registers are those
// the gradient compiler emits (runtime may not import onnx/grad; its test
// may).
func TestConvGradNamesMatchCompiler(t *testing.T) {
	if ConvGradDomain != grad.ConvGradDomain || ConvGradOp != grad.ConvGradOp || grad.ConvGradVersion != 1 {
		t.Errorf("runtime registers %s/%s version 1; onnx/grad emits %s/%s version %d",
			ConvGradDomain, ConvGradOp, grad.ConvGradDomain, grad.ConvGradOp, grad.ConvGradVersion)
	}
}

// TestConvGradCUDACompute runs the cuDNN kernel's compute path on the fake:
// each backward call gets the planned algorithm, its math type and a
// workspace of the planned size, an exhaustive search's workspace is asked
// for only while a search is due, and every buffer goes back.
func TestConvGradCUDACompute(t *testing.T) {
	c := cgCases[1]
	dy, x, w, _ := c.shapes()
	attrs := ConvGradAttrs{KernelShape: []int64{c.kh, c.kw}, Strides: c.strides, Dilations: c.dil, Pads: c.pads, Group: c.group}
	pl, err := NewConvGradCUDAPlanner(attrs, ConvGradCUDASettings{Exhaustive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	all := [3]bool{true, true, true}
	fma := func(ws int) CUDNNCall { return CUDNNCall{Calls: 1, Algo: 1, Math: "FMA_MATH", Workspace: ws} }
	first, err := pl.Compute("float32", dy, x, w, all)
	if err != nil {
		t.Fatal(err)
	}
	want := &ConvGradCUDACalls{Data: fma(8192), Filter: fma(16384), BiasCalls: 1,
		Allocations: []int{1 << 30, 8192, 16384}, Frees: 3, Searches: 2}
	if !reflect.DeepEqual(first, want) {
		t.Errorf("first run:\n got %+v\nwant %+v", first, want)
	}
	again, err := pl.Compute("float32", dy, x, w, all)
	if err != nil {
		t.Fatal(err)
	}
	want.Allocations, want.Frees, want.Searches = []int{8192, 16384}, 2, 0
	if !reflect.DeepEqual(again, want) {
		t.Errorf("second run (planned):\n got %+v\nwant %+v", again, want)
	}
	onlyDW, err := pl.Compute("bfloat16", dy, x, w, [3]bool{false, true, false})
	if err != nil {
		t.Fatal(err)
	}
	want = &ConvGradCUDACalls{Data: CUDNNCall{Algo: -1}, Filter: CUDNNCall{Calls: 1, Algo: 1, Math: "TENSOR_OP_MATH", Workspace: 16384},
		Allocations: []int{1 << 30, 16384}, Frees: 2, Searches: 1}
	if !reflect.DeepEqual(onlyDW, want) {
		t.Errorf("bfloat16, dW only:\n got %+v\nwant %+v", onlyDW, want)
	}
	heur, err := NewConvGradCUDAPlanner(attrs, ConvGradCUDASettings{AllowTF32: true})
	if err != nil {
		t.Fatal(err)
	}
	defer heur.Close()
	got, err := heur.Compute("float32", dy, x, w, [3]bool{true, false, true})
	if err != nil {
		t.Fatal(err)
	}
	want = &ConvGradCUDACalls{Data: CUDNNCall{Calls: 1, Algo: 1, Math: "DEFAULT_MATH", Workspace: 8192}, Filter: CUDNNCall{Algo: -1},
		BiasCalls: 1, Allocations: []int{8192}, Frees: 1, Searches: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("heuristic, TF32, dX and dB:\n got %+v\nwant %+v", got, want)
	}
}
