/*
 * The GEMM tile kernel (contract in kernels.h), vectorised across output
 * elements: a micro-tile of MR rows x NR columns of acc lives in vector
 * registers while p runs over k in increasing order, so every element sees
 * exactly the scalar sequence acc = acc + a*b (product rounded, then the
 * sum rounded; the build keeps -ffp-contract=off) and the result is
 * bit-identical to the plain i-p-j loop. Only independent elements share a
 * vector; no sum is reassociated.
 *
 * GCC vector types, no intrinsics: the micro-kernels are built for AVX2
 * and for plain SSE2 (KB_VEC_CLONES, base/simd.h), the generic lowering
 * elsewhere. Columns past the last full micro-tile run the scalar loops,
 * which are the reference the tests compare against.
 */
#include "num/kernels.h"

#include <string.h>

#include "base/simd.h"

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));

enum {
	MR8 = 8,  /* rows of the wide micro-tile */
	MR = 4,   /* rows of the narrow one */
	NR = 8,   /* columns of a micro-tile: one 8-lane vector */
	KC = 128, /* depth of a transposed B panel (4 KiB: fits L1 with the a rows) */
};

/* Lane by lane: 0 + x would turn -0 into +0. */
#define BCAST8(x) ((v8f){ (x), (x), (x), (x), (x), (x), (x), (x) })

/*
 * acc[i][0..NR) += sum_{p<k} a[i][p] * bp[p][0..NR) for i < MR8, where row
 * p of the panel starts at bp + p * ldbp. A row of the micro-tile is one
 * 8-lane vector: with AVX2 one register, so eight independent accumulator
 * chains (an add's latency is 3-4 cycles: four chains left the adders
 * idle half the time), a B row and a broadcast, 10 of the 16 registers.
 * The baseline clone needs two SSE registers a row and spills some; it is
 * the fallback, the AVX2 clone is the one that runs. The rows are named
 * variables so that they stay in registers across the p loop.
 */
KB_VEC_CLONES
static void micro8(float *acc, int64_t ldacc, const float *a, int64_t lda, const float *bp,
		   int64_t ldbp, int64_t k)
{
	v8f c0, c1, c2, c3, c4, c5, c6, c7, b;
	const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
	const float *a4 = a + 4 * lda, *a5 = a + 5 * lda, *a6 = a + 6 * lda, *a7 = a + 7 * lda;

	memcpy(&c0, acc, sizeof(c0));
	memcpy(&c1, acc + ldacc, sizeof(c1));
	memcpy(&c2, acc + 2 * ldacc, sizeof(c2));
	memcpy(&c3, acc + 3 * ldacc, sizeof(c3));
	memcpy(&c4, acc + 4 * ldacc, sizeof(c4));
	memcpy(&c5, acc + 5 * ldacc, sizeof(c5));
	memcpy(&c6, acc + 6 * ldacc, sizeof(c6));
	memcpy(&c7, acc + 7 * ldacc, sizeof(c7));
	for (int64_t p = 0; p < k; p++) {
		memcpy(&b, bp + p * ldbp, sizeof(b));
		c0 = c0 + BCAST8(a0[p]) * b;
		c1 = c1 + BCAST8(a1[p]) * b;
		c2 = c2 + BCAST8(a2[p]) * b;
		c3 = c3 + BCAST8(a3[p]) * b;
		c4 = c4 + BCAST8(a4[p]) * b;
		c5 = c5 + BCAST8(a5[p]) * b;
		c6 = c6 + BCAST8(a6[p]) * b;
		c7 = c7 + BCAST8(a7[p]) * b;
	}
	memcpy(acc, &c0, sizeof(c0));
	memcpy(acc + ldacc, &c1, sizeof(c1));
	memcpy(acc + 2 * ldacc, &c2, sizeof(c2));
	memcpy(acc + 3 * ldacc, &c3, sizeof(c3));
	memcpy(acc + 4 * ldacc, &c4, sizeof(c4));
	memcpy(acc + 5 * ldacc, &c5, sizeof(c5));
	memcpy(acc + 6 * ldacc, &c6, sizeof(c6));
	memcpy(acc + 7 * ldacc, &c7, sizeof(c7));
}

/*
 * acc[i][0..NR) += sum_{p<k} a[i][p] * bp[p][0..NR) for i < MR, where row
 * p of the panel starts at bp + p * ldbp. A row of the micro-tile is one
 * 8-lane vector: with AVX2 one register (four accumulators, a B row and a
 * broadcast), in the baseline clone two SSE registers each (eight
 * accumulators, as many as the 16 registers allow). The rows are named
 * variables so that they stay in registers across the p loop. Broadcasts
 * are built lane by lane: 0 + x would turn -0 into +0.
 */
KB_VEC_CLONES
static void micro4(float *acc, int64_t ldacc, const float *a, int64_t lda, const float *bp,
		   int64_t ldbp, int64_t k)
{
	v8f c0, c1, c2, c3, b, x;
	const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;

	memcpy(&c0, acc, sizeof(c0));
	memcpy(&c1, acc + ldacc, sizeof(c1));
	memcpy(&c2, acc + 2 * ldacc, sizeof(c2));
	memcpy(&c3, acc + 3 * ldacc, sizeof(c3));
	for (int64_t p = 0; p < k; p++) {
		memcpy(&b, bp + p * ldbp, sizeof(b));
		x = (v8f){ a0[p], a0[p], a0[p], a0[p], a0[p], a0[p], a0[p], a0[p] };
		c0 = c0 + x * b;
		x = (v8f){ a1[p], a1[p], a1[p], a1[p], a1[p], a1[p], a1[p], a1[p] };
		c1 = c1 + x * b;
		x = (v8f){ a2[p], a2[p], a2[p], a2[p], a2[p], a2[p], a2[p], a2[p] };
		c2 = c2 + x * b;
		x = (v8f){ a3[p], a3[p], a3[p], a3[p], a3[p], a3[p], a3[p], a3[p] };
		c3 = c3 + x * b;
	}
	memcpy(acc, &c0, sizeof(c0));
	memcpy(acc + ldacc, &c1, sizeof(c1));
	memcpy(acc + 2 * ldacc, &c2, sizeof(c2));
	memcpy(acc + 3 * ldacc, &c3, sizeof(c3));
}

/* One row of a micro-tile (the rows below the last multiple of MR). */
KB_VEC_CLONES
static void micro1(float *acc, const float *a, const float *bp, int64_t ldbp, int64_t k)
{
	v8f c, b, x;

	memcpy(&c, acc, sizeof(c));
	for (int64_t p = 0; p < k; p++) {
		memcpy(&b, bp + p * ldbp, sizeof(b));
		x = (v8f){ a[p], a[p], a[p], a[p], a[p], a[p], a[p], a[p] };
		c = c + x * b;
	}
	memcpy(acc, &c, sizeof(c));
}

/* Runs the micro-kernels down all m rows of one column block. */
static void column_block(float *acc, int64_t ldacc, const float *a, int64_t lda, const float *bp,
			 int64_t ldbp, int64_t m, int64_t k)
{
	int64_t i = 0;

	for (; i + MR8 <= m; i += MR8)
		micro8(acc + i * ldacc, ldacc, a + i * lda, lda, bp, ldbp, k);
	for (; i + MR <= m; i += MR)
		micro4(acc + i * ldacc, ldacc, a + i * lda, lda, bp, ldbp, k);
	for (; i < m; i++)
		micro1(acc + i * ldacc, a + i * lda, bp, ldbp, k);
}

/* Scalar reference loops, also used for the columns [j0, n). */
static void scalar_nn(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		      int64_t j0, int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	if (j0 >= n) /* no columns left: the i-p loops would run for nothing */
		return;
	for (int64_t i = 0; i < m; i++) {
		float *crow = acc + i * ldacc;

		for (int64_t p = 0; p < k; p++) {
			const float av = a[i * lda + p];
			const float *brow = b + p * ldb;

			for (int64_t j = j0; j < n; j++)
				crow[j] += av * brow[j];
		}
	}
}

static void scalar_nt(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		      int64_t j0, int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	for (int64_t i = 0; i < m; i++) {
		const float *arow = a + i * lda;

		for (int64_t j = j0; j < n; j++) {
			const float *brow = b + j * ldb;
			float sum = acc[i * ldacc + j];

			for (int64_t p = 0; p < k; p++)
				sum += arow[p] * brow[p];
			acc[i * ldacc + j] = sum;
		}
	}
}

/* B rows are unit stride along j: the micro-kernel reads them in place. */
static void gemm_nn(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		    int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	int64_t j = 0;

	for (; j + NR <= n; j += NR)
		column_block(acc + j, ldacc, a, lda, b + j, ldb, m, k);
	scalar_nn(acc, a, b, m, k, j, n, lda, ldb, ldacc);
}

/*
 * B transposed: NR rows of b are copied, KC values at a time, into a panel
 * with j along the row, and p chunks run in increasing order, each adding
 * onto the acc values the previous chunk stored.
 */
static void gemm_nt_bpanel(float *acc, const float *a, const float *b, int64_t m, int64_t k,
			   int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	float panel[KC * NR];
	int64_t j = 0;

	for (; j + NR <= n; j += NR) {
		for (int64_t p0 = 0; p0 < k; p0 += KC) {
			int64_t kc = k - p0 < KC ? k - p0 : KC;

			for (int64_t jj = 0; jj < NR; jj++) {
				const float *brow = b + (j + jj) * ldb + p0;

				for (int64_t pp = 0; pp < kc; pp++)
					panel[pp * NR + jj] = brow[pp];
			}
			column_block(acc + j, ldacc, a + p0, lda, panel, NR, m, kc);
		}
	}
	scalar_nt(acc, a, b, m, k, j, n, lda, ldb, ldacc);
}

/*
 * B transposed, the other way round: C^T = B A^T. NR rows of a (the few
 * query rows of decode) are copied, KC values at a time, into a panel with
 * i along the row, and the micro-kernels run down the rows of b (which are
 * unit stride along p, as they are), MR8 (then MR, then 1) columns of acc
 * at a time, held transposed: ct[jj][ii] is acc[i0+ii][j+jj]. Each element still sees
 * acc = acc + a*b in increasing p (b*a is the same product). Rows of the
 * last block past m are zeros in the panel and are never stored. Packing
 * a costs NR*k copies per block of rows against n*k for b, so this is the
 * path when m <= n.
 */
static void gather_t(float *ct, const float *acc, int64_t ldacc, int64_t rows, int64_t cols)
{
	for (int64_t jj = 0; jj < cols; jj++)
		for (int64_t ii = 0; ii < NR; ii++)
			ct[jj * NR + ii] = ii < rows ? acc[ii * ldacc + jj] : 0.0f;
}

static void scatter_t(float *acc, int64_t ldacc, const float *ct, int64_t rows, int64_t cols)
{
	for (int64_t jj = 0; jj < cols; jj++)
		for (int64_t ii = 0; ii < rows; ii++)
			acc[ii * ldacc + jj] = ct[jj * NR + ii];
}

static void gemm_nt_apanel(float *acc, const float *a, const float *b, int64_t m, int64_t k,
			   int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	float panel[KC * NR], ct[MR8 * NR];

	for (int64_t i = 0; i < m; i += NR) {
		int64_t rows = m - i < NR ? m - i : NR;

		for (int64_t p0 = 0; p0 < k; p0 += KC) {
			int64_t kc = k - p0 < KC ? k - p0 : KC, j = 0;

			for (int64_t ii = 0; ii < NR; ii++) {
				const float *arow = a + (i + ii) * lda + p0;

				for (int64_t pp = 0; pp < kc; pp++)
					panel[pp * NR + ii] = ii < rows ? arow[pp] : 0.0f;
			}
			for (; j + MR8 <= n; j += MR8) {
				gather_t(ct, acc + i * ldacc + j, ldacc, rows, MR8);
				micro8(ct, NR, b + j * ldb + p0, ldb, panel, NR, kc);
				scatter_t(acc + i * ldacc + j, ldacc, ct, rows, MR8);
			}
			for (; j + MR <= n; j += MR) {
				gather_t(ct, acc + i * ldacc + j, ldacc, rows, MR);
				micro4(ct, NR, b + j * ldb + p0, ldb, panel, NR, kc);
				scatter_t(acc + i * ldacc + j, ldacc, ct, rows, MR);
			}
			for (; j < n; j++) {
				gather_t(ct, acc + i * ldacc + j, ldacc, rows, 1);
				micro1(ct, b + j * ldb + p0, panel, NR, kc);
				scatter_t(acc + i * ldacc + j, ldacc, ct, rows, 1);
			}
		}
	}
}

static void gemm_nt(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		    int64_t n, int64_t lda, int64_t ldb, int64_t ldacc)
{
	if (m >= NR && m <= n)
		gemm_nt_apanel(acc, a, b, m, k, n, lda, ldb, ldacc);
	else
		gemm_nt_bpanel(acc, a, b, m, k, n, lda, ldb, ldacc);
}

/* Whether rows x cols values at x (row stride ld) hold a NaN. */
static int any_nan(const float *x, int64_t rows, int64_t cols, int64_t ld)
{
	typedef int32_t v4i __attribute__((vector_size(16)));
	v4i seen = { 0 };
	v4f v;
	int64_t i, j;
	int tail = 0;

	for (i = 0; i < rows; i++) {
		const float *row = x + i * ld;

		for (j = 0; j + 4 <= cols; j += 4) {
			memcpy(&v, row + j, sizeof(v));
			seen |= (v4i)(v != v);
		}
		for (; j < cols; j++)
			tail |= row[j] != row[j];
	}
	return tail || (seen[0] | seen[1] | seen[2] | seen[3]) != 0;
}

/*
 * When two NaNs meet, x86 returns the first operand's, and the scalar loops
 * put different operands first (nn: b in the product, the product in the
 * sum; nt: a, then acc) than the vector code does. A NaN made inside the
 * tile (inf * 0, inf - inf) is always the default NaN, so without a NaN
 * among the inputs the order cannot show, and a NaN input leaves a NaN in
 * every acc element it reaches (NaN + x is NaN). So the vector result
 * stands when it holds no NaN; otherwise the tile is redone by the scalar
 * loops from a saved acc, which keeps the payloads the outputs have always
 * had. Tiles too large to save on the stack check their inputs first.
 */
enum { SAVE_MAX = 4096 }; /* acc elements saved on the stack (16 KiB) */

void kb__gemm_tile(float *acc, const float *a, const float *b, int64_t m, int64_t k,
		   int64_t n, int64_t lda, int64_t ldb, int64_t ldacc, int trans_b)
{
	float saved[SAVE_MAX];
	int64_t i;

	if (m * n > SAVE_MAX) {
		if (any_nan(a, m, k, lda) || any_nan(acc, m, n, ldacc) ||
		    (trans_b ? any_nan(b, n, k, ldb) : any_nan(b, k, n, ldb)))
			kb__gemm_tile_scalar(acc, a, b, m, k, n, lda, ldb, ldacc, trans_b);
		else if (trans_b)
			gemm_nt(acc, a, b, m, k, n, lda, ldb, ldacc);
		else
			gemm_nn(acc, a, b, m, k, n, lda, ldb, ldacc);
		return;
	}
	for (i = 0; i < m; i++)
		memcpy(saved + i * n, acc + i * ldacc, (size_t)n * sizeof(float));
	if (trans_b)
		gemm_nt(acc, a, b, m, k, n, lda, ldb, ldacc);
	else
		gemm_nn(acc, a, b, m, k, n, lda, ldb, ldacc);
	if (!any_nan(acc, m, n, ldacc))
		return;
	for (i = 0; i < m; i++)
		memcpy(acc + i * ldacc, saved + i * n, (size_t)n * sizeof(float));
	kb__gemm_tile_scalar(acc, a, b, m, k, n, lda, ldb, ldacc, trans_b);
}

void kb__gemm_tile_scalar(float *acc, const float *a, const float *b, int64_t m, int64_t k,
			  int64_t n, int64_t lda, int64_t ldb, int64_t ldacc, int trans_b)
{
	if (trans_b)
		scalar_nt(acc, a, b, m, k, 0, n, lda, ldb, ldacc);
	else
		scalar_nn(acc, a, b, m, k, 0, n, lda, ldb, ldacc);
}
