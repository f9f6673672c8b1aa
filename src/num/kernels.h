/*
 * Data-mode numerics: the MATH engine's element
 * kernels and the GEMM tile kernel. Pure functions on caller-owned buffers;
 * nothing here knows about the simulator.
 *
 * Conventions: tensors are fp32, row-major (C order), contiguous. Arithmetic
 * is fp32 unless a function says otherwise, and the build uses
 * -ffp-contract=off, so a*b+c is two roundings on every machine.
 *
 * Thread rules: every function is reentrant and may be called from any
 * thread.
 */
#ifndef KB_NUM_KERNELS_H
#define KB_NUM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"
#include "num/math_op.h"

#define KB_NSHAPE_MAX_RANK 4

/* A tensor shape of rank 0..4 (rank 0 is a scalar of one element). */
typedef struct kb_nshape {
	int rank;
	int64_t dim[KB_NSHAPE_MAX_RANK];
} kb_nshape;

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
/* The same contract as plain scalar loops: the reference the tests hold
 * kb__gemm_tile to, bit for bit. */
void kb__gemm_tile_scalar(float *acc, const float *a, const float *b, int64_t m, int64_t k,
			  int64_t n, int64_t lda, int64_t ldb, int64_t ldacc, int trans_b);

#endif
