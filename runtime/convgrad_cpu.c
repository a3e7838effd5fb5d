// The CPU kernel of ConvGrad: per image and group, the input patches are
// laid out as columns (im2col), dW becomes dot products of dY's rows with
// the columns and dX the columns' gradient scattered back (col2im). The
// work splits into one unit per group, which ONNX Runtime's thread pool can
// run in parallel since no two groups write the same element.
#include <stdlib.h>
#include <string.h>

#include "convgrad.h"

// The inner loops (dot products in independent lanes, axpy) are written
// for the vectorizer, which -O2 (cgo's default) runs only in its cheapest
// form.
#pragma GCC optimize("O3")

// span returns the range [*lo, *hi) of output positions o whose input
// position o*stride - pad + k*dil lies in [0, in).
static void span(int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t k, int64_t dil, int64_t *lo,
                 int64_t *hi) {
	int64_t first = pad - k * dil;  // o*stride >= first
	*lo = first <= 0 ? 0 : (first + stride - 1) / stride;
	int64_t last = in - 1 + pad - k * dil;  // o*stride <= last
	*hi = last < 0 ? 0 : last / stride + 1;
	if (*hi > out) *hi = out;
	if (*lo > *hi) *lo = *hi;
}

#define CG_LANES 8

// The kernel for one element type T. Rows of the column matrix are indexed
// k = (icg*kh + ky)*kw + kx, its columns p = oy*ow + ox, as W's last three
// dimensions and dY's last two are.
#define CG_CPU_KERNEL(T, SUFFIX)                                                                                  \
	/* dot sums a·b in CG_LANES independent partial sums, which compilers vectorize. */                      \
	static T dot_##SUFFIX(const T *a, const T *b, int64_t n) {                                                  \
		T s[CG_LANES] = {0};                                                                                 \
		int64_t i = 0;                                                                                       \
		for (; i + CG_LANES <= n; i += CG_LANES)                                                             \
			for (int j = 0; j < CG_LANES; j++) s[j] += a[i + j] * b[i + j];                               \
		T r = 0;                                                                                             \
		for (int j = 0; j < CG_LANES; j++) r += s[j];                                                        \
		for (; i < n; i++) r += a[i] * b[i];                                                                 \
		return r;                                                                                            \
	}                                                                                                            \
                                                                                                                     \
	/* im2col (scatter = 0) fills col from channel group g of image n of x; col2im (scatter = 1) adds col  */ \
	/* into x, which must be zeroed first.                                                                  */ \
	static void cols_##SUFFIX(const cg_attrs *a, const cg_dims *d, T *x, T *col, int64_t n, int64_t g,          \
	                          int scatter) {                                                                     \
		const int64_t p = d->oh * d->ow, hw = d->h * d->w;                                                   \
		for (int64_t icg = 0; icg < d->cig; icg++) {                                                         \
			T *xc = x + (n * d->ci + g * d->cig + icg) * hw;                                              \
			for (int64_t ky = 0; ky < d->kh; ky++) {                                                      \
				int64_t ylo, yhi;                                                                     \
				span(d->h, d->oh, a->strides[0], a->pads[0], ky, a->dilations[0], &ylo, &yhi);        \
				for (int64_t kx = 0; kx < d->kw; kx++) {                                              \
					int64_t xlo, xhi;                                                             \
					span(d->w, d->ow, a->strides[1], a->pads[1], kx, a->dilations[1], &xlo, &xhi); \
					T *row = col + ((icg * d->kh + ky) * d->kw + kx) * p;                         \
					if (!scatter) memset(row, 0, sizeof(T) * p);                                  \
					for (int64_t oy = ylo; oy < yhi; oy++) {                                      \
						const int64_t iy = oy * a->strides[0] - a->pads[0] + ky * a->dilations[0]; \
						const int64_t off = iy * d->w - a->pads[1] + kx * a->dilations[1];    \
						T *r = row + oy * d->ow;                                              \
						const int64_t s = a->strides[1];                                      \
						if (scatter)                                                          \
							for (int64_t ox = xlo; ox < xhi; ox++) xc[off + ox * s] += r[ox]; \
						else                                                                  \
							for (int64_t ox = xlo; ox < xhi; ox++) r[ox] = xc[off + ox * s]; \
					}                                                                             \
				}                                                                                     \
			}                                                                                             \
		}                                                                                                    \
	}                                                                                                            \
                                                                                                                     \
	static int group_##SUFFIX(const cg_cpu_job *j, int64_t g) {                                                 \
		const cg_attrs *a = &j->a;                                                                           \
		const cg_dims *d = &j->d;                                                                            \
		const T *dy = j->dy, *w = j->w;                                                                      \
		T *dx = j->dx, *dw = j->dw, *db = j->db;                                                             \
		const int64_t cog = d->co / a->group, p = d->oh * d->ow, k = d->cig * d->kh * d->kw;               \
		if (db != NULL)                                                                                      \
			for (int64_t oc = 0; oc < cog; oc++) {                                                        \
				double acc = 0;                                                                       \
				for (int64_t n = 0; n < d->n; n++) {                                                  \
					const T *r = dy + (n * d->co + g * cog + oc) * p;                             \
					for (int64_t i = 0; i < p; i++) acc += r[i];                                  \
				}                                                                                     \
				db[g * cog + oc] = (T)acc;                                                            \
			}                                                                                             \
		if (dx == NULL && dw == NULL) return 0;                                                              \
		T *col = malloc(sizeof(T) * k * p);                                                                  \
		double *acc = dw != NULL ? calloc(cog * k, sizeof(double)) : NULL;                                   \
		if (col == NULL || (dw != NULL && acc == NULL)) {                                                    \
			free(col);                                                                                    \
			free(acc);                                                                                    \
			return -1;                                                                                    \
		}                                                                                                    \
		for (int64_t n = 0; n < d->n; n++) {                                                                 \
			const T *dyg = dy + (n * d->co + g * cog) * p;                                                \
			if (dw != NULL) {                                                                             \
				cols_##SUFFIX(a, d, (T *)j->x, col, n, g, 0);                                         \
				for (int64_t r = 0; r < k; r++)                                                       \
					for (int64_t oc = 0; oc < cog; oc++)                                          \
						acc[oc * k + r] += dot_##SUFFIX(dyg + oc * p, col + r * p, p);        \
			}                                                                                             \
			if (dx != NULL) {                                                                             \
				/* dcol[r] = sum over oc of W[oc, r]·dY[oc], then scattered into dX. */              \
				for (int64_t r = 0; r < k; r++) {                                                     \
					T *cr = col + r * p;                                                          \
					memset(cr, 0, sizeof(T) * p);                                                 \
					for (int64_t oc = 0; oc < cog; oc++) {                                        \
						const T wv = w[(g * cog + oc) * k + r], *gr = dyg + oc * p;           \
						for (int64_t i = 0; i < p; i++) cr[i] += wv * gr[i];                  \
					}                                                                             \
				}                                                                                     \
				memset(dx + (n * d->ci + g * d->cig) * d->h * d->w, 0, sizeof(T) * d->cig * d->h * d->w); \
				cols_##SUFFIX(a, d, dx, col, n, g, 1);                                                \
			}                                                                                             \
		}                                                                                                    \
		if (dw != NULL)                                                                                      \
			for (int64_t i = 0; i < cog * k; i++) dw[g * cog * k + i] = (T)acc[i];                        \
		free(col);                                                                                           \
		free(acc);                                                                                           \
		return 0;                                                                                            \
	}

CG_CPU_KERNEL(float, float)
CG_CPU_KERNEL(double, double)

int64_t cg_cpu_units(const cg_cpu_job *j) { return j->a.group; }

void cg_cpu_unit(cg_cpu_job *j, int64_t g) {
	int rc = j->is_double ? group_double(j, g) : group_float(j, g);
	if (rc != 0) __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);  // units may run on several threads
}

int cg_cpu_run(cg_cpu_job *j) {
	for (int64_t g = 0, n = cg_cpu_units(j); g < n; g++) cg_cpu_unit(j, g);
	return __atomic_load_n(&j->failed, __ATOMIC_RELAXED) ? -1 : 0;
}
