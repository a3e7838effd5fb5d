package runtime

// The ConvGrad custom operator (domain com.segtune, see onnx/grad/
// convclass.go for its contract): its CPU and cuDNN kernels are C files of
// this package (convgrad_*.c); this file registers them on a session.

/*
#include <stdlib.h>
#include "convgrad.h"
#include "onnxruntime_c_api.h"

typedef struct cg_registration cg_registration;
cg_registration *cg_register(const OrtApi *api, OrtSessionOptions *so, const char *domain, const char *name, int cpu,
                             int cuda, const char *ep, int allow_tf32, int exhaustive, size_t max_workspace,
                             char **err);
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

// The workspace an exhaustive algorithm search times the algorithms with
// (halved until an allocation succeeds): the CUDA provider's own choice,
// by its option cudnn_conv_use_max_workspace (default 1), between a large
// one and its 32 MiB AlgoSearchWorkspaceSize.
const (
	convGradMaxWorkspace   = 1 << 30
	convGradSmallWorkspace = 32 << 20
)

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
// CUDA provider from its options: use_tf32 (default on),
// cudnn_conv_algo_search (EXHAUSTIVE, the default, or HEURISTIC/DEFAULT)
// and cudnn_conv_use_max_workspace (default on), which sizes the search's
// workspace.
func convGradCUDASettings(opts map[string]string) (tf32, exhaustive bool, searchWorkspace int, err error) {
	flag := func(key string) (bool, error) {
		switch v := opts[key]; v {
		case "", "1", "true", "True":
			return true, nil
		case "0", "false", "False":
			return false, nil
		default:
			return false, fmt.Errorf("CUDA option %s=%q: want 0 or 1", key, v)
		}
	}
	if tf32, err = flag("use_tf32"); err != nil {
		return false, false, 0, err
	}
	maxWS, err := flag("cudnn_conv_use_max_workspace")
	if err != nil {
		return false, false, 0, err
	}
	searchWorkspace = convGradSmallWorkspace
	if maxWS {
		searchWorkspace = convGradMaxWorkspace
	}
	exhaustive = true
	if v, ok := opts["cudnn_conv_algo_search"]; ok {
		switch strings.ToUpper(v) {
		case "EXHAUSTIVE":
		case "HEURISTIC", "DEFAULT":
			exhaustive = false
		default:
			return false, false, 0, fmt.Errorf("CUDA option cudnn_conv_algo_search=%q: want EXHAUSTIVE, HEURISTIC or DEFAULT", v)
		}
	}
	return tf32, exhaustive, searchWorkspace, nil
}

// registerConvGrad adds the ConvGrad kernels to so: the CPU kernel when cpu
// is set, the cuDNN kernel of provider ep (with opts' TF32 and search
// settings) when cuda is set. The error of a CUDA registration names what
// is missing (cuDNN 9) in one line.
func registerConvGrad(so *ort.SessionOptions, cpu, cuda bool, ep string, cudaOpts map[string]string) (*convGradRegistration, error) {
	if !cpu && !cuda {
		return nil, nil
	}
	tf32, exhaustive, searchWS, err := convGradCUDASettings(cudaOpts)
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
	cep, cdomain, cname := C.CString(ep), C.CString(ConvGradDomain), C.CString(ConvGradOp)
	defer C.free(unsafe.Pointer(cep))
	defer C.free(unsafe.Pointer(cdomain))
	defer C.free(unsafe.Pointer(cname))
	var cerr *C.char
	r := C.cg_register(api, p, cdomain, cname, cBool(cpu), cBool(cuda), cep, cBool(tf32), cBool(exhaustive), C.size_t(searchWS), &cerr)
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
