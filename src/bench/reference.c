/*
 * Host references for the benches' accuracy checks. See reference.h.
 */
#include "bench/reference.h"

#include <math.h>

/* ---- host references (double, plain loops) ------------------------------ */

static double dot(const double *x, const double *y, int64_t n)
{
	double s = 0.0;
	int64_t i;

	for (i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

/*
 * One query row. Two passes over k (max, then exp-weighted sum) recompute
 * the scores instead of storing them, so the reference needs no allocation.
 */
static void ref_attention_row(const double *q, const double *k, const double *v, double *o,
			      int64_t s_kv, int64_t d, double scale)
{
	double mx = -INFINITY, sum = 0.0, w;
	int64_t j, c;

	for (j = 0; j < s_kv; j++)
		mx = fmax(mx, dot(q, k + j * d, d) * scale);
	for (c = 0; c < d; c++)
		o[c] = 0.0;
	for (j = 0; j < s_kv; j++) {
		w = exp(dot(q, k + j * d, d) * scale - mx);
		sum += w;
		for (c = 0; c < d; c++)
			o[c] += w * v[j * d + c];
	}
	for (c = 0; c < d; c++)
		o[c] /= sum;
}

void kb__ref_attention(const double *q, const double *k, const double *v, double *o,
		       int64_t g, int64_t s_kv, int64_t d, double scale)
{
	int64_t i;

	for (i = 0; i < g; i++)
		ref_attention_row(q + i * d, k, v, o + i * d, s_kv, d, scale);
}

void kb__ref_gemm(const double *a, const double *b, double *c, int64_t m, int64_t k,
		  int64_t n)
{
	int64_t i, j, p;

	for (i = 0; i < m; i++) {
		for (j = 0; j < n; j++) {
			double s = 0.0;

			for (p = 0; p < k; p++)
				s += a[i * k + p] * b[p * n + j];
			c[i * n + j] = s;
		}
	}
}

void kb__err_stats(const float *got, const double *want, size_t n, double *max_abs,
		   double *max_rel)
{
	double amax = 0.0, wmax = 0.0, diff;
	int bad = 0; /* a NaN was seen: comparisons would silently drop it */
	size_t i;

	for (i = 0; i < n; i++) {
		diff = fabs((double)got[i] - want[i]);
		bad |= isnan(diff) || isnan(want[i]);
		if (diff > amax)
			amax = diff;
		if (fabs(want[i]) > wmax)
			wmax = fabs(want[i]);
	}
	if (bad)
		amax = NAN;
	if (max_abs)
		*max_abs = amax;
	if (max_rel)
		*max_rel = wmax > 0.0 && !isinf(wmax) ? amax / wmax : amax;
}
