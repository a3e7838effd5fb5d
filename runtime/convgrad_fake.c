// A fake cuDNN table for tests: descriptors are plain structs that record
// what was set on them, the algorithm queries answer from a fixed list and
// count themselves, and nothing touches a GPU. ConvGradCUDAPlanner runs the
// cuDNN kernel's planning code against it.
#include <stdlib.h>
#include <string.h>

#include "convgrad.h"

enum { FAKE_BAD_PARAM = 3 };

static int fake_searches, fake_finds, fake_search_math = -1;
static cg_fake_call fake_data, fake_filter;
static int fake_bias;

int cg_fake_searches(void) { return fake_searches; }
int cg_fake_finds(void) { return fake_finds; }
int cg_fake_search_math(void) { return fake_search_math; }
void cg_fake_reset(void) {
	fake_searches = fake_finds = fake_bias = 0;
	fake_search_math = -1;
	memset(&fake_data, 0, sizeof fake_data);
	memset(&fake_filter, 0, sizeof fake_filter);
}

static size_t f_version(void) { return 90800; }
static const char *f_error(int st) { return st == FAKE_BAD_PARAM ? "CUDNN_STATUS_BAD_PARAM" : "fake cuDNN error"; }
static int f_create(cg_handle *h) {
	*h = (cg_handle)(uintptr_t)1;
	return 0;
}
static int f_destroy(cg_handle h) {
	(void)h;
	return 0;
}
static int f_set_stream(cg_handle h, void *s) {
	(void)h, (void)s;
	return 0;
}

static int f_create_desc(cg_desc *d, int kind) {
	cg_fake_desc *f = calloc(1, sizeof *f);
	if (f == NULL) return FAKE_BAD_PARAM;
	f->kind = kind;
	*d = f;
	return 0;
}
static int f_destroy_desc(cg_desc d) {
	free(d);
	return 0;
}
static int f_create_tensor(cg_desc *d) { return f_create_desc(d, 1); }
static int f_create_filter(cg_desc *d) { return f_create_desc(d, 2); }
static int f_create_conv(cg_desc *d) { return f_create_desc(d, 3); }

static int f_set_tensor(cg_desc d, int dtype, int nb, const int *dims, const int *strides) {
	cg_fake_desc *f = d;
	if (f->kind != 1 || nb < 1 || nb > 8) return FAKE_BAD_PARAM;
	f->dtype = dtype, f->nb = nb;
	memcpy(f->dims, dims, nb * sizeof(int));
	memcpy(f->strides, strides, nb * sizeof(int));
	f->sets++;
	return 0;
}
static int f_set_filter(cg_desc d, int dtype, int format, int nb, const int *dims) {
	cg_fake_desc *f = d;
	if (f->kind != 2 || nb < 1 || nb > 8) return FAKE_BAD_PARAM;
	f->dtype = dtype, f->format = format, f->nb = nb;
	memcpy(f->dims, dims, nb * sizeof(int));
	f->sets++;
	return 0;
}
static int f_set_conv(cg_desc d, int n, const int *pads, const int *strides, const int *dil, int mode, int compute) {
	cg_fake_desc *f = d;
	if (f->kind != 3 || n < 1 || n > 8) return FAKE_BAD_PARAM;
	f->nb = n, f->mode = mode, f->compute = compute;
	memcpy(f->pads, pads, n * sizeof(int));
	memcpy(f->cstrides, strides, n * sizeof(int));
	memcpy(f->dilations, dil, n * sizeof(int));
	f->groups = 1;
	f->sets++;
	return 0;
}
static int f_set_groups(cg_desc d, int g) {
	cg_fake_desc *f = d;
	if (f->kind != 3 || g < 1) return FAKE_BAD_PARAM;
	f->groups = g;
	return 0;
}
static int f_set_math(cg_desc d, int m) {
	cg_fake_desc *f = d;
	if (f->kind != 3) return FAKE_BAD_PARAM;
	f->math = m;
	return 0;
}

// f_perf answers a search: algorithm 0 fails (so the planner must skip
// it), algorithm 1 works under the descriptor's math type.
static int f_perf(cg_desc conv, int requested, int *returned, cg_cudnn_perf *perf) {
	cg_fake_desc *c = conv;
	fake_searches++;
	fake_search_math = c->math;
	if (c->kind != 3 || requested < 2) return FAKE_BAD_PARAM;
	memset(perf, 0, 2 * sizeof *perf);
	perf[0].algo = 0, perf[0].status = FAKE_BAD_PARAM;
	perf[1].algo = 1, perf[1].status = 0, perf[1].math_type = c->math, perf[1].memory = 4096;
	*returned = 2;
	return 0;
}
static int f_get_data(cg_handle h, cg_desc w, cg_desc dy, cg_desc conv, cg_desc dx, int req, int *ret,
                      cg_cudnn_perf *perf) {
	(void)h, (void)w, (void)dy, (void)dx;
	return f_perf(conv, req, ret, perf);
}
static int f_find_data(cg_handle h, cg_desc w, const void *wp, cg_desc dy, const void *dyp, cg_desc conv, cg_desc dx,
                       void *dxp, int req, int *ret, cg_cudnn_perf *perf, void *ws, size_t wss) {
	(void)wp, (void)dyp, (void)dxp, (void)ws, (void)wss;
	fake_finds++;
	return f_get_data(h, w, dy, conv, dx, req, ret, perf);
}
static int f_ws_data(cg_handle h, cg_desc w, cg_desc dy, cg_desc conv, cg_desc dx, int algo, size_t *size) {
	(void)h, (void)w, (void)dy, (void)conv, (void)dx;
	*size = 4096 * (size_t)(algo + 1);
	return 0;
}
static int f_get_filter(cg_handle h, cg_desc x, cg_desc dy, cg_desc conv, cg_desc dw, int req, int *ret,
                        cg_cudnn_perf *perf) {
	(void)h, (void)x, (void)dy, (void)dw;
	return f_perf(conv, req, ret, perf);
}
static int f_find_filter(cg_handle h, cg_desc x, const void *xp, cg_desc dy, const void *dyp, cg_desc conv, cg_desc dw,
                         void *dwp, int req, int *ret, cg_cudnn_perf *perf, void *ws, size_t wss) {
	(void)xp, (void)dyp, (void)dwp, (void)ws, (void)wss;
	fake_finds++;
	return f_get_filter(h, x, dy, conv, dw, req, ret, perf);
}
static int f_ws_filter(cg_handle h, cg_desc x, cg_desc dy, cg_desc conv, cg_desc dw, int algo, size_t *size) {
	(void)h, (void)x, (void)dy, (void)conv, (void)dw;
	*size = 8192 * (size_t)(algo + 1);
	return 0;
}
static int f_record(cg_fake_call *c, cg_desc conv, int algo, void *ws, size_t wss) {
	cg_fake_desc *f = conv;
	if (f->kind != 3 || (wss > 0 && ws == NULL)) return FAKE_BAD_PARAM;
	c->calls++;
	c->algo = algo;
	c->ws_size = wss;
	c->math = f->math;
	return 0;
}
static int f_bwd_data(cg_handle h, const void *a, cg_desc w, const void *wp, cg_desc dy, const void *dyp, cg_desc conv,
                      int algo, void *ws, size_t wss, const void *b, cg_desc dx, void *dxp) {
	(void)h, (void)a, (void)w, (void)wp, (void)dy, (void)dyp, (void)b, (void)dx, (void)dxp;
	return f_record(&fake_data, conv, algo, ws, wss);
}
static int f_bwd_filter(cg_handle h, const void *a, cg_desc x, const void *xp, cg_desc dy, const void *dyp,
                        cg_desc conv, int algo, void *ws, size_t wss, const void *b, cg_desc dw, void *dwp) {
	(void)h, (void)a, (void)x, (void)xp, (void)dy, (void)dyp, (void)b, (void)dw, (void)dwp;
	return f_record(&fake_filter, conv, algo, ws, wss);
}
static int f_bwd_bias(cg_handle h, const void *a, cg_desc dy, const void *dyp, const void *b, cg_desc db, void *dbp) {
	(void)h, (void)a, (void)dy, (void)dyp, (void)b, (void)db, (void)dbp;
	fake_bias++;
	return 0;
}

void cg_fake_calls(cg_fake_call *data, cg_fake_call *filter, int *bias) {
	*data = fake_data;
	*filter = fake_filter;
	*bias = fake_bias;
}

// The fake allocator hands out one dummy address (nothing reads it) and
// records the sizes asked for.
static char fake_block;
static size_t fake_allocs[16];
static int fake_nallocs, fake_frees;

static void *f_alloc(void *ctx, size_t size) {
	(void)ctx;
	if (fake_nallocs < 16) fake_allocs[fake_nallocs] = size;
	fake_nallocs++;
	return &fake_block;
}
static void f_free(void *ctx, void *p) {
	(void)ctx, (void)p;
	fake_frees++;
}

int cg_fake_compute(cg_planner *p, const cg_dims *d, int dtype, int want_dx, int want_dw, int want_db, size_t *allocs,
                    int *nallocs, int *frees, char *err) {
	cg_io io = {&fake_block, &fake_block, &fake_block, want_dx ? &fake_block : NULL, want_dw ? &fake_block : NULL,
	            want_db ? &fake_block : NULL};
	fake_nallocs = fake_frees = 0;
	int rc = cg_cudnn_compute(p, NULL, d, dtype, &io, f_alloc, f_free, NULL, err);
	*nallocs = fake_nallocs < 16 ? fake_nallocs : 16;
	memcpy(allocs, fake_allocs, sizeof(size_t) * (size_t)*nallocs);
	*frees = fake_frees;
	return rc;
}

static const cg_cudnn fake = {
    .GetVersion = f_version,
    .GetErrorString = f_error,
    .Create = f_create,
    .Destroy = f_destroy,
    .SetStream = f_set_stream,
    .CreateTensorDescriptor = f_create_tensor,
    .SetTensorNdDescriptor = f_set_tensor,
    .DestroyTensorDescriptor = f_destroy_desc,
    .CreateFilterDescriptor = f_create_filter,
    .SetFilterNdDescriptor = f_set_filter,
    .DestroyFilterDescriptor = f_destroy_desc,
    .CreateConvolutionDescriptor = f_create_conv,
    .SetConvolutionNdDescriptor = f_set_conv,
    .SetConvolutionGroupCount = f_set_groups,
    .SetConvolutionMathType = f_set_math,
    .DestroyConvolutionDescriptor = f_destroy_desc,
    .GetConvolutionBackwardDataAlgorithm_v7 = f_get_data,
    .FindConvolutionBackwardDataAlgorithmEx = f_find_data,
    .GetConvolutionBackwardDataWorkspaceSize = f_ws_data,
    .ConvolutionBackwardData = f_bwd_data,
    .GetConvolutionBackwardFilterAlgorithm_v7 = f_get_filter,
    .FindConvolutionBackwardFilterAlgorithmEx = f_find_filter,
    .GetConvolutionBackwardFilterWorkspaceSize = f_ws_filter,
    .ConvolutionBackwardFilter = f_bwd_filter,
    .ConvolutionBackwardBias = f_bwd_bias,
};

const cg_cudnn *cg_fake_table(void) { return &fake; }
