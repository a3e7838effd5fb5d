package runtime

// Device-resident tensors and IO binding: the parts of ONNX Runtime's C API
// (≥ 1.23) that keep a training loop's state in the memory of the session's
// execution provider — on a GPU, its own memory — so that a step moves only
// what Go reads (the loss, a norm) across the bus. onnxruntime_go v1.27.0
// wraps none of it: tensors there are Go slices, which a CUDA session copies
// in and out on every Run.

/*
#cgo CFLAGS: -I${SRCDIR}/ortcapi
#include <stdlib.h>
#include <string.h>
#include "onnxruntime_c_api.h"

static char *dv_error(const OrtApi *api, OrtStatus *s) {
	if (s == NULL) return NULL;
	char *m = strdup(api->GetErrorMessage(s));
	api->ReleaseStatus(s);
	return m;
}

// dv_input_memory returns the memory ONNX Runtime wants input i of the
// session in (owned by the session) and its device type.
static char *dv_input_memory(const OrtApi *api, OrtSession *s, size_t i, size_t n,
                             const OrtMemoryInfo **info, int *gpu) {
	const OrtMemoryInfo **infos = calloc(n, sizeof(*infos));
	char *err = dv_error(api, api->SessionGetMemoryInfoForInputs(s, infos, n));
	if (err == NULL) {
		*info = infos[i];
		OrtMemoryInfoDeviceType t = OrtMemoryInfoDeviceType_CPU;
		if (*info != NULL) api->MemoryInfoGetDeviceType(*info, &t);
		*gpu = t != OrtMemoryInfoDeviceType_CPU;
	}
	free(infos);
	return err;
}

static char *dv_allocator(const OrtApi *api, OrtSession *s, const OrtMemoryInfo *info, OrtAllocator **out) {
	return dv_error(api, api->CreateAllocator(s, info, out));
}

static void dv_release_allocator(const OrtApi *api, OrtAllocator *a) { api->ReleaseAllocator(a); }

static char *dv_alloc(const OrtApi *api, OrtAllocator *a, size_t n, void **out) {
	return dv_error(api, api->AllocatorAlloc(a, n, out));
}

static void dv_free(const OrtApi *api, OrtAllocator *a, void *p) {
	free(dv_error(api, api->AllocatorFree(a, p)));
}

static char *dv_view(const OrtApi *api, const OrtMemoryInfo *info, void *p, size_t bytes,
                     const int64_t *shape, size_t rank, int type, OrtValue **out) {
	return dv_error(api, api->CreateTensorWithDataAsOrtValue(info, p, bytes, shape, rank,
	                                                         (ONNXTensorElementDataType)type, out));
}

static void dv_release_value(const OrtApi *api, OrtValue *v) { api->ReleaseValue(v); }

// dv_copy copies between a device tensor and host memory (Go's, used only
// for the length of this call) of the same shape and type: CopyTensors
// through the provider's data transfer for device memory, memcpy for CPU
// memory (the CPU provider's tensors need no transfer).
static char *dv_copy(const OrtApi *api, OrtEnv *env, OrtValue *dev, int gpu, void *dev_ptr, void *host,
                     size_t bytes, const int64_t *shape, size_t rank, int type, int to_device) {
	if (!gpu) {
		if (to_device) memcpy(dev_ptr, host, bytes);
		else memcpy(host, dev_ptr, bytes);
		return NULL;
	}
	OrtMemoryInfo *cpu = NULL;
	char *err = dv_error(api, api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &cpu));
	if (err != NULL) return err;
	OrtValue *h = NULL;
	err = dv_error(api, api->CreateTensorWithDataAsOrtValue(cpu, host, bytes, shape, rank,
	                                                        (ONNXTensorElementDataType)type, &h));
	if (err == NULL) {
		const OrtValue *src = to_device ? h : dev;
		OrtValue *dst = to_device ? dev : h;
		err = dv_error(api, api->CopyTensors(env, &src, &dst, NULL, 1));
		api->ReleaseValue(h);
	}
	api->ReleaseMemoryInfo(cpu);
	return err;
}

static char *dv_binding(const OrtApi *api, OrtSession *s, OrtIoBinding **out) {
	return dv_error(api, api->CreateIoBinding(s, out));
}

static void dv_release_binding(const OrtApi *api, OrtIoBinding *b) { api->ReleaseIoBinding(b); }

static char *dv_bind(const OrtApi *api, OrtIoBinding *b, const char *name, OrtValue *v, int output) {
	if (output) return dv_error(api, api->BindOutput(b, name, v));
	return dv_error(api, api->BindInput(b, name, v));
}

static char *dv_run(const OrtApi *api, OrtSession *s, OrtRunOptions *ro, OrtIoBinding *b) {
	return dv_error(api, api->RunWithBinding(s, ro, b));
}

static char *dv_run_options(const OrtApi *api, OrtRunOptions **out) {
	return dv_error(api, api->CreateRunOptions(out));
}

static char *dv_run_config(const OrtApi *api, OrtRunOptions *ro, const char *key, const char *value) {
	return dv_error(api, api->AddRunConfigEntry(ro, key, value));
}

// dv_run_config_get returns the entry's value (owned by ro) or NULL.
static const char *dv_run_config_get(const OrtApi *api, OrtRunOptions *ro, const char *key) {
	return api->GetRunConfigEntry(ro, key);
}

static void dv_release_run_options(const OrtApi *api, OrtRunOptions *ro) { api->ReleaseRunOptions(ro); }
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// ElemType is a tensor element type in ONNX's numbering.
type ElemType int

// The element types device tensors hold.
const (
	Float32 ElemType = C.ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
	Int64   ElemType = C.ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
)

// Size is the element's size in bytes.
func (t ElemType) Size() int {
	switch t {
	case Float32:
		return 4
	case Int64:
		return 8
	}
	return 0
}

func (t ElemType) String() string {
	switch t {
	case Float32:
		return "float32"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("element type %d", int(t))
}

// Memory is where a session keeps one of its inputs: the CPU's memory, or
// the device memory of the provider the input's consumers run on. Buffers
// allocated from it can be bound to that session and to any other session
// on the same device; they must be freed before the session that made the
// Memory is closed, since its allocator is the session's.
type Memory struct {
	// GPU reports device memory (false: the CPU's).
	GPU   bool
	api   *C.OrtApi
	env   *C.OrtEnv
	info  *C.OrtMemoryInfo
	alloc *C.OrtAllocator
}

// InputMemory returns the memory that the session wants its input name in.
func (s *Session) InputMemory(name string) (*Memory, error) {
	i := s.InputIndex(name)
	if i < 0 {
		return nil, fmt.Errorf("model has no input %q", name)
	}
	api, env, err := shimHandles()
	if err != nil {
		return nil, err
	}
	cs, err := s.ortSession()
	if err != nil {
		return nil, err
	}
	m := &Memory{api: api, env: env}
	var gpu C.int
	if err := cError(C.dv_input_memory(api, cs, C.size_t(i), C.size_t(len(s.Inputs)), &m.info, &gpu)); err != nil {
		return nil, fmt.Errorf("memory of input %q: %w", name, err)
	}
	if m.info == nil {
		return nil, fmt.Errorf("memory of input %q: ONNX Runtime does not say", name)
	}
	m.GPU = gpu != 0
	if err := cError(C.dv_allocator(api, cs, m.info, &m.alloc)); err != nil {
		return nil, fmt.Errorf("allocator for input %q: %w", name, err)
	}
	return m, nil
}

// Close releases the allocator (not the memory of buffers still allocated).
func (m *Memory) Close() {
	if m.alloc != nil {
		C.dv_release_allocator(m.api, m.alloc)
		m.alloc = nil
	}
}

// Buffer is one allocation of device memory; DeviceTensors are views of it.
type Buffer struct {
	mem   *Memory
	ptr   unsafe.Pointer
	bytes int
}

// Alloc allocates bytes of m.
func (m *Memory) Alloc(bytes int) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("allocating %d bytes", bytes)
	}
	var p unsafe.Pointer
	if err := cError(C.dv_alloc(m.api, m.alloc, C.size_t(bytes), &p)); err != nil {
		return nil, fmt.Errorf("allocating %d bytes of %s memory: %w", bytes, m.kind(), err)
	}
	return &Buffer{mem: m, ptr: p, bytes: bytes}, nil
}

func (m *Memory) kind() string {
	if m.GPU {
		return "device"
	}
	return "CPU"
}

// Free returns the buffer's memory; its tensors must not be used after.
func (b *Buffer) Free() {
	if b.ptr != nil {
		C.dv_free(b.mem.api, b.mem.alloc, b.ptr)
		b.ptr = nil
	}
}

// DeviceTensor is a tensor that lives in a Buffer, at a byte offset.
type DeviceTensor struct {
	Shape []int64
	Type  ElemType
	buf   *Buffer
	off   int
	v     *C.OrtValue
}

// Tensor returns a view of the buffer at byte offset off with the given
// type and shape. The view must lie inside the buffer; offsets aligned to
// 256 bytes keep vectorised kernels on their fast paths.
func (b *Buffer) Tensor(t ElemType, off int, shape []int64) (*DeviceTensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	bytes := n * t.Size()
	if t.Size() == 0 || off < 0 || off+bytes > b.bytes {
		return nil, fmt.Errorf("%s tensor %v at byte %d does not fit a buffer of %d bytes", t, shape, off, b.bytes)
	}
	d := &DeviceTensor{Shape: append([]int64(nil), shape...), Type: t, buf: b, off: off}
	var cshape *C.int64_t
	if len(shape) > 0 {
		cshape = (*C.int64_t)(unsafe.Pointer(&d.Shape[0]))
	}
	p := unsafe.Add(b.ptr, off)
	if err := cError(C.dv_view(b.mem.api, b.mem.info, p, C.size_t(bytes), cshape, C.size_t(len(shape)), C.int(t), &d.v)); err != nil {
		return nil, fmt.Errorf("%s tensor %v: %w", t, shape, err)
	}
	return d, nil
}

// NewTensor allocates a buffer holding exactly one tensor.
func (m *Memory) NewTensor(t ElemType, shape []int64) (*DeviceTensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	b, err := m.Alloc(max(n*t.Size(), 1))
	if err != nil {
		return nil, err
	}
	d, err := b.Tensor(t, 0, shape)
	if err != nil {
		b.Free()
		return nil, err
	}
	return d, nil
}

// Release drops the view (not the buffer's memory).
func (d *DeviceTensor) Release() {
	if d.v != nil {
		C.dv_release_value(d.buf.mem.api, d.v)
		d.v = nil
	}
}

// Free drops the view and frees its buffer: for tensors made by NewTensor.
func (d *DeviceTensor) Free() {
	d.Release()
	d.buf.Free()
}

// Len is the tensor's element count.
func (d *DeviceTensor) Len() int {
	n, _ := elems(d.Shape)
	return n
}

// Upload copies host data (a []float32 or []int64 of d's length) into d.
func (d *DeviceTensor) Upload(host any) error { return d.copy(host, true) }

// Download copies d into host data (a []float32 or []int64 of d's length).
func (d *DeviceTensor) Download(host any) error { return d.copy(host, false) }

func (d *DeviceTensor) copy(host any, toDevice bool) error {
	var p unsafe.Pointer
	var n int
	var t ElemType
	switch h := host.(type) {
	case []float32:
		n, t = len(h), Float32
		if n > 0 {
			p = unsafe.Pointer(&h[0])
		}
	case []int64:
		n, t = len(h), Int64
		if n > 0 {
			p = unsafe.Pointer(&h[0])
		}
	default:
		return fmt.Errorf("copying %T: want []float32 or []int64", host)
	}
	if t != d.Type || n != d.Len() {
		return fmt.Errorf("copying %d %s values to or from a %s tensor %v", n, t, d.Type, d.Shape)
	}
	if n == 0 {
		return nil
	}
	if d.v == nil || d.buf.ptr == nil {
		return errors.New("copying to or from a released device tensor")
	}
	var cshape *C.int64_t
	if len(d.Shape) > 0 {
		cshape = (*C.int64_t)(unsafe.Pointer(&d.Shape[0]))
	}
	m := d.buf.mem
	dir := C.int(0)
	if toDevice {
		dir = 1
	}
	gpu := C.int(0)
	if m.GPU {
		gpu = 1
	}
	return cError(C.dv_copy(m.api, m.env, d.v, gpu, unsafe.Add(d.buf.ptr, d.off), p, C.size_t(n*t.Size()),
		cshape, C.size_t(len(d.Shape)), C.int(t), dir))
}

func elems(shape []int64) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<62)/int(d)) {
			return 0, fmt.Errorf("bad tensor shape %v", shape)
		}
		n *= int(d)
	}
	return n, nil
}

// Binding fixes a session's inputs and outputs to device tensors, so that
// RunBinding moves no data between host and device: ONNX Runtime reads the
// bound inputs where they are and writes the bound outputs into their
// memory. Outputs left unbound are not computed unless a bound one needs
// them.
type Binding struct {
	s   *Session
	api *C.OrtApi
	b   *C.OrtIoBinding
	// ro holds the run-option config entries every Run passes (nil: none).
	ro *C.OrtRunOptions
}

// NewBinding returns an empty binding for the session.
func (s *Session) NewBinding() (*Binding, error) {
	api, _, err := shimHandles()
	if err != nil {
		return nil, err
	}
	cs, err := s.ortSession()
	if err != nil {
		return nil, err
	}
	bd := &Binding{s: s, api: api}
	if err := cError(C.dv_binding(api, cs, &bd.b)); err != nil {
		return nil, err
	}
	return bd, nil
}

// Input binds the session input name to d.
func (bd *Binding) Input(name string, d *DeviceTensor) error {
	if bd.s.InputIndex(name) < 0 {
		return fmt.Errorf("binding: model has no input %q", name)
	}
	return bd.bind(name, d, false)
}

// Output binds the session output name to d.
func (bd *Binding) Output(name string, d *DeviceTensor) error {
	if bd.s.OutputIndex(name) < 0 {
		return fmt.Errorf("binding: model has no output %q", name)
	}
	return bd.bind(name, d, true)
}

func (bd *Binding) bind(name string, d *DeviceTensor, output bool) error {
	if d == nil || d.v == nil {
		return fmt.Errorf("binding %q to a released tensor", name)
	}
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	out := C.int(0)
	if output {
		out = 1
	}
	if err := cError(C.dv_bind(bd.api, bd.b, c, d.v, out)); err != nil {
		return fmt.Errorf("binding %q: %w", name, err)
	}
	return nil
}

// SetRunConfig adds a run-option config entry (ONNX Runtime's
// AddRunConfigEntry) that every later Run of the binding passes: e.g.
// "gpu_graph_id", which names the CUDA graph a session with
// enable_cuda_graph captures and replays for this binding's fixed
// addresses.
func (bd *Binding) SetRunConfig(key, value string) error {
	if bd.b == nil {
		return errors.New("binding is closed")
	}
	if bd.ro == nil {
		if err := cError(C.dv_run_options(bd.api, &bd.ro)); err != nil {
			return fmt.Errorf("run options: %w", err)
		}
	}
	k, v := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(k))
	defer C.free(unsafe.Pointer(v))
	if err := cError(C.dv_run_config(bd.api, bd.ro, k, v)); err != nil {
		return fmt.Errorf("run option %s=%s: %w", key, value, err)
	}
	return nil
}

// RunConfig reads back a run-option config entry the binding's runs pass
// (ok false when it has none).
func (bd *Binding) RunConfig(key string) (value string, ok bool) {
	if bd.ro == nil {
		return "", false
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	v := C.dv_run_config_get(bd.api, bd.ro, k)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}

// Run runs the session on the binding with its run options; the bound
// outputs hold the results when it returns.
func (bd *Binding) Run() error {
	cs, err := bd.s.ortSession()
	if err != nil {
		return err
	}
	return cError(C.dv_run(bd.api, cs, bd.ro, bd.b))
}

// Close releases the binding and its run options (not the tensors bound).
func (bd *Binding) Close() {
	if bd.b != nil {
		C.dv_release_binding(bd.api, bd.b)
		bd.b = nil
	}
	if bd.ro != nil {
		C.dv_release_run_options(bd.api, bd.ro)
		bd.ro = nil
	}
}

// ortSession returns the OrtSession behind s. onnxruntime_go keeps it in
// DynamicAdvancedSession's one field, an *AdvancedSession whose first field
// is the OrtSession pointer; checkSessionLayout guards that assumption as
// checkSessionOptionsLayout does for the options.
func (s *Session) ortSession() (*C.OrtSession, error) {
	if s.sess == nil {
		return nil, errors.New("session is closed")
	}
	if err := checkSessionLayout(); err != nil {
		return nil, err
	}
	adv := *(*unsafe.Pointer)(unsafe.Pointer(s.sess))
	if adv == nil {
		return nil, errors.New("session not initialised")
	}
	return *(**C.OrtSession)(adv), nil
}

func checkSessionLayout() error {
	d := reflect.TypeOf(ort.DynamicAdvancedSession{})
	a := reflect.TypeOf(ort.AdvancedSession{})
	if d.NumField() != 1 || d.Field(0).Type != reflect.PointerTo(a) ||
		a.Field(0).Name != "ortSession" || a.Field(0).Type.Kind() != reflect.Pointer || a.Field(0).Offset != 0 {
		return errors.New("onnxruntime_go's session types changed layout; runtime/device.go needs updating")
	}
	return nil
}
