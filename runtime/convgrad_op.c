// The OrtCustomOp glue of ConvGrad: one custom op per (element type,
// provider), all named ConvGrad in domain com.segtune, whose kernels read
// the node's attributes once and, per call, check the shapes and run the
// CPU loops or the cuDNN calls. Every error is returned as an OrtStatus
// naming the node, never a crash.
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convgrad.h"
#include "onnxruntime_c_api.h"

// ONNX Runtime's CUDA resources (include/onnxruntime/core/providers/
// cuda/cuda_resource.h): resource version 3, ids from cuda_resource_offset.
#define CG_CUDA_RESOURCE_VERSION 3
#define CG_CUDA_RESOURCE_CUDNN_HANDLE 10001

typedef struct {
	OrtCustomOp op;  // first: ONNX Runtime hands back this pointer
	const OrtApi *api;
	ONNXTensorElementDataType elem;
	int cuda;
	char name[64];
	char ep[128];
	cg_cudnn_settings s;
} cg_op;

typedef struct {
	const OrtApi *api;
	const cg_op *op;
	cg_attrs a;
	char node[200];
	pthread_mutex_t mu;  // guards the planner and own handle (ONNX Runtime may run a kernel from several threads)
	cg_planner planner;
	cg_handle own;
} cg_kernel;

static OrtStatus *errorf(const OrtApi *api, const char *node, const char *msg) {
	char buf[CG_ERR_LEN + 256];
	snprintf(buf, sizeof buf, "ConvGrad node %s: %s", node, msg);
	return api->CreateStatus(ORT_INVALID_ARGUMENT, buf);
}

static const char *op_name(const OrtCustomOp *op) { return ((const cg_op *)op)->name; }
static const char *op_ep(const OrtCustomOp *op) {
	const cg_op *o = (const cg_op *)op;
	return o->cuda ? o->ep : NULL;
}
static ONNXTensorElementDataType op_type(const OrtCustomOp *op, size_t i) {
	(void)i;
	return ((const cg_op *)op)->elem;
}
static size_t op_three(const OrtCustomOp *op) {
	(void)op;
	return 3;
}
static OrtCustomOpInputOutputCharacteristic op_input_char(const OrtCustomOp *op, size_t i) {
	(void)op, (void)i;
	return INPUT_OUTPUT_REQUIRED;
}
// Every output is optional: the gradient compiler names only those it needs.
static OrtCustomOpInputOutputCharacteristic op_output_char(const OrtCustomOp *op, size_t i) {
	(void)op, (void)i;
	return INPUT_OUTPUT_OPTIONAL;
}
static OrtMemType op_input_mem(const OrtCustomOp *op, size_t i) {
	(void)op, (void)i;
	return OrtMemTypeDefault;
}
static int op_one(const OrtCustomOp *op) {
	(void)op;
	return 1;
}
static int op_start(const OrtCustomOp *op) {
	(void)op;
	return 1;
}
static int op_end(const OrtCustomOp *op) {
	(void)op;
	return INT_MAX;
}

// infer_shapes gives dX X's type and shape, dW W's and dB [W's first
// dimension], so that ONNX Runtime knows them before the first run.
static OrtStatus *infer_shapes(const OrtCustomOp *op, OrtShapeInferContext *ctx) {
	const OrtApi *api = ((const cg_op *)op)->api;
	OrtTensorTypeAndShapeInfo *x = NULL, *w = NULL, *b = NULL;
	OrtStatus *st = api->ShapeInferContext_GetInputTypeShape(ctx, 1, &x);
	if (st == NULL) st = api->ShapeInferContext_GetInputTypeShape(ctx, 2, &w);
	if (st == NULL) st = api->ShapeInferContext_SetOutputTypeShape(ctx, 0, x);
	if (st == NULL) st = api->ShapeInferContext_SetOutputTypeShape(ctx, 1, w);
	size_t nw = 0;
	if (st == NULL) st = api->GetDimensionsCount(w, &nw);
	if (st == NULL && nw >= 1) {
		int64_t wd[8];
		if (nw > 8) nw = 8;
		ONNXTensorElementDataType e;
		if ((st = api->GetDimensions(w, wd, nw)) == NULL && (st = api->GetTensorElementType(w, &e)) == NULL &&
		    (st = api->CreateTensorTypeAndShapeInfo(&b)) == NULL && (st = api->SetTensorElementType(b, e)) == NULL &&
		    (st = api->SetDimensions(b, wd, 1)) == NULL)
			st = api->ShapeInferContext_SetOutputTypeShape(ctx, 2, b);
	}
	// The context owns the inputs' infos (releasing them frees them twice).
	if (b != NULL) api->ReleaseTensorTypeAndShapeInfo(b);
	return st;
}

// read_ints reads an int64 array attribute; *n = 0 and NULL for an absent
// one. Arrays longer than cap are reported with their length (the caller's
// check rejects them).
static const int64_t *read_ints(const OrtApi *api, const OrtKernelInfo *info, const char *name, int64_t *buf,
                                size_t cap, size_t *n) {
	size_t size = 0;
	OrtStatus *st = api->KernelInfoGetAttributeArray_int64(info, name, NULL, &size);
	if (st != NULL) {
		api->ReleaseStatus(st);
		*n = 0;
		return NULL;
	}
	*n = size;
	if (size > cap) {
		for (size_t i = 0; i < cap; i++) buf[i] = 1;
		return buf;
	}
	st = api->KernelInfoGetAttributeArray_int64(info, name, buf, &size);
	if (st != NULL) {
		api->ReleaseStatus(st);
		*n = 0;
		return NULL;
	}
	return buf;
}

static void kernel_destroy(void *k) {
	cg_kernel *kr = k;
	if (kr == NULL) return;
	if (kr->planner.t != NULL) {
		cg_planner_free(&kr->planner);
		if (kr->own != NULL) kr->planner.t->Destroy(kr->own);
	}
	pthread_mutex_destroy(&kr->mu);
	free(kr);
}

static OrtStatus *kernel_create(const OrtCustomOp *op, const OrtApi *api, const OrtKernelInfo *info, void **out) {
	const cg_op *o = (const cg_op *)op;
	char node[200] = "", err[CG_ERR_LEN];
	size_t nsize = sizeof node;
	OrtStatus *st = api->KernelInfo_GetNodeName(info, node, &nsize);
	if (st != NULL) {
		api->ReleaseStatus(st);
		snprintf(node, sizeof node, "(unnamed)");
	}
	if (node[0] == 0) snprintf(node, sizeof node, "(unnamed)");
	int64_t kb[8], sb[8], db[8], pb[8], group;
	size_t nk, ns, nd, np;
	const int64_t *k = read_ints(api, info, "kernel_shape", kb, 8, &nk);
	const int64_t *s = read_ints(api, info, "strides", sb, 8, &ns);
	const int64_t *d = read_ints(api, info, "dilations", db, 8, &nd);
	const int64_t *p = read_ints(api, info, "pads", pb, 8, &np);
	const int64_t *g = &group;
	st = api->KernelInfoGetAttribute_int64(info, "group", &group);
	if (st != NULL) {
		api->ReleaseStatus(st);
		g = NULL;
	}
	cg_kernel *kr = calloc(1, sizeof *kr);
	if (kr == NULL) return api->CreateStatus(ORT_FAIL, "ConvGrad: out of memory");
	pthread_mutex_init(&kr->mu, NULL);
	kr->api = api;
	kr->op = o;
	snprintf(kr->node, sizeof kr->node, "%s", node);
	if (cg_attrs_set(&kr->a, k, nk, s, ns, d, nd, p, np, g, err)) {
		kernel_destroy(kr);
		return errorf(api, node, err);
	}
	if (o->cuda) {
		const cg_cudnn *t = cg_cudnn_load(err);
		if (t == NULL) {
			kernel_destroy(kr);
			return errorf(api, node, err);
		}
		kr->planner.t = t;
		kr->planner.s = o->s;
		kr->planner.a = kr->a;
	}
	*out = kr;
	return NULL;
}

// tensor_shape reads a value's element type and shape (at most 8 dims).
static OrtStatus *tensor_shape(const OrtApi *api, const OrtValue *v, ONNXTensorElementDataType *elem, int64_t *dims,
                               size_t *n) {
	OrtTensorTypeAndShapeInfo *info = NULL;
	OrtStatus *st = api->GetTensorTypeAndShape(v, &info);
	if (st != NULL) return st;
	if ((st = api->GetTensorElementType(info, elem)) == NULL && (st = api->GetDimensionsCount(info, n)) == NULL) {
		if (*n > 8) *n = 8;  // rejected as not 4-D by the shape check
		st = api->GetDimensions(info, dims, *n);
	}
	api->ReleaseTensorTypeAndShapeInfo(info);
	return st;
}

static void cpu_unit(void *job, size_t u) { cg_cpu_unit(job, (int64_t)u); }

typedef struct {
	const OrtApi *api;
	OrtKernelContext *ctx;
	const OrtMemoryInfo *mem;
	OrtAllocator *a;
} cg_actx;

// ort_alloc takes workspace through KernelContext_GetScratchBuffer, which
// turns an allocation failure into a status (the allocator's own Alloc
// would throw a C++ exception through this C code); the buffer goes back
// to the context's allocator, as the API asks.
static void *ort_alloc(void *ctx, size_t size) {
	cg_actx *c = ctx;
	void *p = NULL;
	OrtStatus *st = c->api->KernelContext_GetScratchBuffer(c->ctx, c->mem, size, &p);
	if (st != NULL) {
		c->api->ReleaseStatus(st);
		return NULL;
	}
	return p;
}
static void ort_free(void *ctx, void *p) {
	cg_actx *c = ctx;
	c->a->Free(c->a, p);
}

static int cudnn_type(ONNXTensorElementDataType e) {
	switch (e) {
	case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
		return CG_CUDNN_DATA_FLOAT;
	case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
		return CG_CUDNN_DATA_DOUBLE;
	case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
		return CG_CUDNN_DATA_HALF;
	case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
		return CG_CUDNN_DATA_BFLOAT16;
	default:
		return -1;
	}
}

static OrtStatus *cuda_compute(cg_kernel *kr, OrtKernelContext *ctx, const cg_dims *d, const OrtValue *dy_v,
                               const cg_io *io) {
	const OrtApi *api = kr->api;
	char err[CG_ERR_LEN];
	void *stream = NULL;
	OrtStatus *st = api->KernelContext_GetGPUComputeStream(ctx, &stream);
	if (st != NULL) return st;
	// The provider's cuDNN handle is already bound to its stream; without
	// one, the kernel's own handle is bound to the compute stream per call.
	void *h = NULL;
	st = api->KernelContext_GetResource(ctx, CG_CUDA_RESOURCE_VERSION, CG_CUDA_RESOURCE_CUDNN_HANDLE, &h);
	if (st != NULL) {
		api->ReleaseStatus(st);
		h = NULL;
	}
	const OrtMemoryInfo *mem = NULL;
	if ((st = api->GetTensorMemoryInfo(dy_v, &mem)) != NULL) return st;
	cg_actx actx = {api, ctx, mem, NULL};
	if ((st = api->KernelContext_GetAllocator(ctx, mem, &actx.a)) != NULL) return st;
	pthread_mutex_lock(&kr->mu);
	const cg_cudnn *t = kr->planner.t;
	int rc = 0;
	if (h == NULL) {
		if (kr->own == NULL) rc = t->Create(&kr->own);
		if (rc == 0) rc = t->SetStream(kr->own, stream);
		if (rc != 0) snprintf(err, sizeof err, "creating a cuDNN handle: %s", t->GetErrorString(rc));
		h = kr->own;
	}
	if (rc == 0) rc = cg_cudnn_compute(&kr->planner, h, d, cudnn_type(kr->op->elem), io, ort_alloc, ort_free, &actx, err);
	pthread_mutex_unlock(&kr->mu);
	api->ReleaseAllocator(actx.a);
	return rc != 0 ? errorf(api, kr->node, err) : NULL;
}

static OrtStatus *kernel_compute(void *k, OrtKernelContext *ctx) {
	cg_kernel *kr = k;
	const OrtApi *api = kr->api;
	char err[CG_ERR_LEN];
	const OrtValue *in[3];
	int64_t dims[3][8];
	size_t nd[3];
	static const char *names[3] = {"dY", "X", "W"};
	OrtStatus *st;
	for (int i = 0; i < 3; i++) {
		ONNXTensorElementDataType e;
		if ((st = api->KernelContext_GetInput(ctx, i, &in[i])) != NULL) return st;
		if (in[i] == NULL) {
			snprintf(err, sizeof err, "input %s is missing", names[i]);
			return errorf(api, kr->node, err);
		}
		if ((st = tensor_shape(api, in[i], &e, dims[i], &nd[i])) != NULL) return st;
		if (e != kr->op->elem) {
			snprintf(err, sizeof err, "input %s has element type %d, not the kernel's %d", names[i], (int)e,
			         (int)kr->op->elem);
			return errorf(api, kr->node, err);
		}
	}
	cg_dims d;
	if (cg_dims_check(&kr->a, dims[0], nd[0], dims[1], nd[1], dims[2], nd[2], &d, err))
		return errorf(api, kr->node, err);
	size_t nout = 0;
	if ((st = api->KernelContext_GetOutputCount(ctx, &nout)) != NULL) return st;
	// An output the node leaves unnamed ("") comes back NULL: not computed.
	void *outs[3] = {NULL, NULL, NULL};
	const int64_t odims[3][4] = {{d.n, d.ci, d.h, d.w}, {d.co, d.cig, d.kh, d.kw}, {d.co, 0, 0, 0}};
	const size_t orank[3] = {4, 4, 1};
	for (size_t i = 0; i < nout && i < 3; i++) {
		OrtValue *v = NULL;
		if ((st = api->KernelContext_GetOutput(ctx, i, odims[i], orank[i], &v)) != NULL) return st;
		if (v != NULL && (st = api->GetTensorMutableData(v, &outs[i])) != NULL) return st;
	}
	const void *ptr[3];
	for (int i = 0; i < 3; i++)
		if ((st = api->GetTensorMutableData((OrtValue *)in[i], (void **)&ptr[i])) != NULL) return st;
	if (kr->op->cuda) {
		cg_io io = {ptr[0], ptr[1], ptr[2], outs[0], outs[1], outs[2]};
		return cuda_compute(kr, ctx, &d, in[0], &io);
	}
	cg_cpu_job job = {kr->a, d, kr->op->elem == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, ptr[0], ptr[1], ptr[2],
	                  outs[0], outs[1], outs[2], 0};
	size_t units = (size_t)cg_cpu_units(&job);
	// ONNX Runtime's intra-op pool runs the units; without it, in turn.
	st = api->KernelContext_ParallelFor(ctx, cpu_unit, units, 0, &job);
	if (st != NULL) {
		api->ReleaseStatus(st);
		cg_cpu_run(&job);
	}
	if (job.failed) return errorf(api, kr->node, "out of memory for the column buffer");
	return NULL;
}

static void op_init(cg_op *o, const OrtApi *api, const char *name, ONNXTensorElementDataType elem, int cuda,
                    const char *ep, const cg_cudnn_settings *s) {
	memset(o, 0, sizeof *o);
	o->api = api;
	snprintf(o->name, sizeof o->name, "%s", name);
	o->elem = elem;
	o->cuda = cuda;
	if (ep != NULL) snprintf(o->ep, sizeof o->ep, "%s", ep);
	if (s != NULL) o->s = *s;
	OrtCustomOp *c = &o->op;
	c->version = ORT_API_VERSION;
	c->GetName = op_name;
	c->GetExecutionProviderType = op_ep;
	c->GetInputType = op_type;
	c->GetInputTypeCount = op_three;
	c->GetOutputType = op_type;
	c->GetOutputTypeCount = op_three;
	c->KernelDestroy = kernel_destroy;
	c->GetInputCharacteristic = op_input_char;
	c->GetOutputCharacteristic = op_output_char;
	c->GetInputMemoryType = op_input_mem;
	c->GetVariadicInputMinArity = op_one;
	c->GetVariadicInputHomogeneity = op_one;
	c->GetVariadicOutputMinArity = op_one;
	c->GetVariadicOutputHomogeneity = op_one;
	c->CreateKernelV2 = kernel_create;
	c->KernelComputeV2 = kernel_compute;
	c->InferOutputShapeFn = infer_shapes;
	c->GetStartVersion = op_start;
	c->GetEndVersion = op_end;
}

// cg_registration owns a session's custom-op domain and its ops, which
// must outlive the session.
typedef struct cg_registration {
	const OrtApi *api;
	OrtCustomOpDomain *domain;
	int nops;
	cg_op ops[5];
} cg_registration;

void cg_unregister(cg_registration *r) {
	if (r == NULL) return;
	if (r->domain != NULL) r->api->ReleaseCustomOpDomain(r->domain);
	free(r);
}

static char *status_msg(const OrtApi *api, OrtStatus *st) {
	char *m = strdup(api->GetErrorMessage(st));
	api->ReleaseStatus(st);
	return m;
}

// cg_register adds the operator (domain and name as runtime's Go
// constants give them) with the CPU kernels (float, double) and/or the
// cuDNN kernels (float, float16, bfloat16) of provider ep to so. It
// returns the registration to release after the session, or NULL with a
// malloc'd message in *err.
cg_registration *cg_register(const OrtApi *api, OrtSessionOptions *so, const char *domain, const char *name, int cpu,
                             int cuda, const char *ep, int allow_tf32, int exhaustive, size_t max_workspace,
                             char **err) {
	*err = NULL;
	if (cuda) {
		char e[CG_ERR_LEN];
		if (cg_cudnn_load(e) == NULL) {
			*err = strdup(e);
			return NULL;
		}
	}
	cg_registration *r = calloc(1, sizeof *r);
	if (r == NULL) {
		*err = strdup("out of memory");
		return NULL;
	}
	r->api = api;
	OrtStatus *st = api->CreateCustomOpDomain(domain, &r->domain);
	if (st != NULL) {
		*err = status_msg(api, st);
		cg_unregister(r);
		return NULL;
	}
	cg_cudnn_settings s = {allow_tf32, exhaustive, max_workspace};
	if (cpu) {
		op_init(&r->ops[r->nops++], api, name, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 0, NULL, NULL);
		op_init(&r->ops[r->nops++], api, name, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, 0, NULL, NULL);
	}
	if (cuda) {
		op_init(&r->ops[r->nops++], api, name, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 1, ep, &s);
		op_init(&r->ops[r->nops++], api, name, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, 1, ep, &s);
		op_init(&r->ops[r->nops++], api, name, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, 1, ep, &s);
	}
	for (int i = 0; i < r->nops; i++) {
		if ((st = api->CustomOpDomain_Add(r->domain, &r->ops[i].op)) != NULL) {
			*err = status_msg(api, st);
			cg_unregister(r);
			return NULL;
		}
	}
	if ((st = api->AddCustomOpDomain(so, r->domain)) != NULL) {
		*err = status_msg(api, st);
		cg_unregister(r);
		return NULL;
	}
	return r;
}
