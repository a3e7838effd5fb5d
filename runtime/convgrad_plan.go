package runtime

// A test-support entry point into the cuDNN kernel of ConvGrad: it runs the
// kernel's own planning code (descriptors, algorithm choice, the per-shape
// cache) against a fake cuDNN table that records every descriptor setting,
// so that a machine without a GPU can check what the kernel would ask cuDNN
// for. It lives in a non-test file because test files cannot use cgo.

/*
#include <stdlib.h>
#include "convgrad.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ConvGradAttrs are a ConvGrad node's attributes; a nil slice (or Group 0)
// is an absent attribute, which takes ONNX Conv's default.
type ConvGradAttrs struct {
	KernelShape, Strides, Dilations, Pads []int64
	Group                                 int64
}

// ConvGradCUDASettings are the session-level settings of the cuDNN kernel,
// which a session reads from its CUDA provider options (use_tf32 and
// cudnn_conv_algo_search).
type ConvGradCUDASettings struct {
	AllowTF32  bool
	Exhaustive bool
}

// CUDNNTensor is what the kernel set on a cuDNN tensor descriptor.
type CUDNNTensor struct {
	DataType string // FLOAT, HALF, BFLOAT16, DOUBLE
	Dims     []int
	Strides  []int
}

// CUDNNFilter is what the kernel set on a cuDNN filter descriptor.
type CUDNNFilter struct {
	DataType string
	Format   string // NCHW
	Dims     []int
}

// CUDNNConvolution is what the kernel set on its convolution descriptor.
type CUDNNConvolution struct {
	Pads, Strides, Dilations []int
	Groups                   int
	Mode                     string // CROSS_CORRELATION or CONVOLUTION
	ComputeType              string
}

// ConvGradCUDAPlan is the cuDNN kernel's plan for one shape: X's
// descriptor serves dX, W's serves dW, and DB ([1, Co, 1, 1]) dB.
type ConvGradCUDAPlan struct {
	DY, X, DB CUDNNTensor
	W         CUDNNFilter
	Conv      CUDNNConvolution
	// The chosen algorithms (cuDNN's enumeration values), the math type
	// each runs under (DEFAULT_MATH, TENSOR_OP_MATH, FMA_MATH) and its
	// workspace; only those of the outputs asked for are set.
	DataAlgo, FilterAlgo           int
	DataMath, FilterMath           string
	DataWorkspace, FilterWorkspace int
	// Searches counts the algorithm searches this call ran (0 for a shape
	// planned before); Finds those that were exhaustive (timed);
	// SearchMath is the math type the descriptor held during the last
	// search ("" for none), which bounds what cuDNN may choose.
	Searches, Finds int
	SearchMath      string
}

// ConvGradCUDAPlanner is one cuDNN kernel's planner on the fake table: the
// plans it caches persist across Plan calls, as a kernel's do across runs.
type ConvGradCUDAPlanner struct {
	p *C.cg_planner
}

// fakeMu serializes use of the fake table, whose counters are global.
var fakeMu sync.Mutex

// NewConvGradCUDAPlanner checks the attributes as the kernel does at its
// creation and returns a planner for them.
func NewConvGradCUDAPlanner(a ConvGradAttrs, s ConvGradCUDASettings) (*ConvGradCUDAPlanner, error) {
	var attrs C.cg_attrs
	if err := setConvGradAttrs(&attrs, a); err != nil {
		return nil, err
	}
	p := (*C.cg_planner)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cg_planner{}))))
	if p == nil {
		return nil, errors.New("out of memory")
	}
	p.t = C.cg_fake_table()
	p.a = attrs
	p.s.allow_tf32 = cBool(s.AllowTF32)
	p.s.exhaustive = cBool(s.Exhaustive)
	p.s.max_workspace = convGradMaxWorkspace
	return &ConvGradCUDAPlanner{p: p}, nil
}

func setConvGradAttrs(out *C.cg_attrs, a ConvGradAttrs) error {
	arr := func(v []int64) (*C.int64_t, C.size_t, func()) {
		if v == nil {
			return nil, 0, func() {}
		}
		m := cInt64s(v)
		return m, C.size_t(len(v)), func() { C.free(unsafe.Pointer(m)) }
	}
	k, nk, fk := arr(a.KernelShape)
	defer fk()
	s, ns, fs := arr(a.Strides)
	defer fs()
	d, nd, fd := arr(a.Dilations)
	defer fd()
	p, np, fp := arr(a.Pads)
	defer fp()
	var g *C.int64_t
	group := C.int64_t(a.Group)
	if a.Group != 0 {
		g = &group
	}
	var msg [C.CG_ERR_LEN]C.char
	if C.cg_attrs_set(out, k, nk, s, ns, d, nd, p, np, g, &msg[0]) != 0 {
		return fmt.Errorf("%s: %s", ConvGradOp, C.GoString(&msg[0]))
	}
	return nil
}

// Plan plans the kernel's cuDNN calls for inputs dY, X and W of the given
// shapes and element type ("float32", "float16" or "bfloat16", the types
// the cuDNN kernel is registered for), computing dX and dW as asked (dB
// needs no plan).
func (pl *ConvGradCUDAPlanner) Plan(elem string, dy, x, w []int64, wantDX, wantDW bool) (*ConvGradCUDAPlan, error) {
	dims, dt, err := pl.check(elem, dy, x, w)
	if err != nil {
		return nil, err
	}
	var msg [C.CG_ERR_LEN]C.char
	fakeMu.Lock()
	defer fakeMu.Unlock()
	C.cg_fake_reset()
	var h C.cg_handle // the fake needs no handle
	// Non-nil search buffers, as the compute path passes: an exhaustive
	// planner takes the Find…AlgorithmEx path (the fake reads no memory).
	var buf C.cg_search_buffers
	plan := C.cg_plan_get(pl.p, h, &dims, dt, cBool(wantDX), cBool(wantDW), &buf, &msg[0])
	if plan == nil {
		return nil, fmt.Errorf("%s: %s", ConvGradOp, C.GoString(&msg[0]))
	}
	out := &ConvGradCUDAPlan{
		DY:         fakeTensor(plan.dy_desc),
		X:          fakeTensor(plan.x_desc),
		DB:         fakeTensor(plan.db_desc),
		Searches:   int(C.cg_fake_searches()),
		Finds:      int(C.cg_fake_finds()),
		DataAlgo:   -1,
		FilterAlgo: -1,
	}
	if m := C.cg_fake_search_math(); m >= 0 {
		out.SearchMath = cudnnMathName(m)
	}
	f := (*C.cg_fake_desc)(plan.w_desc)
	out.W = CUDNNFilter{DataType: cudnnTypeName(f.dtype), Format: "NCHW", Dims: ints(f.dims[:f.nb])}
	if f.format != C.CG_CUDNN_TENSOR_NCHW {
		out.W.Format = fmt.Sprint(int(f.format))
	}
	c := (*C.cg_fake_desc)(plan.conv_desc)
	out.Conv = CUDNNConvolution{
		Pads: ints(c.pads[:c.nb]), Strides: ints(c.cstrides[:c.nb]), Dilations: ints(c.dilations[:c.nb]),
		Groups: int(c.groups), Mode: "CONVOLUTION", ComputeType: cudnnTypeName(c.compute),
	}
	if c.mode == C.CG_CUDNN_CROSS_CORRELATION {
		out.Conv.Mode = "CROSS_CORRELATION"
	}
	if plan.searched_data != 0 {
		out.DataAlgo, out.DataMath, out.DataWorkspace = int(plan.data_algo), cudnnMathName(plan.data_math), int(plan.data_ws)
	}
	if plan.searched_filter != 0 {
		out.FilterAlgo, out.FilterMath, out.FilterWorkspace = int(plan.filter_algo), cudnnMathName(plan.filter_math), int(plan.filter_ws)
	}
	return out, nil
}

// check checks the shapes as the kernel does at each run and maps the
// element type to cuDNN's.
func (pl *ConvGradCUDAPlanner) check(elem string, dy, x, w []int64) (C.cg_dims, C.int, error) {
	var dims C.cg_dims
	if pl.p == nil {
		return dims, 0, errors.New("planner closed")
	}
	dtype := map[string]C.int{"float32": C.CG_CUDNN_DATA_FLOAT, "float16": C.CG_CUDNN_DATA_HALF, "bfloat16": C.CG_CUDNN_DATA_BFLOAT16}
	dt, ok := dtype[elem]
	if !ok {
		return dims, 0, fmt.Errorf("%s on CUDA: element type %q: want float32, float16 or bfloat16", ConvGradOp, elem)
	}
	var msg [C.CG_ERR_LEN]C.char
	cdy, cx, cw := cInt64s(dy), cInt64s(x), cInt64s(w)
	defer C.free(unsafe.Pointer(cdy))
	defer C.free(unsafe.Pointer(cx))
	defer C.free(unsafe.Pointer(cw))
	if C.cg_dims_check(&pl.p.a, cdy, C.size_t(len(dy)), cx, C.size_t(len(x)), cw, C.size_t(len(w)), &dims, &msg[0]) != 0 {
		return dims, 0, fmt.Errorf("%s: %s", ConvGradOp, C.GoString(&msg[0]))
	}
	return dims, dt, nil
}

// CUDNNCall is what one kind of cuDNN backward call received in a Compute:
// how many calls, and the last one's algorithm, convolution math type and
// workspace size.
type CUDNNCall struct {
	Calls, Algo int
	Math        string
	Workspace   int
}

// ConvGradCUDACalls records one run of the cuDNN kernel's compute path on
// the fake table.
type ConvGradCUDACalls struct {
	Data, Filter CUDNNCall
	BiasCalls    int
	// Allocations are the workspace sizes asked of the allocator, in order
	// (an exhaustive search's first); Frees counts the buffers given back.
	Allocations []int
	Frees       int
	// Searches counts the algorithm searches the run made.
	Searches int
}

// Compute runs the cuDNN kernel's compute path (planning, workspace,
// the backward-data, backward-filter and backward-bias calls for the
// outputs asked for: dX, dW, dB) on the fake table and a recording
// allocator.
func (pl *ConvGradCUDAPlanner) Compute(elem string, dy, x, w []int64, outputs [3]bool) (*ConvGradCUDACalls, error) {
	dims, dt, err := pl.check(elem, dy, x, w)
	if err != nil {
		return nil, err
	}
	fakeMu.Lock()
	defer fakeMu.Unlock()
	C.cg_fake_reset()
	var msg [C.CG_ERR_LEN]C.char
	var allocs [16]C.size_t
	var nallocs, frees C.int
	if C.cg_fake_compute(pl.p, &dims, dt, cBool(outputs[0]), cBool(outputs[1]), cBool(outputs[2]), &allocs[0], &nallocs, &frees, &msg[0]) != 0 {
		return nil, fmt.Errorf("%s: %s", ConvGradOp, C.GoString(&msg[0]))
	}
	var data, filter C.cg_fake_call
	var bias C.int
	C.cg_fake_calls(&data, &filter, &bias)
	call := func(c C.cg_fake_call) CUDNNCall {
		if c.calls == 0 {
			return CUDNNCall{Algo: -1}
		}
		return CUDNNCall{Calls: int(c.calls), Algo: int(c.algo), Math: cudnnMathName(c.math), Workspace: int(c.ws_size)}
	}
	out := &ConvGradCUDACalls{Data: call(data), Filter: call(filter), BiasCalls: int(bias), Frees: int(frees), Searches: int(C.cg_fake_searches())}
	for _, a := range allocs[:nallocs] {
		out.Allocations = append(out.Allocations, int(a))
	}
	return out, nil
}

// Close frees the planner's plans and descriptors.
func (pl *ConvGradCUDAPlanner) Close() {
	if pl.p == nil {
		return
	}
	fakeMu.Lock()
	C.cg_planner_free(pl.p)
	fakeMu.Unlock()
	C.free(unsafe.Pointer(pl.p))
	pl.p = nil
}

// PlanConvGradCUDA plans one ConvGrad node (its attributes, input shapes
// and element type) with a fresh planner, computing dX and dW.
func PlanConvGradCUDA(a ConvGradAttrs, s ConvGradCUDASettings, elem string, dy, x, w []int64) (*ConvGradCUDAPlan, error) {
	pl, err := NewConvGradCUDAPlanner(a, s)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	return pl.Plan(elem, dy, x, w, true, true)
}

func cInt64s(v []int64) *C.int64_t {
	m := C.malloc(C.size_t(8 * max(len(v), 1)))
	copy(unsafe.Slice((*int64)(m), len(v)), v)
	return (*C.int64_t)(m)
}

func fakeTensor(d C.cg_desc) CUDNNTensor {
	f := (*C.cg_fake_desc)(d)
	return CUDNNTensor{DataType: cudnnTypeName(f.dtype), Dims: ints(f.dims[:f.nb]), Strides: ints(f.strides[:f.nb])}
}

func ints(v []C.int) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func cudnnTypeName(t C.int) string {
	switch t {
	case C.CG_CUDNN_DATA_FLOAT:
		return "FLOAT"
	case C.CG_CUDNN_DATA_DOUBLE:
		return "DOUBLE"
	case C.CG_CUDNN_DATA_HALF:
		return "HALF"
	case C.CG_CUDNN_DATA_BFLOAT16:
		return "BFLOAT16"
	}
	return fmt.Sprint(int(t))
}

func cudnnMathName(m C.int) string {
	switch m {
	case C.CG_CUDNN_DEFAULT_MATH:
		return "DEFAULT_MATH"
	case C.CG_CUDNN_TENSOR_OP_MATH:
		return "TENSOR_OP_MATH"
	case C.CG_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
		return "TENSOR_OP_MATH_ALLOW_CONVERSION"
	case C.CG_CUDNN_FMA_MATH:
		return "FMA_MATH"
	}
	return fmt.Sprint(int(m))
}
