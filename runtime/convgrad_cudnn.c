// The cuDNN side of ConvGrad, compiled without the CUDA toolkit: cuDNN 9's
// entry points are resolved at run time into one table (cg_cudnn), and the
// planning code (descriptors, algorithm choice, cached per shape) runs the
// same against the real table and the tests' fake.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convgrad.h"

// ---- loading ----

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static cg_cudnn real_table;
static int real_loaded;

#define CUDNN_SONAME "libcudnn.so.9"

const cg_cudnn *cg_cudnn_load(char *err) {
	pthread_mutex_lock(&load_mu);
	if (real_loaded) {
		pthread_mutex_unlock(&load_mu);
		return &real_table;
	}
	// The CUDA provider has normally loaded cuDNN already (segtune loads it
	// RTLD_GLOBAL before the provider): take that one.
	void *lib = dlopen(CUDNN_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (lib == NULL) lib = dlopen(CUDNN_SONAME, RTLD_NOW | RTLD_GLOBAL);
	if (lib == NULL) {
		const char *e = dlerror();
		snprintf(err, CG_ERR_LEN, "cuDNN 9 (%s) cannot be loaded: %s", CUDNN_SONAME, e ? e : "not found");
		pthread_mutex_unlock(&load_mu);
		return NULL;
	}
	cg_cudnn t;
	memset(&t, 0, sizeof t);
	struct {
		void **slot;
		const char *name;
	} syms[] = {
#define SYM(field) {(void **)&t.field, "cudnn" #field}
	    SYM(GetVersion),
	    SYM(GetErrorString),
	    SYM(Create),
	    SYM(Destroy),
	    SYM(SetStream),
	    SYM(CreateTensorDescriptor),
	    SYM(SetTensorNdDescriptor),
	    SYM(DestroyTensorDescriptor),
	    SYM(CreateFilterDescriptor),
	    SYM(SetFilterNdDescriptor),
	    SYM(DestroyFilterDescriptor),
	    SYM(CreateConvolutionDescriptor),
	    SYM(SetConvolutionNdDescriptor),
	    SYM(SetConvolutionGroupCount),
	    SYM(SetConvolutionMathType),
	    SYM(DestroyConvolutionDescriptor),
	    SYM(GetConvolutionBackwardDataAlgorithm_v7),
	    SYM(FindConvolutionBackwardDataAlgorithmEx),
	    SYM(GetConvolutionBackwardDataWorkspaceSize),
	    SYM(ConvolutionBackwardData),
	    SYM(GetConvolutionBackwardFilterAlgorithm_v7),
	    SYM(FindConvolutionBackwardFilterAlgorithmEx),
	    SYM(GetConvolutionBackwardFilterWorkspaceSize),
	    SYM(ConvolutionBackwardFilter),
	    SYM(ConvolutionBackwardBias),
#undef SYM
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (*syms[i].slot == NULL) {
			snprintf(err, CG_ERR_LEN, "%s has no %s (not cuDNN 9?)", CUDNN_SONAME, syms[i].name);
			pthread_mutex_unlock(&load_mu);
			return NULL;
		}
	}
	size_t v = t.GetVersion();  // major*10000 + minor*100 + patch since cuDNN 9
	if (v / 10000 != 9) {
		snprintf(err, CG_ERR_LEN, "%s is cuDNN version %zu; ConvGrad needs cuDNN 9", CUDNN_SONAME, v);
		pthread_mutex_unlock(&load_mu);
		return NULL;
	}
	real_table = t;
	real_loaded = 1;
	pthread_mutex_unlock(&load_mu);
	return &real_table;
}

// ---- planning ----

static int check(const cg_cudnn *t, int st, const char *what, char *err) {
	if (st == CG_CUDNN_STATUS_SUCCESS) return 0;
	const char *s = t->GetErrorString ? t->GetErrorString(st) : NULL;
	snprintf(err, CG_ERR_LEN, "%s: %s (cuDNN status %d)", what, s ? s : "error", st);
	return -1;
}

static void plan_free(const cg_cudnn *t, cg_plan *pl) {
	if (pl->dy_desc) t->DestroyTensorDescriptor(pl->dy_desc);
	if (pl->x_desc) t->DestroyTensorDescriptor(pl->x_desc);
	if (pl->db_desc) t->DestroyTensorDescriptor(pl->db_desc);
	if (pl->w_desc) t->DestroyFilterDescriptor(pl->w_desc);
	if (pl->conv_desc) t->DestroyConvolutionDescriptor(pl->conv_desc);
	free(pl);
}

void cg_planner_free(cg_planner *p) {
	for (cg_plan *pl = p->plans, *next; pl != NULL; pl = next) {
		next = pl->next;
		plan_free(p->t, pl);
	}
	p->plans = NULL;
	p->nplans = 0;
}

static int tensor4(const cg_cudnn *t, cg_desc *d, int dtype, const int64_t s[4], char *err, const char *name) {
	int dims[4], strides[4];
	for (int i = 0; i < 4; i++) dims[i] = (int)s[i];
	strides[3] = 1;
	for (int i = 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
	char what[64];
	snprintf(what, sizeof what, "cudnnSetTensorNdDescriptor(%s)", name);
	if (check(t, t->CreateTensorDescriptor(d), "cudnnCreateTensorDescriptor", err)) return -1;
	return check(t, t->SetTensorNdDescriptor(*d, dtype, 4, dims, strides), what, err);
}

// base_math is the math type the convolution descriptor starts with (and
// keeps, for float without TF32): float runs as TF32 on tensor cores only
// under CUDNN_DEFAULT_MATH, and CUDNN_FMA_MATH rules that out; the half
// types accumulate in float on tensor cores.
static int base_math(int dtype, int allow_tf32) {
	switch (dtype) {
	case CG_CUDNN_DATA_FLOAT:
		return allow_tf32 ? CG_CUDNN_DEFAULT_MATH : CG_CUDNN_FMA_MATH;
	case CG_CUDNN_DATA_HALF:
	case CG_CUDNN_DATA_BFLOAT16:
		return CG_CUDNN_TENSOR_OP_MATH;
	}
	return CG_CUDNN_DEFAULT_MATH;
}

// chosen_math is the math type an algorithm runs under: the one the
// search reports, except that float without TF32 stays on FMA math.
static int chosen_math(const cg_planner *p, int dtype, int reported) {
	if (dtype == CG_CUDNN_DATA_FLOAT && !p->s.allow_tf32) return CG_CUDNN_FMA_MATH;
	return reported;
}

static int pick(const cg_cudnn_perf *perf, int n) {
	for (int i = 0; i < n; i++)
		if (perf[i].status == CG_CUDNN_STATUS_SUCCESS) return i;
	return -1;
}

static int search_data(cg_planner *p, cg_handle h, cg_plan *pl, const cg_search_buffers *buf, char *err) {
	const cg_cudnn *t = p->t;
	cg_cudnn_perf perf[CG_CUDNN_BWD_DATA_ALGO_COUNT];
	int n = 0, st;
	if (check(t, t->SetConvolutionMathType(pl->conv_desc, base_math(pl->dtype, p->s.allow_tf32)),
	          "cudnnSetConvolutionMathType", err))
		return -1;
	memset(perf, 0, sizeof perf);
	if (p->s.exhaustive && buf != NULL)
		st = t->FindConvolutionBackwardDataAlgorithmEx(h, pl->w_desc, buf->w, pl->dy_desc, buf->dy, pl->conv_desc,
		                                               pl->x_desc, buf->dx, CG_CUDNN_BWD_DATA_ALGO_COUNT, &n, perf,
		                                               buf->ws, buf->ws_size);
	else
		st = t->GetConvolutionBackwardDataAlgorithm_v7(h, pl->w_desc, pl->dy_desc, pl->conv_desc, pl->x_desc,
		                                               CG_CUDNN_BWD_DATA_ALGO_COUNT, &n, perf);
	p->searches++;
	if (check(t, st, "choosing the backward-data algorithm", err)) return -1;
	int i = pick(perf, n);
	if (i < 0) {
		snprintf(err, CG_ERR_LEN, "cuDNN offers no backward-data algorithm for this convolution (%d tried)", n);
		return -1;
	}
	pl->data_algo = perf[i].algo;
	pl->data_math = chosen_math(p, pl->dtype, perf[i].math_type);
	if (check(t, t->SetConvolutionMathType(pl->conv_desc, pl->data_math), "cudnnSetConvolutionMathType", err) ||
	    check(t, t->GetConvolutionBackwardDataWorkspaceSize(h, pl->w_desc, pl->dy_desc, pl->conv_desc, pl->x_desc,
	                                                        pl->data_algo, &pl->data_ws),
	          "cudnnGetConvolutionBackwardDataWorkspaceSize", err))
		return -1;
	pl->searched_data = 1;
	return 0;
}

static int search_filter(cg_planner *p, cg_handle h, cg_plan *pl, const cg_search_buffers *buf, char *err) {
	const cg_cudnn *t = p->t;
	cg_cudnn_perf perf[CG_CUDNN_BWD_FILTER_ALGO_COUNT];
	int n = 0, st;
	if (check(t, t->SetConvolutionMathType(pl->conv_desc, base_math(pl->dtype, p->s.allow_tf32)),
	          "cudnnSetConvolutionMathType", err))
		return -1;
	memset(perf, 0, sizeof perf);
	if (p->s.exhaustive && buf != NULL)
		st = t->FindConvolutionBackwardFilterAlgorithmEx(h, pl->x_desc, buf->x, pl->dy_desc, buf->dy, pl->conv_desc,
		                                                 pl->w_desc, buf->dw, CG_CUDNN_BWD_FILTER_ALGO_COUNT, &n, perf,
		                                                 buf->ws, buf->ws_size);
	else
		st = t->GetConvolutionBackwardFilterAlgorithm_v7(h, pl->x_desc, pl->dy_desc, pl->conv_desc, pl->w_desc,
		                                                 CG_CUDNN_BWD_FILTER_ALGO_COUNT, &n, perf);
	p->searches++;
	if (check(t, st, "choosing the backward-filter algorithm", err)) return -1;
	int i = pick(perf, n);
	if (i < 0) {
		snprintf(err, CG_ERR_LEN, "cuDNN offers no backward-filter algorithm for this convolution (%d tried)", n);
		return -1;
	}
	pl->filter_algo = perf[i].algo;
	pl->filter_math = chosen_math(p, pl->dtype, perf[i].math_type);
	if (check(t, t->SetConvolutionMathType(pl->conv_desc, pl->filter_math), "cudnnSetConvolutionMathType", err) ||
	    check(t, t->GetConvolutionBackwardFilterWorkspaceSize(h, pl->x_desc, pl->dy_desc, pl->conv_desc, pl->w_desc,
	                                                          pl->filter_algo, &pl->filter_ws),
	          "cudnnGetConvolutionBackwardFilterWorkspaceSize", err))
		return -1;
	pl->searched_filter = 1;
	return 0;
}

// symmetric_pads returns the one pad per spatial dimension that cuDNN
// (whose padding is symmetric) takes: the begin pad, which maps every
// output position to the same input positions. It is exact only where the
// end pad does not change the output size (the extra or missing end
// padding is never read); other asymmetric pads are an error.
static int symmetric_pads(const cg_attrs *a, const cg_dims *d, int pads[2], char *err) {
	int64_t in[2] = {d->h, d->w}, k[2] = {d->kh, d->kw}, out[2] = {d->oh, d->ow};
	for (int i = 0; i < 2; i++) {
		int64_t b = a->pads[i], e = a->pads[i + 2];
		pads[i] = (int)b;
		if (b == e) continue;
		int64_t span = a->dilations[i] * (k[i] - 1) + 1, padded = in[i] + 2 * b;
		int64_t sym = padded < span ? 0 : (padded - span) / a->strides[i] + 1;
		if (sym != out[i]) {
			snprintf(err, CG_ERR_LEN,
			         "pads begin %lld and end %lld of spatial dimension %d: cuDNN pads symmetrically, and %lld on both "
			         "sides gives %lld outputs, not %lld (pad the input explicitly, or keep this convolution's "
			         "backward pass in standard operators)",
			         (long long)b, (long long)e, i, (long long)b, (long long)sym, (long long)out[i]);
			return -1;
		}
	}
	return 0;
}

static cg_plan *plan_new(cg_planner *p, const cg_dims *d, int dtype, char *err) {
	const cg_cudnn *t = p->t;
	int pads[2];
	if (symmetric_pads(&p->a, d, pads, err)) return NULL;
	cg_plan *pl = calloc(1, sizeof *pl);
	if (pl == NULL) {
		snprintf(err, CG_ERR_LEN, "out of memory");
		return NULL;
	}
	int64_t dy[4] = {d->n, d->co, d->oh, d->ow}, x[4] = {d->n, d->ci, d->h, d->w},
	        w[4] = {d->co, d->cig, d->kh, d->kw}, db[4] = {1, d->co, 1, 1};
	memcpy(pl->dy, dy, sizeof dy);
	memcpy(pl->x, x, sizeof x);
	memcpy(pl->w, w, sizeof w);
	pl->dtype = dtype;
	int wdims[4] = {(int)w[0], (int)w[1], (int)w[2], (int)w[3]};
	int strides[2] = {(int)p->a.strides[0], (int)p->a.strides[1]};
	int dil[2] = {(int)p->a.dilations[0], (int)p->a.dilations[1]};
	int compute = dtype == CG_CUDNN_DATA_DOUBLE ? CG_CUDNN_DATA_DOUBLE : CG_CUDNN_DATA_FLOAT;
	if (tensor4(t, &pl->dy_desc, dtype, dy, err, "dY") || tensor4(t, &pl->x_desc, dtype, x, err, "X") ||
	    tensor4(t, &pl->db_desc, dtype, db, err, "dB") ||
	    check(t, t->CreateFilterDescriptor(&pl->w_desc), "cudnnCreateFilterDescriptor", err) ||
	    check(t, t->SetFilterNdDescriptor(pl->w_desc, dtype, CG_CUDNN_TENSOR_NCHW, 4, wdims),
	          "cudnnSetFilterNdDescriptor(W)", err) ||
	    check(t, t->CreateConvolutionDescriptor(&pl->conv_desc), "cudnnCreateConvolutionDescriptor", err) ||
	    check(t, t->SetConvolutionNdDescriptor(pl->conv_desc, 2, pads, strides, dil, CG_CUDNN_CROSS_CORRELATION, compute),
	          "cudnnSetConvolutionNdDescriptor", err) ||
	    check(t, t->SetConvolutionGroupCount(pl->conv_desc, (int)p->a.group), "cudnnSetConvolutionGroupCount", err) ||
	    check(t, t->SetConvolutionMathType(pl->conv_desc, base_math(dtype, p->s.allow_tf32)),
	          "cudnnSetConvolutionMathType", err)) {
		plan_free(t, pl);
		return NULL;
	}
	return pl;
}

// plan_find returns the cached plan for the shapes and type, or NULL.
static cg_plan *plan_find(const cg_planner *p, const cg_dims *d, int dtype) {
	int64_t dy[4] = {d->n, d->co, d->oh, d->ow}, x[4] = {d->n, d->ci, d->h, d->w},
	        w[4] = {d->co, d->cig, d->kh, d->kw};
	for (cg_plan *q = p->plans; q != NULL; q = q->next)
		if (q->dtype == dtype && !memcmp(q->dy, dy, sizeof dy) && !memcmp(q->x, x, sizeof x) &&
		    !memcmp(q->w, w, sizeof w))
			return q;
	return NULL;
}

// cg_max_plans bounds a kernel's cache: shapes beyond it evict the oldest.
#define CG_MAX_PLANS 16

cg_plan *cg_plan_get(cg_planner *p, cg_handle h, const cg_dims *d, int dtype, int want_dx, int want_dw,
                     const cg_search_buffers *buf, char *err) {
	cg_plan *pl = plan_find(p, d, dtype);
	if (pl == NULL) {
		pl = plan_new(p, d, dtype, err);
		if (pl == NULL) return NULL;
		pl->next = p->plans;
		p->plans = pl;
		if (++p->nplans > CG_MAX_PLANS) {
			cg_plan *q = p->plans;
			while (q->next->next != NULL) q = q->next;
			plan_free(p->t, q->next);
			q->next = NULL;
			p->nplans--;
		}
	}
	if (want_dx && !pl->searched_data && search_data(p, h, pl, buf, err)) return NULL;
	if (want_dw && !pl->searched_filter && search_filter(p, h, pl, buf, err)) return NULL;
	return pl;
}

// ---- compute ----

int cg_cudnn_compute(cg_planner *p, cg_handle h, const cg_dims *d, int dtype, const cg_io *io, cg_alloc_fn alloc,
                     cg_free_fn release, void *actx, char *err) {
	const cg_cudnn *t = p->t;
	cg_search_buffers sb = {io->dy, io->x, io->w, io->dx, io->dw, NULL, 0};
	void *search_ws = NULL;
	cg_plan *known = plan_find(p, d, dtype);
	int must_search = known == NULL || (io->dx != NULL && !known->searched_data) || (io->dw != NULL && !known->searched_filter);
	if (p->s.exhaustive && must_search) {
		// Time the algorithms with as much workspace as the limit allows.
		for (size_t sz = p->s.max_workspace; sz >= ((size_t)1 << 20); sz /= 2) {
			if ((search_ws = alloc(actx, sz)) != NULL) {
				sb.ws = search_ws;
				sb.ws_size = sz;
				break;
			}
		}
	}
	cg_plan *pl = cg_plan_get(p, h, d, dtype, io->dx != NULL, io->dw != NULL, &sb, err);
	if (search_ws != NULL) release(actx, search_ws);
	if (pl == NULL) return -1;
	float f1 = 1, f0 = 0;
	double d1 = 1, d0 = 0;
	const void *one = dtype == CG_CUDNN_DATA_DOUBLE ? (const void *)&d1 : (const void *)&f1;
	const void *zero = dtype == CG_CUDNN_DATA_DOUBLE ? (const void *)&d0 : (const void *)&f0;
	if (io->dx != NULL) {
		void *ws = NULL;
		if (pl->data_ws > 0 && (ws = alloc(actx, pl->data_ws)) == NULL) {
			snprintf(err, CG_ERR_LEN, "allocating %zu bytes of backward-data workspace failed", pl->data_ws);
			return -1;
		}
		int st = t->SetConvolutionMathType(pl->conv_desc, pl->data_math);
		if (st == CG_CUDNN_STATUS_SUCCESS)
			st = t->ConvolutionBackwardData(h, one, pl->w_desc, io->w, pl->dy_desc, io->dy, pl->conv_desc,
			                                pl->data_algo, ws, pl->data_ws, zero, pl->x_desc, io->dx);
		if (ws != NULL) release(actx, ws);
		if (check(t, st, "cudnnConvolutionBackwardData", err)) return -1;
	}
	if (io->dw != NULL) {
		void *ws = NULL;
		if (pl->filter_ws > 0 && (ws = alloc(actx, pl->filter_ws)) == NULL) {
			snprintf(err, CG_ERR_LEN, "allocating %zu bytes of backward-filter workspace failed", pl->filter_ws);
			return -1;
		}
		int st = t->SetConvolutionMathType(pl->conv_desc, pl->filter_math);
		if (st == CG_CUDNN_STATUS_SUCCESS)
			st = t->ConvolutionBackwardFilter(h, one, pl->x_desc, io->x, pl->dy_desc, io->dy, pl->conv_desc,
			                                  pl->filter_algo, ws, pl->filter_ws, zero, pl->w_desc, io->dw);
		if (ws != NULL) release(actx, ws);
		if (check(t, st, "cudnnConvolutionBackwardFilter", err)) return -1;
	}
	if (io->db != NULL &&
	    check(t, t->ConvolutionBackwardBias(h, one, pl->dy_desc, io->dy, zero, pl->db_desc, io->db),
	          "cudnnConvolutionBackwardBias", err))
		return -1;
	return 0;
}
