/*
 * Data-mode numerics. See kernels.h for the contracts; comments here say
 * why the code is shaped the way it is.
 */
#include "num/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/simd.h"

int64_t kb__nshape_numel(const kb_nshape *s)
{
	int64_t n = 1;
	int i;

	if (!s || s->rank < 0 || s->rank > KB_NSHAPE_MAX_RANK)
		return -1;
	for (i = 0; i < s->rank; i++) {
		if (s->dim[i] < 0)
			return -1;
		/* Refuse products that would overflow rather than wrap. */
		if (s->dim[i] != 0 && n > INT64_MAX / s->dim[i])
			return -1;
		n *= s->dim[i];
	}
	return n;
}

/* NumPy-style text: "()", "(5,)", "(3, 5)". */
static const char *fmt_shape(char *buf, size_t size, const kb_nshape *s)
{
	size_t len;
	int i;

	if (s->rank < 0 || s->rank > KB_NSHAPE_MAX_RANK) {
		snprintf(buf, size, "(rank %d)", s->rank);
		return buf;
	}
	len = (size_t)snprintf(buf, size, "(");
	for (i = 0; i < s->rank && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
					(long long)s->dim[i]);
	if (len < size)
		snprintf(buf + len, size - len, "%s", s->rank == 1 ? ",)" : ")");
	return buf;
}

/* Joins the input shapes as "(3, 5) and (3, 1)" for error messages. */
static const char *fmt_inputs(char *buf, size_t size, const kb_nshape *shapes, int n)
{
	char one[96];
	size_t len = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " and " : "",
					fmt_shape(one, sizeof(one), &shapes[i]));
	return buf;
}

/* Right-aligns a shape into four dims, padding the front with 1s. */
static void pad4(const kb_nshape *s, int64_t d[KB_NSHAPE_MAX_RANK])
{
	int off = KB_NSHAPE_MAX_RANK - s->rank;
	int i;

	for (i = 0; i < KB_NSHAPE_MAX_RANK; i++)
		d[i] = i < off ? 1 : s->dim[i - off];
}

/* Folds padded dims d into acc by NumPy's rule; -1 when they clash. */
static int bcast_into(int64_t acc[KB_NSHAPE_MAX_RANK], const int64_t d[KB_NSHAPE_MAX_RANK])
{
	int i;

	for (i = 0; i < KB_NSHAPE_MAX_RANK; i++) {
		if (acc[i] == d[i] || d[i] == 1)
			continue;
		if (acc[i] != 1)
			return -1;
		acc[i] = d[i];
	}
	return 0;
}

static int same4(const int64_t a[KB_NSHAPE_MAX_RANK], const int64_t b[KB_NSHAPE_MAX_RANK])
{
	return memcmp(a, b, sizeof(int64_t) * KB_NSHAPE_MAX_RANK) == 0;
}

/* ---- element-wise ops -------------------------------------------------- */

/* Element functions of the element-wise ops: x[0..2] the operands, x[3] the scale. */

/* max that lets a NaN through, as NumPy's maximum does (fmaxf would hide it). */
static float max_nan(float a, float b)
{
	if (isnan(a) || isnan(b))
		return a + b;
	return a > b ? a : b;
}

static float e_max(const float x[4]) { return max_nan(x[0], x[1]); }
static float e_copy(const float x[4]) { return x[0]; }
static float e_add(const float x[4]) { return x[0] + x[1]; }
static float e_sub(const float x[4]) { return x[0] - x[1]; }
static float e_mul(const float x[4]) { return x[0] * x[1]; }
static float e_div(const float x[4]) { return x[0] / x[1]; }
static float e_scale(const float x[4]) { return x[0] * x[3]; }
/* a < 0 rather than a > 0 so that a NaN passes through. */
static float e_relu(const float x[4]) { return x[0] < 0.0f ? 0.0f : x[0]; }
/* Transcendentals in double, rounded once, to avoid the libm's expf. */
static float e_exp(const float x[4]) { return (float)exp((double)x[0]); }

static float e_exp_diff(const float x[4])
{
	return (float)exp((double)x[0] - (double)x[1]);
}

static float e_fma(const float x[4])
{
	float prod = x[0] * x[1]; /* rounded on its own: not a fused multiply-add */

	return prod + x[2];
}

static float e_gelu(const float x[4])
{
	const double k = 0.79788456080286535588; /* sqrt(2/pi) */
	double v = x[0];

	return (float)(0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))));
}

/* Broadcast iteration plan: out dims and per-input strides (0 = stretched). */
typedef struct bplan {
	int64_t dim[KB_NSHAPE_MAX_RANK];
	int64_t stride[3][KB_NSHAPE_MAX_RANK];
	const float *in[3];
} bplan;

static void plan_strides(int64_t st[KB_NSHAPE_MAX_RANK], const kb_nshape *s)
{
	int64_t d[KB_NSHAPE_MAX_RANK];
	int64_t step = 1;
	int i;

	pad4(s, d);
	for (i = KB_NSHAPE_MAX_RANK - 1; i >= 0; i--) {
		st[i] = d[i] == 1 ? 0 : step;
		step *= d[i];
	}
}

/* One row of n elements: operand k at x[k] + j * st[k]. */
#define ROW_LOOP(fn)                                                                       \
	for (j = 0; j < n; j++) {                                                          \
		const float v[4] = { x[0][j * st[0]], x[1][j * st[1]], x[2][j * st[2]], s }; \
		o[j] = fn(v);                                                              \
	}

/* ---- vector rows ------------------------------------------------------- */

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

enum { VW = 8 }; /* elements of a vector row step */

/* Lane by lane: 0 + x would turn -0 into +0. */
#define BCAST8(x) ((v8f){ (x), (x), (x), (x), (x), (x), (x), (x) })
#define BCAST4D(x) ((v4d){ (x), (x), (x), (x) })
#define BCAST4L(x) ((v4l){ (x), (x), (x), (x) })
#define SELECT(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))

/*
 * e^x for the 4 lanes of *xp into *yp, and in *okp the lanes whose
 * rounding to fp32 is certain to be that of the libm's exp(x): all-ones
 * where it is, zero where the caller must call exp().
 *
 * Method: x = k ln2 + r, k an integer (x / ln2 rounded by adding 1.5 *
 * 2^52), ln2 split into a 32-bit head (k * head is exact for |k| < 2^21,
 * and x - k * head is exact by Sterbenz when |r| <= |k ln2| / 2) and a
 * tail; e^r by its Taylor polynomial of degree 13 (Horner), times 2^k
 * built in the exponent bits. Error: with round-to-nearest |r| <= 0.35 and
 * the truncation is below 2^-57; in any rounding mode |r| < 0.7, the
 * truncation below 2^-41.8 relative, the reduction's roundings below
 * 2^-51 and Horner's below 2^-48. So |y - e^x| < 2^-41.5 e^x, and the
 * libm's exp is within 1 ulp (2^-52). Only lanes with x in [-87, 88] are
 * taken: e^x is then a normal fp32 (no subnormal or overflow rounding).
 *
 * Rounding y to fp32 drops its 29 low fraction bits (d). Two reals round
 * alike in every rounding mode unless a rounding boundary, a float (d = 0)
 * or a midpoint (d = 2^28), lies between them; a lane is ok when d is
 * more than 2^14 double ulps away from both, which is more than
 * (2^-41.5 + 2^-52) e^x for any y in the binade. About one lane in 8000
 * falls back, so the results are those of (float)exp(x) for every input,
 * without depending on this method being as good as the libm.
 */
static inline void exp_lanes(const v4d *xp, v4d *yp, v4l *okp)
{
	const double inv_ln2 = 0x1.71547652b82fep0, shift = 0x1.8p52;
	const double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
	const v4l mid = BCAST4L(INT64_C(1) << 28), near = BCAST4L(INT64_C(1) << 14);
	const v4l low = BCAST4L((INT64_C(1) << 29) - 1);
	v4d x = *xp, kd = x * BCAST4D(inv_ln2) + BCAST4D(shift), r, p, y;
	v4u k;
	v4l d, in;

	k = (v4u)kd - (v4u)BCAST4D(shift); /* the integer in the low bits (mod 2^64) */
	kd = kd - BCAST4D(shift);
	r = (x - kd * BCAST4D(ln2_hi)) - kd * BCAST4D(ln2_lo);
	p = BCAST4D(1.0 / 6227020800.0);      /* 1/13! */
	p = p * r + BCAST4D(1.0 / 479001600.0); /* 1/12! */
	p = p * r + BCAST4D(1.0 / 39916800.0);
	p = p * r + BCAST4D(1.0 / 3628800.0);
	p = p * r + BCAST4D(1.0 / 362880.0);
	p = p * r + BCAST4D(1.0 / 40320.0);
	p = p * r + BCAST4D(1.0 / 5040.0);
	p = p * r + BCAST4D(1.0 / 720.0);
	p = p * r + BCAST4D(1.0 / 120.0);
	p = p * r + BCAST4D(1.0 / 24.0);
	p = p * r + BCAST4D(1.0 / 6.0);
	p = p * r + BCAST4D(0.5);
	p = p * r + BCAST4D(1.0);
	p = p * r + BCAST4D(1.0);
	y = p * (v4d)((k + 1023) << 52); /* 2^k; lanes out of range are not used */
	in = (x >= BCAST4D(-87.0)) & (x <= BCAST4D(88.0)); /* NaN: false */
	d = (v4l)y & low;
	*yp = y;
	*okp = in & (d > near) & (d < low - near) & ((d < mid - near) | (d > mid + near));
}

/*
 * One row of n elements of the kinds below, whose operands are each
 * contiguous (stride 1) or one value stretched over the row (stride 0),
 * VW elements a step: an element is the same expression as the element
 * function's, on the same operands, lane by lane (no element depends on
 * another), so the bits are the scalar loop's. Returns the number of
 * elements done; the caller's scalar loop does the rest.
 */
KB_VEC_CLONES
static int64_t row_vec(kb_math_kind kind, float *o, const float *const x[3], const int64_t st[3],
		       float s, int64_t n)
{
	v8f a, b, c, r;
	v8i m;
	int64_t j = 0;

	for (; j + VW <= n; j += VW) {
		if (st[0])
			memcpy(&a, x[0] + j, sizeof(a));
		else
			a = BCAST8(x[0][0]);
		if (st[1])
			memcpy(&b, x[1] + j, sizeof(b));
		else
			b = BCAST8(x[1][0]);
		switch (kind) {
		case KB_MATH_MAX_ELEM: /* max_nan */
			m = (a != a) | (b != b);
			r = SELECT(m, a + b, SELECT(a > b, a, b));
			break;
		case KB_MATH_EXP_DIFF: {
			v4d lo = __builtin_convertvector((v4f){ a[0], a[1], a[2], a[3] }, v4d) -
				 __builtin_convertvector((v4f){ b[0], b[1], b[2], b[3] }, v4d);
			v4d hi = __builtin_convertvector((v4f){ a[4], a[5], a[6], a[7] }, v4d) -
				 __builtin_convertvector((v4f){ b[4], b[5], b[6], b[7] }, v4d);
			v4d ylo, yhi;
			v4l oklo, okhi;
			v4f flo, fhi;

			exp_lanes(&lo, &ylo, &oklo);
			exp_lanes(&hi, &yhi, &okhi);
			flo = __builtin_convertvector(ylo, v4f);
			fhi = __builtin_convertvector(yhi, v4f);
			r = (v8f){ flo[0], flo[1], flo[2], flo[3], fhi[0], fhi[1], fhi[2], fhi[3] };
			for (int l = 0; l < 4; l++) {
				if (!oklo[l])
					r[l] = (float)exp(lo[l]);
				if (!okhi[l])
					r[4 + l] = (float)exp(hi[l]);
			}
			break;
		}
		case KB_MATH_FMA:
			if (st[2])
				memcpy(&c, x[2] + j, sizeof(c));
			else
				c = BCAST8(x[2][0]);
			r = a * b;
			r = r + c;
			break;
		case KB_MATH_MUL_BCAST:
		case KB_MATH_MUL: r = a * b; break;
		case KB_MATH_COPY: r = a; break;
		case KB_MATH_BIAS:
		case KB_MATH_ADD: r = a + b; break;
		case KB_MATH_SUB: r = a - b; break;
		case KB_MATH_SCALE: r = a * BCAST8(s); break;
		case KB_MATH_RELU: r = SELECT(a < BCAST8(0.0f), BCAST8(0.0f), a); break;
		case KB_MATH_DIV: r = a / b; break;
		default: return j;
		}
		memcpy(o + j, &r, sizeof(r));
	}
	return j;
}

/*
 * The kind is switched on once per row, so each row is a direct loop over
 * the element function (inlined), not an indirect call per element; each
 * element is the same expression as before, in the same order.
 */
static void run_row(kb_math_kind kind, float *o, const float *const xin[3], const int64_t st[3],
		    float s, int64_t n)
{
	const float *x[3] = { xin[0], xin[1], xin[2] };
	int64_t j = 0;

	/* exp and gelu stay scalar (row_vec returns 0 for them) */
	if ((st[0] | st[1] | st[2]) <= 1 && st[0] >= 0 && st[1] >= 0 && st[2] >= 0 &&
	    kind != KB_MATH_EXP && kind != KB_MATH_GELU) {
		j = row_vec(kind, o, x, st, s, n);
		if (j == n)
			return;
		o += j;
		for (int k = 0; k < 3; k++)
			x[k] += j * st[k];
		n -= j;
	}
	switch (kind) {
	case KB_MATH_MAX_ELEM: ROW_LOOP(e_max) break;
	case KB_MATH_EXP_DIFF: ROW_LOOP(e_exp_diff) break;
	case KB_MATH_FMA: ROW_LOOP(e_fma) break;
	case KB_MATH_MUL_BCAST: ROW_LOOP(e_mul) break;
	case KB_MATH_COPY: ROW_LOOP(e_copy) break;
	case KB_MATH_ADD: ROW_LOOP(e_add) break;
	case KB_MATH_SUB: ROW_LOOP(e_sub) break;
	case KB_MATH_MUL: ROW_LOOP(e_mul) break;
	case KB_MATH_BIAS: ROW_LOOP(e_add) break;
	case KB_MATH_SCALE: ROW_LOOP(e_scale) break;
	case KB_MATH_RELU: ROW_LOOP(e_relu) break;
	case KB_MATH_GELU: ROW_LOOP(e_gelu) break;
	case KB_MATH_EXP: ROW_LOOP(e_exp) break;
	case KB_MATH_DIV: ROW_LOOP(e_div) break;
	default: break;
	}
}

/* Walks the out tensor row by row (last axis innermost and contiguous). */
static void run_elementwise(const bplan *p, kb_math_kind kind, float s, float *out)
{
	int64_t rows = p->dim[0] * p->dim[1] * p->dim[2];
	int64_t n = p->dim[3];
	int64_t r, idx[3], off, st[3];
	const float *x[3];
	int k, a;

	for (k = 0; k < 3; k++)
		st[k] = p->stride[k][3];
	for (r = 0; r < rows; r++) {
		idx[2] = r % p->dim[2];
		idx[1] = (r / p->dim[2]) % p->dim[1];
		idx[0] = r / (p->dim[2] * p->dim[1]);
		for (k = 0; k < 3; k++) {
			off = 0;
			for (a = 0; a < 3; a++)
				off += idx[a] * p->stride[k][a];
			x[k] = p->in[k] + off;
		}
		run_row(kind, out + r * n, x, st, s, n);
	}
}

/* bias wants a row vector whose length is a's last dim. */
static int check_bias(const kb_nshape *sh, kb_error *err)
{
	char sa[96], sb[96];
	const kb_nshape *b = &sh[1];
	int i, ok = sh[0].rank >= 1 && b->rank >= 1 &&
		    b->dim[b->rank - 1] == sh[0].dim[sh[0].rank - 1];

	for (i = 0; ok && i < b->rank - 1; i++)
		ok = b->dim[i] == 1;
	if (ok)
		return KB_OK;
	return kb__err(err, KB_EINVAL, "bias: bias %s is not a row vector for a of shape %s",
		       fmt_shape(sb, sizeof(sb), b), fmt_shape(sa, sizeof(sa), &sh[0]));
}

static int apply_elementwise(kb_math_kind kind, const float *const *in, const kb_nshape *sh,
			     int n_in, float *out, const kb_nshape *osh, float s, kb_error *err)
{
	static const float zero = 0.0f; /* stands in for absent operands */
	char si[320], so[96];
	int64_t d[KB_NSHAPE_MAX_RANK], want[KB_NSHAPE_MAX_RANK];
	bplan p;
	int i;

	memset(&p, 0, sizeof(p));
	for (i = 0; i < KB_NSHAPE_MAX_RANK; i++)
		p.dim[i] = 1;
	for (i = 0; i < 3; i++)
		p.in[i] = &zero;
	for (i = 0; i < n_in; i++) {
		pad4(&sh[i], d);
		if (bcast_into(p.dim, d) < 0)
			return kb__err(err, KB_EINVAL, "%s: shapes %s do not broadcast",
				       kb__math_kind_name(kind),
				       fmt_inputs(si, sizeof(si), sh, n_in));
		plan_strides(p.stride[i], &sh[i]);
		p.in[i] = in[i];
	}
	pad4(osh, want);
	if (!same4(p.dim, want))
		return kb__err(err, KB_EINVAL, "%s: inputs %s broadcast to a shape other than out %s",
			       kb__math_kind_name(kind), fmt_inputs(si, sizeof(si), sh, n_in),
			       fmt_shape(so, sizeof(so), osh));
	run_elementwise(&p, kind, s, out);
	return KB_OK;
}

/* ---- reductions -------------------------------------------------------- */

/* out must be in's shape with the last dim 1, or with it dropped. */
static int reduce_shape_ok(const kb_nshape *in, const kb_nshape *out)
{
	int lead = in->rank - 1;
	int i;

	if (in->rank < 1)
		return 0;
	if (out->rank == in->rank && out->dim[lead] != 1)
		return 0;
	if (out->rank != in->rank && out->rank != lead)
		return 0;
	for (i = 0; i < lead; i++)
		if (out->dim[i] != in->dim[i])
			return 0;
	return 1;
}

static float row_max(const float *x, int64_t n)
{
	float m = x[0];
	int64_t j;

	for (j = 1; j < n; j++)
		m = max_nan(m, x[j]);
	return m;
}

static float row_sum(const float *x, int64_t n)
{
	double acc = 0.0; /* double so long rows do not lose the small terms */
	int64_t j;

	for (j = 0; j < n; j++)
		acc += x[j];
	return (float)acc;
}

static int apply_reduce(kb_math_kind kind, const float *x, const kb_nshape *ish, float *out,
			const kb_nshape *osh, kb_error *err)
{
	char si[96], so[96];
	int64_t cols, rows, r;

	if (!reduce_shape_ok(ish, osh))
		return kb__err(err, KB_EINVAL, "%s: cannot reduce %s over the last axis into %s",
			       kb__math_kind_name(kind), fmt_shape(si, sizeof(si), ish),
			       fmt_shape(so, sizeof(so), osh));
	cols = ish->dim[ish->rank - 1];
	rows = kb__nshape_numel(osh);
	if (cols == 0 && rows > 0 && kind == KB_MATH_RMAX)
		return kb__err(err, KB_EINVAL, "rmax: empty last axis in %s",
			       fmt_shape(si, sizeof(si), ish));
	for (r = 0; r < rows; r++)
		out[r] = kind == KB_MATH_RMAX ? row_max(x + r * cols, cols)
					      : row_sum(x + r * cols, cols);
	return KB_OK;
}

/* ---- entry point ------------------------------------------------------- */

static int check_args(kb_math_kind kind, const float *const *in, const kb_nshape *sh, int n_in,
		      const float *out, const kb_nshape *osh, kb_error *err)
{
	char s[96];
	int i;

	if (kb__math_arity(kind) == 0) /* every valid kind has an input */
		return kb__err(err, KB_EINVAL, "math: invalid kind %d", (int)kind);
	if (n_in != kb__math_arity(kind) || (n_in > 0 && (!in || !sh)) || !out || !osh)
		return kb__err(err, KB_EINVAL, "%s: expects %d inputs and an output, got %d inputs",
			       kb__math_kind_name(kind), kb__math_arity(kind), n_in);
	for (i = 0; i <= n_in; i++) {
		const kb_nshape *x = i < n_in ? &sh[i] : osh;

		if (kb__nshape_numel(x) < 0)
			return kb__err(err, KB_EINVAL, "%s: invalid shape %s of %s %d",
				       kb__math_kind_name(kind), fmt_shape(s, sizeof(s), x),
				       i < n_in ? "input" : "output", i < n_in ? i : 0);
		if (i < n_in && !in[i])
			return kb__err(err, KB_EINVAL, "%s: input %d is NULL",
				       kb__math_kind_name(kind), i);
	}
	return KB_OK;
}

int kb__math_apply(kb_math_kind kind, const float *const *in, const kb_nshape *in_shapes,
		   int n_in, float *out, const kb_nshape *out_shape, const kb_math_extra *ex,
		   kb_error *err)
{
	int rc = check_args(kind, in, in_shapes, n_in, out, out_shape, err);

	if (rc)
		return rc;
	if (kind == KB_MATH_RMAX || kind == KB_MATH_RSUM)
		return apply_reduce(kind, in[0], &in_shapes[0], out, out_shape, err);
	if (kind == KB_MATH_SCALE && !ex)
		return kb__err(err, KB_EINVAL, "scale: no kb_math_extra with the scale factor");
	if (kind == KB_MATH_BIAS && (rc = check_bias(in_shapes, err)))
		return rc;
	return apply_elementwise(kind, in, in_shapes, n_in, out, out_shape,
				 ex ? ex->scale : 1.0f, err);
}
