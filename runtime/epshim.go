package runtime

// A small cgo shim over the parts of ONNX Runtime's C API that
// onnxruntime_go v1.27.0 does not wrap: the execution-provider devices of
// C API ≥ 22 (GetEpDevices, SessionOptionsAppendExecutionProvider_V2), the
// session's log level, and dlopen(RTLD_GLOBAL) of the CUDA libraries. It
// reaches the ONNX Runtime that onnxruntime_go loaded through the same
// shared object (dlopen of the same path returns the loaded one) and its
// environment through CreateEnv, which hands back the process's one OrtEnv.

/*
#cgo CFLAGS: -I${SRCDIR}/ortcapi
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "onnxruntime_c_api.h"

static const OrtApi *st_api;
static OrtEnv *st_env;

// st_error copies an OrtStatus's message into malloc'd memory and releases
// the status; NULL for success.
static char *st_error(OrtStatus *s) {
	if (s == NULL) return NULL;
	char *m = strdup(st_api->GetErrorMessage(s));
	st_api->ReleaseStatus(s);
	return m;
}

static char *st_init(const char *lib) {
	if (st_api != NULL) return NULL;
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL) h = dlopen(lib, RTLD_NOW);
	if (h == NULL) return strdup(dlerror());
	typedef const OrtApiBase *(*base_fn)(void);
	base_fn base = (base_fn)dlsym(h, "OrtGetApiBase");
	if (base == NULL) return strdup("no OrtGetApiBase in the ONNX Runtime library");
	const OrtApi *api = base()->GetApi(ORT_API_VERSION);
	if (api == NULL) return strdup("the ONNX Runtime library does not offer C API version 24");
	st_api = api;
	OrtEnv *env = NULL;
	char *err = st_error(api->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "segtune", &env));
	if (err != NULL) { st_api = NULL; return err; }
	st_env = env;
	return NULL;
}

// st_handles hands the shim's API table and environment to the other cgo
// files of the package (device.go), whose preambles cannot see these statics.
static void st_handles(const OrtApi **api, OrtEnv **env) { *api = st_api; *env = st_env; }

static char *st_dlopen_global(const char *path) {
	if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) return strdup(dlerror());
	return NULL;
}

static char *st_ep_devices(const OrtEpDevice *const **devs, size_t *n) {
	return st_error(st_api->GetEpDevices(st_env, devs, n));
}

static const OrtEpDevice *st_ep_at(const OrtEpDevice *const *devs, size_t i) { return devs[i]; }
static const char *st_ep_name(const OrtEpDevice *d) { return st_api->EpDevice_EpName(d); }
static const char *st_ep_vendor(const OrtEpDevice *d) { return st_api->EpDevice_EpVendor(d); }
static int st_hw_type(const OrtEpDevice *d) { return (int)st_api->HardwareDevice_Type(st_api->EpDevice_Device(d)); }
static unsigned st_hw_vendor_id(const OrtEpDevice *d) { return st_api->HardwareDevice_VendorId(st_api->EpDevice_Device(d)); }
static unsigned st_hw_device_id(const OrtEpDevice *d) { return st_api->HardwareDevice_DeviceId(st_api->EpDevice_Device(d)); }
static const char *st_hw_vendor(const OrtEpDevice *d) { return st_api->HardwareDevice_Vendor(st_api->EpDevice_Device(d)); }

// st_kv returns the key-value pairs of the hardware device (which=0) or of
// the EP's metadata for it (which=1).
static void st_kv(const OrtEpDevice *d, int which, const char *const **k, const char *const **v, size_t *n) {
	const OrtKeyValuePairs *kv = which == 0 ? st_api->HardwareDevice_Metadata(st_api->EpDevice_Device(d))
	                                        : st_api->EpDevice_EpMetadata(d);
	*n = 0;
	if (kv == NULL) return;
	st_api->GetKeyValuePairs(kv, k, v, n);
}
static const char *st_str_at(const char *const *a, size_t i) { return a[i]; }

static char *st_append_v2(OrtSessionOptions *so, const OrtEpDevice *d,
                          const char *const *keys, const char *const *vals, size_t n) {
	return st_error(st_api->SessionOptionsAppendExecutionProvider_V2(so, st_env, &d, 1, keys, vals, n));
}

// st_providers returns the providers compiled into the library, as a
// malloc'd, newline-separated list.
static char *st_providers(char **err) {
	char **names = NULL;
	int n = 0;
	*err = st_error(st_api->GetAvailableProviders(&names, &n));
	if (*err != NULL) return NULL;
	size_t len = 1;
	for (int i = 0; i < n; i++) len += strlen(names[i]) + 1;
	char *out = malloc(len);
	out[0] = 0;
	for (int i = 0; i < n; i++) { strcat(out, names[i]); strcat(out, "\n"); }
	free(st_error(st_api->ReleaseAvailableProviders(names, n)));
	return out;
}

static char *st_log_severity(OrtSessionOptions *so, int level) {
	return st_error(st_api->SetSessionLogSeverityLevel(so, level));
}
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

var shimMu sync.Mutex

// cError turns a malloc'd C message into a Go error (nil for NULL).
func cError(m *C.char) error {
	if m == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(m))
	return errors.New(C.GoString(m))
}

// shimInit connects the shim to the loaded ONNX Runtime; Init must have run.
func shimInit() error {
	lib := LibraryPath()
	if lib == "" {
		return errors.New("ONNX Runtime not loaded")
	}
	shimMu.Lock()
	defer shimMu.Unlock()
	c := C.CString(lib)
	defer C.free(unsafe.Pointer(c))
	if err := cError(C.st_init(c)); err != nil {
		return fmt.Errorf("ONNX Runtime C API at %s: %w", lib, err)
	}
	return nil
}

// shimHandles returns ONNX Runtime's C API table and the process's
// environment, connecting the shim first.
func shimHandles() (*C.OrtApi, *C.OrtEnv, error) {
	if err := shimInit(); err != nil {
		return nil, nil, err
	}
	var api *C.OrtApi
	var env *C.OrtEnv
	C.st_handles(&api, &env)
	return api, env, nil
}

// dlopenGlobal loads a shared library with RTLD_NOW|RTLD_GLOBAL, so that
// libraries loaded later that need its soname find it.
func dlopenGlobal(path string) error {
	c := C.CString(path)
	defer C.free(unsafe.Pointer(c))
	return cError(C.st_dlopen_global(c))
}

// EPDevice is one (execution provider, hardware device) pair that ONNX
// Runtime offers (OrtEpDevice).
type EPDevice struct {
	EP       string            `json:"ep"`
	EPVendor string            `json:"ep_vendor"`
	Type     string            `json:"type"` // "cpu", "gpu" or "npu"
	Vendor   string            `json:"vendor"`
	VendorID uint32            `json:"vendor_id"`
	DeviceID uint32            `json:"device_id"`
	Metadata map[string]string `json:"metadata,omitempty"`
	EPOpts   map[string]string `json:"ep_metadata,omitempty"`
	index    int
}

// EPDevices lists the execution-provider devices of the loaded ONNX Runtime:
// the CPU provider's, and those of every registered provider library.
func EPDevices() ([]EPDevice, error) {
	if err := shimInit(); err != nil {
		return nil, err
	}
	shimMu.Lock()
	defer shimMu.Unlock()
	devs, n, err := epDeviceList()
	if err != nil {
		return nil, err
	}
	out := make([]EPDevice, n)
	for i := 0; i < n; i++ {
		d := C.st_ep_at(devs, C.size_t(i))
		e := EPDevice{
			EP:       C.GoString(C.st_ep_name(d)),
			EPVendor: C.GoString(C.st_ep_vendor(d)),
			Vendor:   C.GoString(C.st_hw_vendor(d)),
			VendorID: uint32(C.st_hw_vendor_id(d)),
			DeviceID: uint32(C.st_hw_device_id(d)),
			Metadata: kvPairs(d, 0),
			EPOpts:   kvPairs(d, 1),
			index:    i,
		}
		switch C.st_hw_type(d) {
		case C.OrtHardwareDeviceType_CPU:
			e.Type = "cpu"
		case C.OrtHardwareDeviceType_GPU:
			e.Type = "gpu"
		case C.OrtHardwareDeviceType_NPU:
			e.Type = "npu"
		default:
			e.Type = "other"
		}
		out[i] = e
	}
	return out, nil
}

// epDeviceList calls GetEpDevices; shimMu must be held.
func epDeviceList() (**C.OrtEpDevice, int, error) {
	var devs **C.OrtEpDevice
	var n C.size_t
	if err := cError(C.st_ep_devices(&devs, &n)); err != nil {
		return nil, 0, err
	}
	return devs, int(n), nil
}

func kvPairs(d *C.OrtEpDevice, which int) map[string]string {
	var k, v **C.char
	var n C.size_t
	C.st_kv(d, C.int(which), &k, &v, &n)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, int(n))
	for i := C.size_t(0); i < n; i++ {
		m[C.GoString(C.st_str_at(k, i))] = C.GoString(C.st_str_at(v, i))
	}
	return m
}

// sessionOptionsPtr returns the OrtSessionOptions behind so. onnxruntime_go
// keeps it in SessionOptions' one unexported field; checkSessionOptionsLayout
// (and its test) guard that assumption.
func sessionOptionsPtr(so *ort.SessionOptions) (*C.OrtSessionOptions, error) {
	if err := checkSessionOptionsLayout(); err != nil {
		return nil, err
	}
	p := *(**C.OrtSessionOptions)(unsafe.Pointer(so))
	if p == nil {
		return nil, errors.New("session options not initialised")
	}
	return p, nil
}

func checkSessionOptionsLayout() error {
	t := reflect.TypeOf(ort.SessionOptions{})
	if t.NumField() != 1 || t.Field(0).Type.Kind() != reflect.Pointer || t.Field(0).Offset != 0 {
		return fmt.Errorf("onnxruntime_go's SessionOptions changed layout (%d fields); runtime/epshim.go needs updating", t.NumField())
	}
	return nil
}

// appendEPDevice appends the provider of dev (from EPDevices) to so with the
// given provider options.
func appendEPDevice(so *ort.SessionOptions, dev EPDevice, opts map[string]string) error {
	p, err := sessionOptionsPtr(so)
	if err != nil {
		return err
	}
	if err := shimInit(); err != nil {
		return err
	}
	shimMu.Lock()
	defer shimMu.Unlock()
	devs, n, err := epDeviceList()
	if err != nil {
		return err
	}
	if dev.index >= n {
		return fmt.Errorf("execution-provider device %d of %s is gone", dev.index, dev.EP)
	}
	d := C.st_ep_at(devs, C.size_t(dev.index))
	if name := C.GoString(C.st_ep_name(d)); name != dev.EP {
		return fmt.Errorf("execution-provider device %d is %s, not %s", dev.index, name, dev.EP)
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ck := C.malloc(C.size_t(len(keys)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	cv := C.malloc(C.size_t(len(keys)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(ck)
	defer C.free(cv)
	ka := unsafe.Slice((**C.char)(ck), len(keys)+1)
	va := unsafe.Slice((**C.char)(cv), len(keys)+1)
	for i, k := range keys {
		ka[i], va[i] = C.CString(k), C.CString(opts[k])
		defer C.free(unsafe.Pointer(ka[i]))
		defer C.free(unsafe.Pointer(va[i]))
	}
	return cError(C.st_append_v2(p, d, (**C.char)(ck), (**C.char)(cv), C.size_t(len(keys))))
}

// AvailableProviders lists the execution providers built into the loaded
// ONNX Runtime library (GetAvailableProviders); plugin providers registered
// from their own libraries show in EPDevices instead.
func AvailableProviders() ([]string, error) {
	if err := shimInit(); err != nil {
		return nil, err
	}
	shimMu.Lock()
	defer shimMu.Unlock()
	var cerr *C.char
	list := C.st_providers(&cerr)
	if err := cError(cerr); err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(list))
	return strings.Fields(C.GoString(list)), nil
}

// setSessionLogSeverity sets the session's own log level (0 verbose … 4
// fatal); at 0 ONNX Runtime logs each node's execution provider.
func setSessionLogSeverity(so *ort.SessionOptions, level int) error {
	p, err := sessionOptionsPtr(so)
	if err != nil {
		return err
	}
	if err := shimInit(); err != nil {
		return err
	}
	return cError(C.st_log_severity(p, C.int(level)))
}
