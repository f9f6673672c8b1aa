/*
 * Host references for the benches' accuracy checks. See reference.h.
 */
#include "bench/reference.h"

#include <math.h>
#include <stdlib.h>

/* ---- host references (double, plain loops) ------------------------------ */

static double dot(const double *x, const double *y, int64_t n)
{
	double s = 0.0;
	int64_t i;

	for (i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

enum { REF_CHUNK = 256 }; /* K/V rows per fetch: 256 x d doubles, in cache */

/*
 * Two passes over K (max, then exp-weighted sum) recompute the scores
 * instead of storing them. Every query row goes over the same chunk of
 * rows before the next chunk is fetched, and each row's max, sum and o
 * element still take their terms in increasing j, so the chunking changes
 * no bit of the result.
 */
int kb__ref_attention_rows(const double *q, kb_ref_rows_fn rows, void *payload, double *o,
			   int64_t g, int64_t s_kv, int64_t d, double scale)
{
	double *mx = malloc((size_t)(2 * g) * sizeof(double)), *sum = mx + g, w;
	const double *k, *v;
	int64_t i, j, j0, n, c;

	if (!mx)
		return -1;
	for (i = 0; i < g; i++) {
		mx[i] = -INFINITY;
		sum[i] = 0.0;
		for (c = 0; c < d; c++)
			o[i * d + c] = 0.0;
	}
	for (j0 = 0; j0 < s_kv; j0 += n) {
		n = s_kv - j0 < REF_CHUNK ? s_kv - j0 : REF_CHUNK;
		if (!(k = rows(payload, 0, j0, n)))
			goto fail;
		for (i = 0; i < g; i++)
			for (j = 0; j < n; j++)
				mx[i] = fmax(mx[i], dot(q + i * d, k + j * d, d) * scale);
	}
	for (j0 = 0; j0 < s_kv; j0 += n) {
		n = s_kv - j0 < REF_CHUNK ? s_kv - j0 : REF_CHUNK;
		if (!(k = rows(payload, 0, j0, n)) || !(v = rows(payload, 1, j0, n)))
			goto fail;
		for (i = 0; i < g; i++) {
			for (j = 0; j < n; j++) {
				w = exp(dot(q + i * d, k + j * d, d) * scale - mx[i]);
				sum[i] += w;
				for (c = 0; c < d; c++)
					o[i * d + c] += w * v[j * d + c];
			}
		}
	}
	for (i = 0; i < g; i++)
		for (c = 0; c < d; c++)
			o[i * d + c] /= sum[i];
	free(mx);
	return 0;
fail:
	free(mx);
	return -1;
}

/* Rows of K and V held in host arrays: no copy. */
typedef struct host_kv {
	const double *kv[2];
	int64_t d;
} host_kv;

static const double *host_rows(void *payload, int which, int64_t row0, int64_t rows)
{
	const host_kv *h = payload;

	(void)rows;
	return h->kv[which] + row0 * h->d;
}

int kb__ref_attention(const double *q, const double *k, const double *v, double *o,
		      int64_t g, int64_t s_kv, int64_t d, double scale)
{
	host_kv h = { { k, v }, d };

	return kb__ref_attention_rows(q, host_rows, &h, o, g, s_kv, d, scale);
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
