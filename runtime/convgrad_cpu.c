// The CPU kernel of ConvGrad: direct loops, written for correctness and
// split into independent units (one per filter for dW and dB, one per
// (image, input channel) for dX) that ONNX Runtime's thread pool can run
// in parallel, since no two units write the same element.
#include <string.h>

#include "convgrad.h"

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

#define CG_CPU_KERNEL(T, SUFFIX)                                                                                  \
	/* The filter gradient and bias gradient of filter c. */                                                   \
	static void cg_dw_##SUFFIX(const cg_attrs *a, const cg_dims *d, const T *dy, const T *x, T *dw, T *db,     \
	                           int64_t c) {                                                                      \
		const int64_t cog = d->co / a->group, g = c / cog, ohw = d->oh * d->ow, hw = d->h * d->w;         \
		if (db != NULL) {                                                                                    \
			double acc = 0;                                                                               \
			for (int64_t n = 0; n < d->n; n++) {                                                          \
				const T *g0 = dy + (n * d->co + c) * ohw;                                             \
				for (int64_t p = 0; p < ohw; p++) acc += g0[p];                                       \
			}                                                                                             \
			db[c] = (T)acc;                                                                               \
		}                                                                                                    \
		if (dw == NULL) return;                                                                              \
		for (int64_t icg = 0; icg < d->cig; icg++) {                                                         \
			const int64_t ci = g * d->cig + icg;                                                          \
			for (int64_t ky = 0; ky < d->kh; ky++) {                                                      \
				int64_t ylo, yhi;                                                                     \
				span(d->h, d->oh, a->strides[0], a->pads[0], ky, a->dilations[0], &ylo, &yhi);        \
				for (int64_t kx = 0; kx < d->kw; kx++) {                                              \
					int64_t xlo, xhi;                                                             \
					span(d->w, d->ow, a->strides[1], a->pads[1], kx, a->dilations[1], &xlo, &xhi); \
					double acc = 0;                                                               \
					for (int64_t n = 0; n < d->n; n++) {                                          \
						const T *gc = dy + (n * d->co + c) * ohw;                             \
						const T *xc = x + (n * d->ci + ci) * hw;                              \
						for (int64_t oy = ylo; oy < yhi; oy++) {                              \
							const int64_t iy = oy * a->strides[0] - a->pads[0] + ky * a->dilations[0]; \
							const T *gr = gc + oy * d->ow;                                \
							const int64_t off = iy * d->w - a->pads[1] + kx * a->dilations[1];    \
							for (int64_t ox = xlo; ox < xhi; ox++)                        \
								acc += (double)gr[ox] * xc[off + ox * a->strides[1]]; \
						}                                                                     \
					}                                                                             \
					dw[((c * d->cig + icg) * d->kh + ky) * d->kw + kx] = (T)acc;                  \
				}                                                                                     \
			}                                                                                             \
		}                                                                                                    \
	}                                                                                                            \
                                                                                                                     \
	/* The input gradient of channel ci of image n: the transposed convolution of dY. */                       \
	static void cg_dx_##SUFFIX(const cg_attrs *a, const cg_dims *d, const T *dy, const T *w, T *dx, int64_t n, \
	                           int64_t ci) {                                                                     \
		const int64_t cog = d->co / a->group, g = ci / d->cig, icg = ci % d->cig;                          \
		const int64_t ohw = d->oh * d->ow;                                                                   \
		T *dxc = dx + (n * d->ci + ci) * d->h * d->w;                                                        \
		memset(dxc, 0, sizeof(T) * d->h * d->w);                                                             \
		for (int64_t oc = 0; oc < cog; oc++) {                                                               \
			const int64_t c = g * cog + oc;                                                               \
			const T *gc = dy + (n * d->co + c) * ohw;                                                     \
			for (int64_t ky = 0; ky < d->kh; ky++) {                                                      \
				int64_t ylo, yhi;                                                                     \
				span(d->h, d->oh, a->strides[0], a->pads[0], ky, a->dilations[0], &ylo, &yhi);        \
				for (int64_t kx = 0; kx < d->kw; kx++) {                                              \
					int64_t xlo, xhi;                                                             \
					span(d->w, d->ow, a->strides[1], a->pads[1], kx, a->dilations[1], &xlo, &xhi); \
					const T wv = w[((c * d->cig + icg) * d->kh + ky) * d->kw + kx];               \
					for (int64_t oy = ylo; oy < yhi; oy++) {                                      \
						const int64_t iy = oy * a->strides[0] - a->pads[0] + ky * a->dilations[0]; \
						const T *gr = gc + oy * d->ow;                                        \
						const int64_t off = iy * d->w - a->pads[1] + kx * a->dilations[1]; \
						for (int64_t ox = xlo; ox < xhi; ox++) dxc[off + ox * a->strides[1]] += gr[ox] * wv; \
					}                                                                             \
				}                                                                                     \
			}                                                                                             \
		}                                                                                                    \
	}                                                                                                            \
                                                                                                                     \
	void cg_cpu_unit_##SUFFIX(const cg_cpu_job *j, int64_t u) {                                                \
		const cg_dims *d = &j->d;                                                                            \
		if (u < d->co) {                                                                                     \
			if (j->dw != NULL || j->db != NULL)                                                           \
				cg_dw_##SUFFIX(&j->a, d, (const T *)j->dy, (const T *)j->x, (T *)j->dw, (T *)j->db, u); \
			return;                                                                                       \
		}                                                                                                    \
		u -= d->co;                                                                                          \
		if (j->dx != NULL) cg_dx_##SUFFIX(&j->a, d, (const T *)j->dy, (const T *)j->w, (T *)j->dx, u / d->ci, u % d->ci); \
	}

CG_CPU_KERNEL(float, float)
CG_CPU_KERNEL(double, double)

int64_t cg_cpu_units(const cg_cpu_job *j) { return j->d.co + j->d.n * j->d.ci; }

void cg_cpu_unit(const cg_cpu_job *j, int64_t u) {
	if (j->is_double)
		cg_cpu_unit_double(j, u);
	else
		cg_cpu_unit_float(j, u);
}

void cg_cpu_run(const cg_cpu_job *j) {
	for (int64_t u = 0, n = cg_cpu_units(j); u < n; u++) cg_cpu_unit(j, u);
}
