// The ConvGrad operator's attributes and shape checks, shared by the CPU
// and cuDNN kernels and the planning entry point.
#include <stdio.h>
#include <string.h>

#include "convgrad.h"

static int fail(char *err, const char *msg) {
	snprintf(err, CG_ERR_LEN, "%s", msg);
	return -1;
}

static int pair(int64_t out[2], const int64_t *v, size_t n, int64_t def, const char *name, int64_t min, char *err) {
	if (v == NULL) {
		out[0] = out[1] = def;
		return 0;
	}
	if (n != 2) {
		snprintf(err, CG_ERR_LEN, "%s has %zu values; only 2-D convolutions (2 values) are supported", name, n);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (v[i] < min || v[i] > (1 << 20)) {
			snprintf(err, CG_ERR_LEN, "%s[%d] = %lld is out of range", name, i, (long long)v[i]);
			return -1;
		}
		out[i] = v[i];
	}
	return 0;
}

int cg_attrs_set(cg_attrs *a, const int64_t *kernel, size_t nk, const int64_t *strides, size_t ns,
                 const int64_t *dilations, size_t nd, const int64_t *pads, size_t np, const int64_t *group,
                 char *err) {
	memset(a, 0, sizeof *a);
	a->has_kernel = kernel != NULL;
	if (pair(a->kernel, kernel, nk, 0, "kernel_shape", 1, err) ||
	    pair(a->strides, strides, ns, 1, "strides", 1, err) ||
	    pair(a->dilations, dilations, nd, 1, "dilations", 1, err))
		return -1;
	if (pads != NULL) {
		if (np != 4) {
			snprintf(err, CG_ERR_LEN, "pads has %zu values; only 2-D convolutions (4 values: top, left, bottom, right) are supported", np);
			return -1;
		}
		for (int i = 0; i < 4; i++) {
			if (pads[i] < 0 || pads[i] > (1 << 20)) {
				snprintf(err, CG_ERR_LEN, "pads[%d] = %lld is out of range", i, (long long)pads[i]);
				return -1;
			}
			a->pads[i] = pads[i];
		}
	}
	a->group = group != NULL ? *group : 1;
	if (a->group < 1 || a->group > (1 << 20)) {
		snprintf(err, CG_ERR_LEN, "group = %lld: want at least 1", (long long)a->group);
		return -1;
	}
	return 0;
}

static int rank4(const char *name, size_t n, const int64_t *s, char *err) {
	if (n != 4) {
		snprintf(err, CG_ERR_LEN, "input %s has rank %zu; only 2-D convolutions (4-D tensors) are supported", name, n);
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		if (s[i] < 1 || s[i] > ((int64_t)1 << 31) - 1) {
			snprintf(err, CG_ERR_LEN, "input %s has dimension %d of size %lld", name, i, (long long)s[i]);
			return -1;
		}
	}
	return 0;
}

int cg_dims_check(const cg_attrs *a, const int64_t *dy, size_t ndy, const int64_t *x, size_t nx, const int64_t *w,
                  size_t nw, cg_dims *d, char *err) {
	if (rank4("dY", ndy, dy, err) || rank4("X", nx, x, err) || rank4("W", nw, w, err))
		return -1;
	d->n = x[0], d->ci = x[1], d->h = x[2], d->w = x[3];
	d->co = w[0], d->cig = w[1], d->kh = w[2], d->kw = w[3];
	d->oh = dy[2], d->ow = dy[3];
	if (d->ci % a->group != 0 || d->co % a->group != 0) {
		snprintf(err, CG_ERR_LEN, "group %lld does not divide X's %lld channels and W's %lld filters",
		         (long long)a->group, (long long)d->ci, (long long)d->co);
		return -1;
	}
	if (d->cig * a->group != d->ci) {
		snprintf(err, CG_ERR_LEN, "W has %lld input channels per group; X's %lld channels in %lld groups need %lld",
		         (long long)d->cig, (long long)d->ci, (long long)a->group, (long long)(d->ci / a->group));
		return -1;
	}
	if (a->has_kernel && (a->kernel[0] != d->kh || a->kernel[1] != d->kw)) {
		snprintf(err, CG_ERR_LEN, "kernel_shape [%lld %lld] differs from W's [%lld %lld]", (long long)a->kernel[0],
		         (long long)a->kernel[1], (long long)d->kh, (long long)d->kw);
		return -1;
	}
	if (dy[0] != d->n || dy[1] != d->co) {
		snprintf(err, CG_ERR_LEN, "dY is [%lld %lld …]; want [%lld %lld …] (X's batch, W's filters)",
		         (long long)dy[0], (long long)dy[1], (long long)d->n, (long long)d->co);
		return -1;
	}
	int64_t k[2] = {d->kh, d->kw}, in[2] = {d->h, d->w}, out[2] = {d->oh, d->ow};
	for (int i = 0; i < 2; i++) {
		int64_t span = a->dilations[i] * (k[i] - 1) + 1;
		int64_t padded = in[i] + a->pads[i] + a->pads[i + 2];
		int64_t want = padded < span ? 0 : (padded - span) / a->strides[i] + 1;
		if (want != out[i]) {
			snprintf(err, CG_ERR_LEN, "dY's spatial size %lld (dimension %d) does not match the convolution's output %lld",
			         (long long)out[i], i + 2, (long long)want);
			return -1;
		}
	}
	// Every output is indexed with int64_t, but cuDNN takes int: keep each
	// tensor below 2^31 elements.
	const int64_t lim = ((int64_t)1 << 31) - 1;
	if (d->n * d->ci > lim / (d->h * d->w) || d->n * d->co > lim / (d->oh * d->ow) || d->co * d->cig > lim / (d->kh * d->kw))
		return fail(err, "a tensor has 2^31 elements or more");
	return 0;
}
