// Shared declarations of the ConvGrad custom operator (domain com.segtune):
// its attributes and shape checks (convgrad_shape.c), the CPU kernel
// (convgrad_cpu.c), the cuDNN kernel and its planning (convgrad_cudnn.c),
// the fake cuDNN table the tests plan against (convgrad_fake.c) and the
// OrtCustomOp glue (convgrad_op.c).
#ifndef SEGTUNE_CONVGRAD_H
#define SEGTUNE_CONVGRAD_H

#include <stddef.h>
#include <stdint.h>

#define CG_ERR_LEN 512

// cg_attrs holds the forward Conv's attributes with padding resolved;
// has_kernel is 0 when the node gave no kernel_shape (W's is used).
typedef struct {
	int64_t kernel[2], strides[2], dilations[2], pads[4], group;
	int has_kernel;
} cg_attrs;

// cg_dims are the sizes of one ConvGrad call, checked against each other.
typedef struct {
	int64_t n, ci, h, w;   // X
	int64_t co, oh, ow;    // dY
	int64_t cig, kh, kw;   // W: [co, cig, kh, kw], cig = ci/group
} cg_dims;

// cg_attrs_set fills a from the attribute arrays (NULL/0 for an absent
// one: defaults as ONNX Conv's) and checks them; on error it writes a
// message to err and returns -1.
int cg_attrs_set(cg_attrs *a, const int64_t *kernel, size_t nk, const int64_t *strides, size_t ns,
                 const int64_t *dilations, size_t nd, const int64_t *pads, size_t np,
                 const int64_t *group, char *err);

// cg_dims_check checks the shapes of dY, X and W against each other and
// the attributes; on error it writes a message to err and returns -1.
int cg_dims_check(const cg_attrs *a, const int64_t *dy, size_t ndy, const int64_t *x, size_t nx,
                  const int64_t *w, size_t nw, cg_dims *d, char *err);

// cg_cpu_job is one call of the CPU kernel: any of dx, dw, db may be NULL
// (that output is not computed); outputs are overwritten. Its work splits
// into cg_cpu_units independent units, which cg_cpu_unit runs one at a
// time (in any order, on any thread) and cg_cpu_run all in turn; a unit
// that cannot allocate its buffers sets failed (cg_cpu_run returns -1).
typedef struct {
	cg_attrs a;
	cg_dims d;
	int is_double;
	const void *dy, *x, *w;
	void *dx, *dw, *db;
	int failed;
} cg_cpu_job;
int64_t cg_cpu_units(const cg_cpu_job *j);
void cg_cpu_unit(cg_cpu_job *j, int64_t u);
int cg_cpu_run(cg_cpu_job *j);

// ---- cuDNN ----

// cuDNN 9 enumeration values (cudnn_graph.h, cudnn_cnn.h), declared by hand
// because segtune builds without the CUDA toolkit.
enum {
	CG_CUDNN_STATUS_SUCCESS = 0,
	CG_CUDNN_DATA_FLOAT = 0,
	CG_CUDNN_DATA_DOUBLE = 1,
	CG_CUDNN_DATA_HALF = 2,
	CG_CUDNN_DATA_BFLOAT16 = 9,
	CG_CUDNN_TENSOR_NCHW = 0,
	CG_CUDNN_CONVOLUTION = 0,
	CG_CUDNN_CROSS_CORRELATION = 1,
	CG_CUDNN_DEFAULT_MATH = 0,
	CG_CUDNN_TENSOR_OP_MATH = 1,
	CG_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
	CG_CUDNN_FMA_MATH = 3,
	CG_CUDNN_BWD_DATA_ALGO_COUNT = 6,
	CG_CUDNN_BWD_FILTER_ALGO_COUNT = 7,
};

// cudnnConvolutionBwdDataAlgoPerf_t and cudnnConvolutionBwdFilterAlgoPerf_t
// share this layout.
typedef struct {
	int algo;
	int status;
	float time;
	size_t memory;
	int determinism;
	int math_type;
	int reserved[3];
} cg_cudnn_perf;

typedef void *cg_handle;  // cudnnHandle_t
typedef void *cg_desc;    // cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t

// cg_cudnn is the one table through which every cuDNN call goes: the real
// library's entry points (cg_cudnn_load) or the tests' fake (cg_fake_table).
typedef struct {
	size_t (*GetVersion)(void);
	const char *(*GetErrorString)(int status);
	int (*Create)(cg_handle *h);
	int (*Destroy)(cg_handle h);
	int (*SetStream)(cg_handle h, void *stream);
	int (*CreateTensorDescriptor)(cg_desc *d);
	int (*SetTensorNdDescriptor)(cg_desc d, int dtype, int nb, const int *dims, const int *strides);
	int (*DestroyTensorDescriptor)(cg_desc d);
	int (*CreateFilterDescriptor)(cg_desc *d);
	int (*SetFilterNdDescriptor)(cg_desc d, int dtype, int format, int nb, const int *dims);
	int (*DestroyFilterDescriptor)(cg_desc d);
	int (*CreateConvolutionDescriptor)(cg_desc *d);
	int (*SetConvolutionNdDescriptor)(cg_desc d, int n, const int *pads, const int *strides, const int *dilations,
	                                  int mode, int compute_type);
	int (*SetConvolutionGroupCount)(cg_desc d, int groups);
	int (*SetConvolutionMathType)(cg_desc d, int math);
	int (*DestroyConvolutionDescriptor)(cg_desc d);
	int (*GetConvolutionBackwardDataAlgorithm_v7)(cg_handle h, cg_desc w, cg_desc dy, cg_desc conv, cg_desc dx,
	                                              int requested, int *returned, cg_cudnn_perf *perf);
	int (*FindConvolutionBackwardDataAlgorithmEx)(cg_handle h, cg_desc w, const void *wp, cg_desc dy, const void *dyp,
	                                              cg_desc conv, cg_desc dx, void *dxp, int requested, int *returned,
	                                              cg_cudnn_perf *perf, void *ws, size_t ws_size);
	int (*GetConvolutionBackwardDataWorkspaceSize)(cg_handle h, cg_desc w, cg_desc dy, cg_desc conv, cg_desc dx,
	                                               int algo, size_t *size);
	int (*ConvolutionBackwardData)(cg_handle h, const void *alpha, cg_desc w, const void *wp, cg_desc dy,
	                               const void *dyp, cg_desc conv, int algo, void *ws, size_t ws_size,
	                               const void *beta, cg_desc dx, void *dxp);
	int (*GetConvolutionBackwardFilterAlgorithm_v7)(cg_handle h, cg_desc x, cg_desc dy, cg_desc conv, cg_desc dw,
	                                                int requested, int *returned, cg_cudnn_perf *perf);
	int (*FindConvolutionBackwardFilterAlgorithmEx)(cg_handle h, cg_desc x, const void *xp, cg_desc dy,
	                                                const void *dyp, cg_desc conv, cg_desc dw, void *dwp,
	                                                int requested, int *returned, cg_cudnn_perf *perf, void *ws,
	                                                size_t ws_size);
	int (*GetConvolutionBackwardFilterWorkspaceSize)(cg_handle h, cg_desc x, cg_desc dy, cg_desc conv, cg_desc dw,
	                                                 int algo, size_t *size);
	int (*ConvolutionBackwardFilter)(cg_handle h, const void *alpha, cg_desc x, const void *xp, cg_desc dy,
	                                 const void *dyp, cg_desc conv, int algo, void *ws, size_t ws_size,
	                                 const void *beta, cg_desc dw, void *dwp);
	int (*ConvolutionBackwardBias)(cg_handle h, const void *alpha, cg_desc dy, const void *dyp, const void *beta,
	                               cg_desc db, void *dbp);
} cg_cudnn;

// cg_cudnn_load resolves the table from the libcudnn.so.9 already loaded
// (or loads it) and checks its version; on error it returns NULL and
// writes a one-line message to err. Safe to call repeatedly.
const cg_cudnn *cg_cudnn_load(char *err);

// Session-level settings of the cuDNN kernel.
typedef struct {
	int allow_tf32;  // float may run as TF32 (CUDNN_DEFAULT_MATH) or not (CUDNN_FMA_MATH)
	int exhaustive;  // cudnnFind…AlgorithmEx (timed) instead of cudnnGet…Algorithm_v7 (heuristic)
	size_t max_workspace;  // the most workspace an exhaustive search may use
} cg_cudnn_settings;

// A plan: descriptors and algorithms for one (dY, X, W, type) shape, which
// the kernel caches so that the search runs once per shape.
typedef struct cg_plan {
	int64_t dy[4], x[4], w[4];
	int dtype;  // cuDNN data type
	cg_desc dy_desc, x_desc, w_desc, db_desc, conv_desc;
	int data_algo, filter_algo, data_math, filter_math;
	size_t data_ws, filter_ws;
	int searched_data, searched_filter;  // which algorithms this plan searched for
	struct cg_plan *next;
} cg_plan;

// cg_planner holds a kernel's cached plans; one per kernel instance.
typedef struct {
	const cg_cudnn *t;
	cg_cudnn_settings s;
	cg_attrs a;
	cg_plan *plans;
	int nplans;
	int searches;  // algorithm searches run so far (data and filter count apart)
} cg_planner;

// Buffers an exhaustive search times the algorithms on (NULL in a
// heuristic search, and in the fake's planning).
typedef struct {
	const void *dy, *x, *w;
	void *dx, *dw;
	void *ws;
	size_t ws_size;
} cg_search_buffers;

// cg_plan_get returns the plan for the shapes (d) and cuDNN data type,
// building it (descriptors, algorithm search for the outputs wanted) when
// the planner has none; NULL on error with a message in err.
cg_plan *cg_plan_get(cg_planner *p, cg_handle h, const cg_dims *d, int dtype, int want_dx, int want_dw,
                     const cg_search_buffers *buf, char *err);
void cg_planner_free(cg_planner *p);

// cg_io holds the device pointers of one call; an output left NULL is not
// computed.
typedef struct {
	const void *dy, *x, *w;
	void *dx, *dw, *db;
} cg_io;
typedef void *(*cg_alloc_fn)(void *actx, size_t size);
typedef void (*cg_free_fn)(void *actx, void *p);

// cg_cudnn_compute plans (once per shape) and runs the backward-data,
// backward-filter and backward-bias calls on handle h, with workspace from
// alloc; on error it writes a message to err and returns -1.
int cg_cudnn_compute(cg_planner *p, cg_handle h, const cg_dims *d, int dtype, const cg_io *io, cg_alloc_fn alloc,
                     cg_free_fn release, void *actx, char *err);

// The fake table: records every descriptor setting, so tests can read a
// plan's descriptors back (cg_fake_tensor etc.) and count searches.
const cg_cudnn *cg_fake_table(void);
typedef struct {
	int kind;  // 1 tensor, 2 filter, 3 convolution
	int dtype, nb, format;
	int dims[8], strides[8];
	int pads[8], cstrides[8], dilations[8], mode, compute, groups, math;
	int sets;  // how many times the descriptor was set
} cg_fake_desc;
int cg_fake_searches(void);  // Find/Get algorithm calls since the last reset
int cg_fake_finds(void);     // of which Find…AlgorithmEx (exhaustive) calls
int cg_fake_search_math(void);  // the math type the last search ran under; -1 for none
void cg_fake_reset(void);
// A backward call the fake received: how many, and the last one's
// algorithm, workspace size and the convolution descriptor's math type.
typedef struct {
	int calls, algo, math;
	size_t ws_size;
} cg_fake_call;
void cg_fake_calls(cg_fake_call *data, cg_fake_call *filter, int *bias);
// cg_fake_compute runs cg_cudnn_compute on planner p (whose table is the
// fake) with a recording allocator: the sizes it was asked for (at most
// 16), how many, and how many frees.
int cg_fake_compute(cg_planner *p, const cg_dims *d, int dtype, int want_dx, int want_dw, int want_db, size_t *allocs,
                    int *nallocs, int *frees, char *err);

#endif
