/*
 * Double-precision host references and error statistics: what the benches
 * (and the tests) compare the simulated data-mode results against. Plain
 * loops, no simulator.
 *
 * Thread rules: every function is reentrant and may be called from any
 * thread.
 */
#ifndef KB_BENCH_REFERENCE_H
#define KB_BENCH_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Reference attention for one KV head in double: o = softmax(q k^T * scale) v,
 * q (g,d), k and v (s_kv,d), o (g,d), subtracting each row's max first.
 * s_kv must be >= 1. Returns 0, or -1 when out of memory.
 */
int kb__ref_attention(const double *q, const double *k, const double *v, double *o,
		      int64_t g, int64_t s_kv, int64_t d, double scale);

/*
 * Rows [row0, row0 + rows) of K (which 0) or V (which 1), rows x d doubles,
 * valid until the next call for the same `which`; NULL to stop (the
 * payload keeps the reason).
 */
typedef const double *(*kb_ref_rows_fn)(void *payload, int which, int64_t row0, int64_t rows);
/*
 * kb__ref_attention with K and V fetched a chunk of rows at a time, so the
 * caller needs no host copy of them; the same bits as kb__ref_attention.
 * Returns 0, or -1 when rows returned NULL or memory ran out.
 */
int kb__ref_attention_rows(const double *q, kb_ref_rows_fn rows, void *payload, double *o,
			   int64_t g, int64_t s_kv, int64_t d, double scale);
/* Reference GEMM in double: c (m,n) = a (m,k) b (k,n), overwriting c. */
void kb__ref_gemm(const double *a, const double *b, double *c, int64_t m, int64_t k,
		  int64_t n);

/*
 * Error statistics of got against want over n elements.
 * max_abs = max |got_i - want_i|.
 * max_rel = max_abs / max_i |want_i| (a norm-wise relative error: it stays
 *           meaningful where single elements of want are near zero); when
 *           want is all zero, max_rel = max_abs.
 * A NaN or infinity in got or want makes both results NaN or inf, never
 * hidden. n == 0 gives 0 and 0. Either output pointer may be NULL.
 */
void kb__err_stats(const float *got, const double *want, size_t n, double *max_abs,
		   double *max_rel);

#endif
