/*
 * Host references for the benches' accuracy checks. See reference.h.
 */
#include "bench/reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd.h"

/* ---- host references (double) ------------------------------------------- */

enum { REF_CHUNK = 256 }; /* K/V rows per fetch: 256 x d doubles, in cache */

typedef double v4d __attribute__((vector_size(32)));

enum { LANES = 4 /* query rows per vector */ };

/* Lane by lane: 0 + x would turn -0 into +0. A macro: a function returning
 * a 32-byte vector would change the ABI between the clones (-Wpsabi). */
#define BCAST(x) ((v4d){ (x), (x), (x), (x) })

/*
 * Scores of 2 x LANES query rows (qt + i0: q transposed, d rows of g4
 * values) against 4 key rows k .. k + 3d: 8 independent sums in
 * registers, each started at 0.0 and taking q[i][c] * k[j][c] in
 * increasing c.
 */
KB_VEC_CLONES
static void scores_8x4(const double *qt, int64_t g4, const double *k, int64_t d, v4d out[8])
{
	const double *k0 = k, *k1 = k + d, *k2 = k + 2 * d, *k3 = k + 3 * d;
	v4d a0 = BCAST(0.0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	v4d x, y, kv;

	for (int64_t c = 0; c < d; c++) {
		memcpy(&x, qt + c * g4, sizeof(x));
		memcpy(&y, qt + c * g4 + LANES, sizeof(y));
		kv = BCAST(k0[c]);
		a0 = a0 + x * kv;
		b0 = b0 + y * kv;
		kv = BCAST(k1[c]);
		a1 = a1 + x * kv;
		b1 = b1 + y * kv;
		kv = BCAST(k2[c]);
		a2 = a2 + x * kv;
		b2 = b2 + y * kv;
		kv = BCAST(k3[c]);
		a3 = a3 + x * kv;
		b3 = b3 + y * kv;
	}
	out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
	out[4] = b0, out[5] = b1, out[6] = b2, out[7] = b3;
}

/* The same for LANES query rows against one key row (the last rows of a
 * chunk). */
static void scores_4x1(const double *qt, int64_t g4, const double *k, int64_t d, v4d *out)
{
	v4d a = BCAST(0.0), x;

	for (int64_t c = 0; c < d; c++) {
		memcpy(&x, qt + c * g4, sizeof(x));
		a = a + x * BCAST(k[c]);
	}
	*out = a;
}

static void put_scores(double *s, int64_t n, int64_t g, int64_t i0, int64_t j, const v4d *a)
{
	for (int64_t l = 0; l < LANES && i0 + l < g; l++)
		s[(i0 + l) * n + j] = (*a)[l];
}

/*
 * Scores of every query row against a chunk of n key rows:
 * s[i * n + j] = sum over c in increasing order of q[i][c] * k[j][c],
 * starting from 0.0, each product and each sum rounded to double (the
 * build keeps -ffp-contract=off): the plain dot product's bits. Lanes are
 * query rows and several key rows run side by side, so a step keeps 8
 * independent sums going instead of one chain of dependent additions; no
 * sum is reassociated.
 */
static void chunk_scores(const double *qt, int64_t g, int64_t g4, const double *k, int64_t n,
			 int64_t d, double *s)
{
	v4d acc[8];
	int64_t j;

	/* g4 is a multiple of 2 * LANES (qt's padding rows are zero) */
	for (int64_t i0 = 0; i0 < g4; i0 += 2 * LANES) {
		for (j = 0; j + 4 <= n; j += 4) {
			scores_8x4(qt + i0, g4, k + j * d, d, acc);
			for (int jj = 0; jj < 4; jj++) {
				put_scores(s, n, g, i0, j + jj, &acc[jj]);
				put_scores(s, n, g, i0 + LANES, j + jj, &acc[4 + jj]);
			}
		}
		for (; j < n; j++) {
			scores_4x1(qt + i0, g4, k + j * d, d, &acc[0]);
			scores_4x1(qt + i0 + LANES, g4, k + j * d, d, &acc[1]);
			put_scores(s, n, g, i0, j, &acc[0]);
			put_scores(s, n, g, i0 + LANES, j, &acc[1]);
		}
	}
}

/*
 * o[c] += w[j] * v[j][c] for j < n in increasing j, for every c < d: each
 * element takes its terms in the plain loops' order; 16 elements stay in
 * registers across the rows.
 */
KB_VEC_CLONES
static void weighted_rows(double *o, const double *w, const double *v, int64_t n, int64_t d)
{
	v4d o0, o1, o2, o3, wv, x;
	int64_t c = 0, j;

	for (; c + 4 * LANES <= d; c += 4 * LANES) {
		memcpy(&o0, o + c, sizeof(o0));
		memcpy(&o1, o + c + LANES, sizeof(o1));
		memcpy(&o2, o + c + 2 * LANES, sizeof(o2));
		memcpy(&o3, o + c + 3 * LANES, sizeof(o3));
		for (j = 0; j < n; j++) {
			const double *vr = v + j * d + c;

			wv = BCAST(w[j]);
			memcpy(&x, vr, sizeof(x));
			o0 = o0 + wv * x;
			memcpy(&x, vr + LANES, sizeof(x));
			o1 = o1 + wv * x;
			memcpy(&x, vr + 2 * LANES, sizeof(x));
			o2 = o2 + wv * x;
			memcpy(&x, vr + 3 * LANES, sizeof(x));
			o3 = o3 + wv * x;
		}
		memcpy(o + c, &o0, sizeof(o0));
		memcpy(o + c + LANES, &o1, sizeof(o1));
		memcpy(o + c + 2 * LANES, &o2, sizeof(o2));
		memcpy(o + c + 3 * LANES, &o3, sizeof(o3));
	}
	for (; c < d; c++)
		for (j = 0; j < n; j++)
			o[c] += w[j] * v[j * d + c];
}

/*
 * Two passes over K (max, then exp-weighted sum) recompute the scores
 * instead of storing them. Every query row goes over the same chunk of
 * rows before the next chunk is fetched, and each row's max, sum and o
 * element still take their terms in increasing j, so the chunking changes
 * no bit of the result; the scores of a chunk are computed together
 * (chunk_scores), each with the plain dot product's bits.
 */
int kb__ref_attention_rows(const double *q, kb_ref_rows_fn rows, void *payload, double *o,
			   int64_t g, int64_t s_kv, int64_t d, double scale)
{
	int64_t g4 = (g + 2 * LANES - 1) / (2 * LANES) * (2 * LANES);
	double *mx = malloc((size_t)(2 * g + g4 * d + (g + 1) * REF_CHUNK) * sizeof(double));
	double *sum, *qt, *sc, *wt, w;
	const double *k, *v;
	int64_t i, j, j0, n, c;

	if (!mx)
		return -1;
	/* carved out after the test: arithmetic on a null pointer is undefined */
	sum = mx + g, qt = sum + g, sc = qt + g4 * d, wt = sc + g * REF_CHUNK;
	for (i = 0; i < g; i++) {
		mx[i] = -INFINITY;
		sum[i] = 0.0;
		for (c = 0; c < d; c++)
			o[i * d + c] = 0.0;
	}
	for (c = 0; c < d; c++)
		for (i = 0; i < g4; i++)
			qt[c * g4 + i] = i < g ? q[i * d + c] : 0.0;
	for (j0 = 0; j0 < s_kv; j0 += n) {
		n = s_kv - j0 < REF_CHUNK ? s_kv - j0 : REF_CHUNK;
		if (!(k = rows(payload, 0, j0, n)))
			goto fail;
		chunk_scores(qt, g, g4, k, n, d, sc);
		for (i = 0; i < g; i++)
			for (j = 0; j < n; j++)
				mx[i] = fmax(mx[i], sc[i * n + j] * scale);
	}
	for (j0 = 0; j0 < s_kv; j0 += n) {
		n = s_kv - j0 < REF_CHUNK ? s_kv - j0 : REF_CHUNK;
		if (!(k = rows(payload, 0, j0, n)) || !(v = rows(payload, 1, j0, n)))
			goto fail;
		chunk_scores(qt, g, g4, k, n, d, sc);
		for (i = 0; i < g; i++) {
			for (j = 0; j < n; j++) {
				w = exp(sc[i * n + j] * scale - mx[i]);
				sum[i] += w;
				wt[j] = w;
			}
			weighted_rows(o + i * d, wt, v, n, d);
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
