package runtime

// The ConvGrad custom operator (domain com.segtune, see onnx/grad/
// convclass.go for its contract): its CPU and cuDNN kernels are C files of
// this package (convgrad_*.c); this file registers them on a session.

/*
#include <stdlib.h>
#include "convgrad.h"
#include "onnxruntime_c_api.h"

typedef struct cg_registration cg_registration;
cg_registration *cg_register(const OrtApi *api, OrtSessionOptions *so, int cpu, int cuda, const char *ep,
                             int allow_tf32, int exhaustive, size_t max_workspace, char **err);
void cg_unregister(cg_registration *r);
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// The ConvGrad operator's domain and type, as the gradient compiler emits
// them (onnx/grad's ConvGradDomain and ConvGradOp; runtime imports no
// other segtune package).
const (
	ConvGradDomain = "com.segtune"
	ConvGradOp     = "ConvGrad"
)

// cudaLegacyEP is the provider type of the CUDA provider built into ONNX
// Runtime (AppendExecutionProviderCUDA); a plugin EP's is its EP name.
const cudaLegacyEP = "CUDAExecutionProvider"

// convGradMaxWorkspace bounds the workspace an exhaustive algorithm search
// times the algorithms with (the search halves it until an allocation
// succeeds).
const convGradMaxWorkspace = 1 << 30

// convGradRegistration is a session's ConvGrad custom-op domain, which ONNX
// Runtime requires to outlive the session: Session.Close releases it.
type convGradRegistration struct {
	r *C.cg_registration
}

func (r *convGradRegistration) release() {
	if r != nil && r.r != nil {
		C.cg_unregister(r.r)
		r.r = nil
	}
}

// convGradCUDASettings reads the settings the cuDNN kernel shares with the
// CUDA provider from its options: use_tf32 (default on) and
// cudnn_conv_algo_search (EXHAUSTIVE, the default, or HEURISTIC/DEFAULT).
func convGradCUDASettings(opts map[string]string) (tf32, exhaustive bool, err error) {
	tf32, exhaustive = true, true
	if v, ok := opts["use_tf32"]; ok {
		switch v {
		case "1", "true", "True":
			tf32 = true
		case "0", "false", "False":
			tf32 = false
		default:
			return false, false, fmt.Errorf("CUDA option use_tf32=%q: want 0 or 1", v)
		}
	}
	if v, ok := opts["cudnn_conv_algo_search"]; ok {
		switch strings.ToUpper(v) {
		case "EXHAUSTIVE":
			exhaustive = true
		case "HEURISTIC", "DEFAULT":
			exhaustive = false
		default:
			return false, false, fmt.Errorf("CUDA option cudnn_conv_algo_search=%q: want EXHAUSTIVE, HEURISTIC or DEFAULT", v)
		}
	}
	return tf32, exhaustive, nil
}

// registerConvGrad adds the ConvGrad kernels to so: the CPU kernel when cpu
// is set, the cuDNN kernel of provider ep (with opts' TF32 and search
// settings) when cuda is set. The error of a CUDA registration names what
// is missing (cuDNN 9) in one line.
func registerConvGrad(so *ort.SessionOptions, cpu, cuda bool, ep string, cudaOpts map[string]string) (*convGradRegistration, error) {
	if !cpu && !cuda {
		return nil, nil
	}
	tf32, exhaustive, err := convGradCUDASettings(cudaOpts)
	if err != nil {
		return nil, err
	}
	p, err := sessionOptionsPtr(so)
	if err != nil {
		return nil, err
	}
	api, _, err := shimHandles()
	if err != nil {
		return nil, err
	}
	cep := C.CString(ep)
	defer C.free(unsafe.Pointer(cep))
	var cerr *C.char
	r := C.cg_register(api, p, cBool(cpu), cBool(cuda), cep, cBool(tf32), cBool(exhaustive), C.size_t(convGradMaxWorkspace), &cerr)
	if err := cError(cerr); err != nil {
		return nil, fmt.Errorf("registering the %s operator: %w", ConvGradOp, err)
	}
	return &convGradRegistration{r: r}, nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
