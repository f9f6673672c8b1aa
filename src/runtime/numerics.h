/*
 * Data-mode numerics: the MATH engine's element kernels, the GEMM tile
 * kernel, double-precision host references, error statistics and a seeded
 * random generator. Pure functions on caller-owned buffers; nothing here
 * knows about the simulator.
 *
 * Conventions: tensors are fp32, row-major (C order), contiguous. Arithmetic
 * is fp32 unless a function says otherwise, and the build uses
 * -ffp-contract=off, so a*b+c is two roundings on every machine.
 *
 * Thread rules: every function is reentrant and may be called from any
 * thread; a kb_rng must not be shared between threads without a lock.
 */
#ifndef KB_RUNTIME_NUMERICS_H
#define KB_RUNTIME_NUMERICS_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"

#define KB_NSHAPE_MAX_RANK 4

/* A tensor shape of rank 0..4 (rank 0 is a scalar of one element). */
typedef struct kb_nshape {
	int rank;
	int64_t dim[KB_NSHAPE_MAX_RANK];
} kb_nshape;

/* MATH micro-op kinds; names as in the op_log ("rmax", "exp_diff", ...). */
typedef enum kb_math_kind {
	KB_MATH_RMAX = 0,   /* max over the last axis */
	KB_MATH_MAX_ELEM,   /* max(a, b) */
	KB_MATH_EXP_DIFF,   /* exp(a - b) */
	KB_MATH_RSUM,       /* sum over the last axis */
	KB_MATH_FMA,        /* a * b + c (two fp32 roundings, not fused) */
	KB_MATH_MUL_BCAST,  /* a * b, b usually a per-row column (G,1) */
	KB_MATH_COPY,       /* a */
	KB_MATH_ADD,        /* a + b */
	KB_MATH_SUB,        /* a - b */
	KB_MATH_MUL,        /* a * b */
	KB_MATH_BIAS,       /* a + bias, bias a row vector (C) or (1,C) */
	KB_MATH_SCALE,      /* a * ex->scale */
	KB_MATH_RELU,       /* max(a, 0) */
	KB_MATH_GELU,       /* tanh approximation, see kb__math_apply */
	KB_MATH_EXP,        /* exp(a) */
	KB_MATH_DIV,        /* a / b */
	KB_MATH_KIND_COUNT
} kb_math_kind;

/* Extra operands of a MATH op. */
typedef struct kb_math_extra {
	float scale; /* KB_MATH_SCALE multiplier */
} kb_math_extra;

#define KB_MATH_EXTRA_INIT { 1.0f }

/* "rmax", "max_elem", ...; "?" for an invalid kind. */
const char *kb__math_kind_name(kb_math_kind kind);
/* Parses a kind name; KB_EINVAL (err untouched) for an unknown name. */
int kb__math_kind_parse(const char *name, kb_math_kind *out);
/* Number of tensor inputs of a kind (1, 2 or 3); 0 for an invalid kind. */
int kb__math_arity(kb_math_kind kind);

/* Number of elements of a shape (1 for rank 0); -1 when it is invalid. */
int64_t kb__nshape_numel(const kb_nshape *s);

/*
 * Applies one MATH op: out = kind(in[0], ..., in[n_in-1]).
 *
 * Element-wise kinds broadcast their inputs as NumPy does (right-aligned,
 * size-1 and missing leading dims stretch) and require out_shape to be the
 * broadcast shape (leading size-1 dims of either side are ignored). So
 * exp_diff of s (G,T) and m (G,1) is (G,T). Note that, as in NumPy, (G) and
 * (G,1) broadcast to (G,G): keep per-row vectors as (G,1).
 *
 * Reductions (rmax, rsum) reduce the last axis: (..,R,C) -> (..,R,1) or,
 * without keep-dims, (..,R). rmax is exact; rsum adds in double, column by
 * column in index order, and rounds once to fp32. rmax of an empty axis is
 * an error; rsum of it is 0.
 *
 * exp, exp_diff and gelu are evaluated in double and rounded once to fp32,
 * which makes them (almost always) correctly rounded and independent of the
 * libm's float variants. gelu is the tanh approximation
 *   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * The other kinds are plain fp32 arithmetic.
 *
 * out may be the same buffer as an input whose shape equals out's (the
 * in-place O *= corr of softmax_merge); any other overlap is undefined.
 * ex may be NULL except for KB_MATH_SCALE. Shape errors return KB_EINVAL
 * with a message naming the op and the shapes.
 */
int kb__math_apply(kb_math_kind kind, const float *const *in, const kb_nshape *in_shapes,
		   int n_in, float *out, const kb_nshape *out_shape, const kb_math_extra *ex,
		   kb_error *err);

/*
 * GEMM tile: acc[i*ldacc+j] += sum_p a[i*lda+p] * B(p,j) for i < m, j < n,
 * with B(p,j) = b[j*ldb+p] when trans_b, else b[p*ldb+j]. Each product is
 * rounded to fp32 and added to the running fp32 element in increasing p, so
 * both layouts give bit-identical, deterministic results.
 */
void kb__gemm_tile(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		   int64_t n, int64_t lda, int64_t ldb, int64_t ldacc, int trans_b);

/*
 * Reference attention for one KV head in double: o = softmax(q k^T * scale) v,
 * q (g,d), k and v (s_kv,d), o (g,d), subtracting each row's max first.
 * s_kv must be >= 1.
 */
void kb__ref_attention(const double *q, const double *k, const double *v, double *o,
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

/* xoshiro256** generator state, seeded through splitmix64. */
typedef struct kb_rng {
	uint64_t s[4];
} kb_rng;

/* Seeds r from a 64-bit seed (any value, 0 included). */
void kb__rng_seed(kb_rng *r, uint64_t seed);
/* Next 64 random bits. */
uint64_t kb__rng_next(kb_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double kb__rng_uniform(kb_rng *r);
/* Standard normal deviate (Marsaglia's polar method, one value per call). */
double kb__rng_normal(kb_rng *r);
/* Unbiased integer in [0, n); 0 when n == 0. */
uint64_t kb__rng_below(kb_rng *r, uint64_t n);

#endif
