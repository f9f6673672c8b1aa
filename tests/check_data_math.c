/*
 * Data mode, the tl layer through the public API (check_data.c has the
 * suite): every MATH kind as a composite head op (own kernels: load into
 * TCM, composite, store to HBM) against a direct host computation, with
 * broadcast (G,T)x(G,1) and keep-dims (G,T)->(G,1); one softmax_merge step
 * (prologue recipe + P.V GEMM + add epilogue) against the online-softmax
 * formulas in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "datautil.h"

#include "base/fp16.h"
#include "bench/rng.h"

/* ------------------------------------------------------------------ */
/* MATH kinds as composite head ops                                    */
/* ------------------------------------------------------------------ */

enum { OUT_STORE = 0, OUT_REF, OUT_HBM_ADDR, OUT_REF_HBM_IN };

typedef struct mcase {
	const char *op;
	int64_t sa[2], sb[2];   /* sb[0] == 0: unary */
	int64_t so[2];          /* the expected output shape */
	double scale;           /* nonzero: extras {"scale", scale} */
	int out_mode;           /* OUT_*: how the result reaches HBM */
	int neg_row0;           /* a's row 0 all negative (rmax must not start at 0) */
} mcase;

#define G_ 4
#define T_ 24

static const mcase mcases[] = {
	/* keep-dims reductions (G,T) -> (G,1) */
	{ "rmax", { G_, T_ }, { 0, 0 }, { G_, 1 }, 0, OUT_STORE, 1 },
	{ "rmax", { G_, T_ }, { 0, 0 }, { G_, 1 }, 0, OUT_REF, 1 },
	{ "rsum", { G_, T_ }, { 0, 0 }, { G_, 1 }, 0, OUT_STORE, 0 },
	{ "rsum", { G_, T_ }, { 0, 0 }, { G_, 1 }, 0, OUT_HBM_ADDR, 0 },
	/* binary recipe kinds, same shape and broadcast */
	{ "max_elem", { G_, 1 }, { G_, 1 }, { G_, 1 }, 0, OUT_STORE, 0 },
	{ "max_elem", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_REF, 0 },
	{ "exp_diff", { G_, 1 }, { G_, 1 }, { G_, 1 }, 0, OUT_STORE, 0 },
	{ "exp_diff", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "mul_bcast", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "mul_bcast", { G_, 1 }, { G_, 1 }, { G_, 1 }, 0, OUT_REF, 0 },
	{ "copy", { G_, T_ }, { 0, 0 }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "copy", { G_, 1 }, { 0, 0 }, { G_, 1 }, 0, OUT_HBM_ADDR, 0 },
	/* element-wise */
	{ "add", { G_, T_ }, { G_, T_ }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "add", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_REF_HBM_IN, 0 },
	{ "add", { G_, T_ }, { 1, T_ }, { G_, T_ }, 0, OUT_REF, 0 },
	{ "sub", { G_, T_ }, { G_, T_ }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "sub", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_HBM_ADDR, 0 },
	{ "sub", { G_, 1 }, { G_, T_ }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "mul", { G_, T_ }, { G_, T_ }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "mul", { G_, T_ }, { 1, T_ }, { G_, T_ }, 0, OUT_REF_HBM_IN, 0 },
	{ "div", { G_, T_ }, { G_, T_ }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "div", { G_, T_ }, { G_, 1 }, { G_, T_ }, 0, OUT_REF, 0 },
	/* unary */
	{ "relu", { G_, T_ }, { 0, 0 }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "gelu", { G_, T_ }, { 0, 0 }, { G_, T_ }, 0, OUT_STORE, 0 },
	{ "exp", { G_, T_ }, { 0, 0 }, { G_, T_ }, 0, OUT_REF, 0 },
	{ "scale", { G_, T_ }, { 0, 0 }, { G_, T_ }, 0.3, OUT_STORE, 0 },
	{ "scale", { G_, 1 }, { 0, 0 }, { G_, 1 }, -2.5, OUT_REF_HBM_IN, 0 },
};

typedef struct mk_args {
	const mcase *c;
	uint64_t a, b, o;
	int rank;          /* shape of the composite's result, seen by the kernel */
	int64_t shape[KB_TL_MAX_RANK];
} mk_args;

static void math_kernel(kb_tl *tl, void *p)
{
	mk_args *k = p;
	const mcase *c = k->c;
	int hbm_in = c->out_mode == OUT_REF_HBM_IN;
	kb_tl_composite_desc d = { .op = c->op };
	kb_tl_tensor *ra = kb_tl_ref(tl, k->a, KB_FP32, 2, c->sa), *r;
	kb_tl_tensor *ro = kb_tl_ref(tl, k->o, KB_FP32, 2, c->so);

	d.a = hbm_in ? ra : kb_tl_load(tl, ra, NULL);
	if (c->sb[0]) {
		kb_tl_tensor *rb = kb_tl_ref(tl, k->b, KB_FP32, 2, c->sb);

		d.b = hbm_in ? rb : kb_tl_load(tl, rb, NULL);
	}
	if (c->scale != 0)
		d.extras[0] = (kb_tl_extra){ "scale", c->scale };
	if (c->out_mode == OUT_REF || hbm_in)
		d.out = ro;
	else if (c->out_mode == OUT_HBM_ADDR)
		d.out_hbm = k->o;
	r = kb_tl_composite(tl, &d);
	if (r)
		kb_tl_shape(tl, r, &k->rank, k->shape);
	if (c->out_mode == OUT_STORE)
		kb_tl_store(tl, ro, r);
}

static double gelu_ref(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* The host computation, in double, with NumPy broadcasting on 2-D shapes. */
static void host_math(const mcase *c, const float *a, const float *b, double *out)
{
	int64_t R = c->so[0], C = c->so[1];

	if (!strcmp(c->op, "rmax") || !strcmp(c->op, "rsum")) {
		for (int64_t i = 0; i < R; i++) {
			double acc = !strcmp(c->op, "rmax") ? -INFINITY : 0.0;

			for (int64_t j = 0; j < c->sa[1]; j++) {
				double x = a[i * c->sa[1] + j];

				acc = !strcmp(c->op, "rmax") ? (x > acc ? x : acc) : acc + x;
			}
			out[i] = acc;
		}
		return;
	}
	for (int64_t i = 0; i < R; i++)
		for (int64_t j = 0; j < C; j++) {
			double x = a[(c->sa[0] == 1 ? 0 : i) * c->sa[1] + (c->sa[1] == 1 ? 0 : j)];
			double y = c->sb[0] ? b[(c->sb[0] == 1 ? 0 : i) * c->sb[1] + (c->sb[1] == 1 ? 0 : j)] : 0;
			double v;

			if (!strcmp(c->op, "max_elem"))
				v = x > y ? x : y;
			else if (!strcmp(c->op, "exp_diff"))
				v = exp(x - y);
			else if (!strcmp(c->op, "mul_bcast") || !strcmp(c->op, "mul"))
				v = x * y;
			else if (!strcmp(c->op, "copy"))
				v = x;
			else if (!strcmp(c->op, "add"))
				v = x + y;
			else if (!strcmp(c->op, "sub"))
				v = x - y;
			else if (!strcmp(c->op, "div"))
				v = x / y;
			else if (!strcmp(c->op, "relu"))
				v = x > 0 ? x : 0;
			else if (!strcmp(c->op, "gelu"))
				v = gelu_ref(x);
			else if (!strcmp(c->op, "exp"))
				v = exp(x);
			else if (!strcmp(c->op, "scale"))
				v = x * c->scale;
			else
				v = NAN;
			out[i * C + j] = v;
		}
}

/*
 * Tolerance: 1e-6 relative, element by element. Every kind is one fp32
 * operation on fp32 inputs (error <= 2^-24 ~ 6e-8 relative), or evaluated
 * in double and rounded once (exp, exp_diff, gelu), or an exact max, or an
 * rsum of 24 terms added in double and rounded once; "scale" multiplies by
 * (float)scale, a further 6e-8. Inputs stay in [-3, 3] (divisors in
 * +-[0.5, 2]), so nothing over- or underflows and exp_diff's argument is
 * small.
 */
START_TEST(math_head_op)
{
	const mcase *c = &mcases[_i];
	size_t na = (size_t)(c->sa[0] * c->sa[1]), nb = (size_t)(c->sb[0] * c->sb[1]);
	size_t no = (size_t)(c->so[0] * c->so[1]);
	float *a = malloc(na * sizeof(float)), *b = malloc((nb ? nb : 1) * sizeof(float));
	float *got = malloc(no * sizeof(float));
	double *want = malloc(no * sizeof(double)), worst = 0;
	kb_simulation *sim = kbt_data_sim(1, 1);
	mk_args k = { c, 0, 0, 0, 0, { 0 } };
	kb_rng r;

	kb__rng_seed(&r, 1000 + (uint64_t)_i);
	kbt_fill_uniform(&r, a, na, -3, 3);
	if (c->neg_row0)
		for (int64_t j = 0; j < c->sa[1]; j++)
			a[j] = -fabsf(a[j]) - 0.25f;
	kbt_fill_uniform(&r, b, nb, -3, 3);
	if (!strcmp(c->op, "div"))
		for (size_t i = 0; i < nb; i++)
			b[i] = (b[i] < 0 ? -1.0f : 1.0f) * (0.5f + fabsf(b[i]) / 2.0f);
	k.a = kbt_data_put(sim, KB_FP32, 2, c->sa, a);
	if (nb)
		k.b = kbt_data_put(sim, KB_FP32, 2, c->sb, b);
	k.o = kbt_data_put(sim, KB_FP32, 2, c->so, NULL);
	kbt_data_run(sim, math_kernel, &k);
	ck_assert_msg(k.rank == 2 && k.shape[0] == c->so[0] && k.shape[1] == c->so[1],
		      "%s: result shape rank %d (%lld, %lld), want (%lld, %lld)", c->op, k.rank,
		      (long long)k.shape[0], (long long)k.shape[1], (long long)c->so[0],
		      (long long)c->so[1]);
	kbt_data_get(sim, KB_FP32, k.o, no, got);
	host_math(c, a, b, want);
	for (size_t i = 0; i < no; i++) {
		double e = fabs(got[i] - want[i]), tol = 1e-6 * fabs(want[i]);

		ck_assert_msg(e <= tol, "%s case %d: element %zu = %.9g, want %.9g", c->op, _i, i,
			      (double)got[i], want[i]);
		if (want[i] != 0 && e / fabs(want[i]) > worst)
			worst = e / fabs(want[i]);
	}
	kb_simulation_destroy(sim);
	free(a);
	free(b);
	free(got);
	free(want);
}
END_TEST

/* A chain on a GEMM-less composite: out = 0.5 * exp(a - b) * c, b (G,1);
 * the epilogue ops continue on the running value. variant 0: out is an
 * HBM ref; variant 1: out is a TCM tensor, then stored. */
typedef struct chain_args {
	uint64_t a, b, c, o;
	int variant;
} chain_args;

static void chain_kernel(kb_tl *tl, void *p)
{
	const chain_args *k = p;
	int64_t s[2] = { G_, T_ }, s1[2] = { G_, 1 };
	kb_tl_tensor *a = kb_tl_load(tl, kb_tl_ref(tl, k->a, KB_FP32, 2, s), NULL);
	kb_tl_tensor *b = kb_tl_load(tl, kb_tl_ref(tl, k->b, KB_FP32, 2, s1), NULL);
	kb_tl_tensor *c = kb_tl_load(tl, kb_tl_ref(tl, k->c, KB_FP32, 2, s), NULL);
	kb_tl_tensor *o = kb_tl_ref(tl, k->o, KB_FP32, 2, s);
	kb_tl_op epi[3] = { { .op = "exp" }, { .op = "mul", .args = { { "other", c } } },
			    { .op = "scale", .extras = { { "scale", 0.5 } } } };
	kb_tl_composite_desc d = { .op = "sub", .a = a, .b = b, .epilogue = epi, .n_epilogue = 3 };

	if (k->variant == 0) {
		d.out = o;
		kb_tl_composite(tl, &d);
	} else {
		d.out = kb_tl_alloc(tl, KB_FP32, 2, s);
		kb_tl_store(tl, o, kb_tl_composite(tl, &d));
	}
}

/* Tolerance 1e-6 relative per element: three fp32 roundings after exp. */
START_TEST(math_epilogue_chain)
{
	int64_t s[2] = { G_, T_ }, s1[2] = { G_, 1 };
	float a[G_ * T_], b[G_], c[G_ * T_], got[G_ * T_];
	kb_simulation *sim = kbt_data_sim(1, 1);
	chain_args k;
	kb_rng r;

	kb__rng_seed(&r, 77);
	kbt_fill_uniform(&r, a, G_ * T_, -3, 3);
	kbt_fill_uniform(&r, b, G_, -3, 3);
	kbt_fill_uniform(&r, c, G_ * T_, -3, 3);
	k.a = kbt_data_put(sim, KB_FP32, 2, s, a);
	k.b = kbt_data_put(sim, KB_FP32, 2, s1, b);
	k.c = kbt_data_put(sim, KB_FP32, 2, s, c);
	k.o = kbt_data_put(sim, KB_FP32, 2, s, NULL);
	k.variant = _i;
	kbt_data_run(sim, chain_kernel, &k);
	kbt_data_get(sim, KB_FP32, k.o, G_ * T_, got);
	for (int i = 0; i < G_; i++)
		for (int j = 0; j < T_; j++) {
			double w = 0.5 * exp((double)a[i * T_ + j] - b[i]) * c[i * T_ + j];

			ck_assert_msg(fabs(got[i * T_ + j] - w) <= 1e-6 * fabs(w),
				      "variant %d (%d,%d): %.9g, want %.9g", _i, i, j,
				      (double)got[i * T_ + j], w);
		}
	kb_simulation_destroy(sim);
}
END_TEST

/* In place, as softmax_merge's O *= corr: mul_bcast(O, corr, out = O). */
typedef struct inplace_args {
	uint64_t o, corr, res;
} inplace_args;

static void inplace_kernel(kb_tl *tl, void *p)
{
	const inplace_args *k = p;
	int64_t s[2] = { G_, T_ }, s1[2] = { G_, 1 };
	kb_tl_tensor *o = kb_tl_load(tl, kb_tl_ref(tl, k->o, KB_FP32, 2, s), NULL);
	kb_tl_tensor *c = kb_tl_load(tl, kb_tl_ref(tl, k->corr, KB_FP32, 2, s1), NULL);
	kb_tl_composite_desc d = { .op = "mul_bcast", .a = o, .b = c, .out = o };

	kb_tl_composite(tl, &d);
	kb_tl_composite(tl, &d);       /* twice: O * corr^2, in order */
	kb_tl_store(tl, kb_tl_ref(tl, k->res, KB_FP32, 2, s), o);
}

START_TEST(math_in_place)
{
	int64_t s[2] = { G_, T_ }, s1[2] = { G_, 1 };
	float o[G_ * T_], c[G_], got[G_ * T_];
	kb_simulation *sim = kbt_data_sim(1, 1);
	inplace_args k;
	kb_rng r;

	kb__rng_seed(&r, 5);
	kbt_fill_uniform(&r, o, G_ * T_, -3, 3);
	kbt_fill_uniform(&r, c, G_, 0.1, 1);
	k.o = kbt_data_put(sim, KB_FP32, 2, s, o);
	k.corr = kbt_data_put(sim, KB_FP32, 2, s1, c);
	k.res = kbt_data_put(sim, KB_FP32, 2, s, NULL);
	kbt_data_run(sim, inplace_kernel, &k);
	kbt_data_get(sim, KB_FP32, k.res, G_ * T_, got);
	for (int i = 0; i < G_; i++)
		for (int j = 0; j < T_; j++) {
			/* two fp32 roundings, exactly as the engine does them */
			float w = (o[i * T_ + j] * c[i]) * c[i];

			ck_assert_msg(got[i * T_ + j] == w, "(%d,%d): %.9g, want %.9g", i, j,
				      (double)got[i * T_ + j], (double)w);
		}
	kb_simulation_destroy(sim);
}
END_TEST

/* fp16 storage: add of two fp16 tensors into an fp16 output; fill. The sum
 * is formed in fp32 and rounded once to fp16: 2^-11 relative (~4.9e-4). */
typedef struct f16_args {
	uint64_t a, b, o, f;
} f16_args;

static void f16_kernel(kb_tl *tl, void *p)
{
	const f16_args *k = p;
	int64_t s[2] = { G_, T_ };
	kb_tl_tensor *a = kb_tl_load(tl, kb_tl_ref(tl, k->a, KB_FP16, 2, s), NULL);
	kb_tl_tensor *b = kb_tl_load(tl, kb_tl_ref(tl, k->b, KB_FP16, 2, s), NULL);
	kb_tl_composite_desc d = { .op = "add", .a = a, .b = b, .out = kb_tl_ref(tl, k->o, KB_FP16, 2, s) };

	kb_tl_composite(tl, &d);
	kb_tl_store(tl, kb_tl_ref(tl, k->f, KB_FP16, 2, s), kb_tl_full(tl, KB_FP16, 2, s, 1.5));
}

START_TEST(math_fp16_storage)
{
	int64_t s[2] = { G_, T_ };
	float a[G_ * T_], b[G_ * T_], got[G_ * T_], fill[G_ * T_];
	kb_simulation *sim = kbt_data_sim(1, 1);
	f16_args k;
	kb_rng r;

	kb__rng_seed(&r, 9);
	kbt_fill_uniform(&r, a, G_ * T_, -3, 3);
	kbt_fill_uniform(&r, b, G_ * T_, -3, 3);
	for (int i = 0; i < G_ * T_; i++) {     /* what fp16 storage holds */
		a[i] = kb__f16_to_f32(kb__f32_to_f16(a[i]));
		b[i] = kb__f16_to_f32(kb__f32_to_f16(b[i]));
	}
	k.a = kbt_data_put(sim, KB_FP16, 2, s, a);
	k.b = kbt_data_put(sim, KB_FP16, 2, s, b);
	k.o = kbt_data_put(sim, KB_FP16, 2, s, NULL);
	k.f = kbt_data_put(sim, KB_FP16, 2, s, NULL);
	kbt_data_run(sim, f16_kernel, &k);
	kbt_data_get(sim, KB_FP16, k.o, G_ * T_, got);
	kbt_data_get(sim, KB_FP16, k.f, G_ * T_, fill);
	for (int i = 0; i < G_ * T_; i++) {
		double w = (double)a[i] + b[i];

		ck_assert_msg(fabs(got[i] - w) <= 4.9e-4 * fabs(w) + 1e-7, "%d: %.9g want %.9g", i,
			      (double)got[i], w);
		ck_assert(fill[i] == 1.5f);
	}
	kb_simulation_destroy(sim);
}
END_TEST

/* fma takes three inputs: a composite head takes at most two. */
static void fma_head_kernel(kb_tl *tl, void *p)
{
	const uint64_t *a = p;
	int64_t s[2] = { G_, 1 };
	kb_tl_tensor *x = kb_tl_load(tl, kb_tl_ref(tl, *a, KB_FP32, 2, s), NULL);
	kb_tl_composite_desc d = { .op = "fma", .a = x, .b = x };

	kb_tl_composite(tl, &d);
}

START_TEST(math_fma_not_a_head)
{
	int64_t s[2] = { G_, 1 };
	float v[G_] = { 1, 2, 3, 4 };
	kb_simulation *sim = kbt_data_sim(1, 1);
	uint64_t a = kbt_data_put(sim, KB_FP32, 2, s, v);
	kb_error err;
	int rc = kb_simulation_launch(sim, fma_head_kernel, &a, 0, 1, &err);

	ck_assert_int_eq(rc, 0);
	rc = kb_simulation_run(sim, NULL, &err);
	ck_assert_int_eq(rc, KB_EVALIDATE);
	ck_assert_msg(strstr(err.message, "fma") && strstr(err.message, "at most 2"), "message '%s'",
		      err.message);
	kb_simulation_destroy(sim);
}
END_TEST


/* ------------------------------------------------------------------ */
/* one softmax_merge step                                              */
/* ------------------------------------------------------------------ */

#define SG 4
#define ST 80      /* V in TCM: two k-steps (tile_k 64), the last ragged; V from HBM: one */
#define SD 40

typedef struct sm_args {
	uint64_t s, m, l, o, v;      /* inputs */
	uint64_t mo, lo, oo;         /* results */
	int first;                   /* m, l, O from kb_tl_full (-inf, 0, 0) */
	int v_tcm;                   /* V loaded into TCM instead of an HBM ref */
} sm_args;

static void sm_kernel(kb_tl *tl, void *p)
{
	const sm_args *k = p;
	int64_t ss[2] = { SG, ST }, s1[2] = { SG, 1 }, so[2] = { SG, SD }, sv[2] = { ST, SD };
	kb_tl_tensor *S = kb_tl_load(tl, kb_tl_ref(tl, k->s, KB_FP32, 2, ss), NULL), *M, *L, *O, *V;

	if (k->first) {
		M = kb_tl_full(tl, KB_FP32, 2, s1, -INFINITY);
		L = kb_tl_full(tl, KB_FP32, 2, s1, 0.0);
		O = kb_tl_full(tl, KB_FP32, 2, so, 0.0);
	} else {
		M = kb_tl_load(tl, kb_tl_ref(tl, k->m, KB_FP32, 2, s1), NULL);
		L = kb_tl_load(tl, kb_tl_ref(tl, k->l, KB_FP32, 2, s1), NULL);
		O = kb_tl_load(tl, kb_tl_ref(tl, k->o, KB_FP32, 2, so), NULL);
	}
	V = kb_tl_ref(tl, k->v, KB_FP32, 2, sv);
	if (k->v_tcm)
		V = kb_tl_load(tl, V, NULL);
	{
		kb_tl_recipe_call merge = { "softmax_merge",
					    { { "s", S }, { "m", M }, { "l", L }, { "O", O } } };
		kb_tl_op add = { .op = "add", .args = { { "other", O } } };
		kb_tl_composite_desc d = { .op = "gemm", .b = V, .out = O, .prologue = &merge,
					   .n_prologue = 1, .epilogue = &add, .n_epilogue = 1 };

		kb_tl_composite(tl, &d);
	}
	kb_tl_store(tl, kb_tl_ref(tl, k->mo, KB_FP32, 2, s1), M);
	kb_tl_store(tl, kb_tl_ref(tl, k->lo, KB_FP32, 2, s1), L);
	kb_tl_store(tl, kb_tl_ref(tl, k->oo, KB_FP32, 2, so), O);
}

/*
 * The online-softmax step in double:
 *   m_new = max(m, max_j s_j); corr = exp(m - m_new); P = exp(s - m_new);
 *   l' = l corr + sum_j P_j;  O' = O corr + P V;  m' = m_new.
 * Tolerance: m' exactly (max is exact); l' 1e-5 relative per row; O' 1e-5
 * relative to max |O'| (P and corr rounded to fp32, an 80-term fp32 dot
 * product, one fp32 add: a few 1e-7 relative).
 * variant 0: m, l, O from HBM with rows where the old m wins and rows where
 * the tile's max wins, V an HBM ref; variant 1: the first step (m = -inf,
 * l = 0, O = 0 from kb_tl_full), V in TCM.
 */
START_TEST(softmax_merge_step)
{
	int64_t ss[2] = { SG, ST }, s1[2] = { SG, 1 }, so[2] = { SG, SD }, sv[2] = { ST, SD };
	float s[SG * ST], m[SG], l[SG], o[SG * SD], v[ST * SD];
	float gm[SG], gl[SG], go[SG * SD];
	double wo[SG * SD], go_d[SG * SD], rel, ab;
	kb_simulation *sim = kbt_data_sim(1, 1);
	sm_args k = { 0 };
	kb_rng r;

	kb__rng_seed(&r, 31 + (uint64_t)_i);
	kbt_fill_uniform(&r, s, SG * ST, -4, 4);
	kbt_fill_uniform(&r, v, ST * SD, -2, 2);
	kbt_fill_uniform(&r, o, SG * SD, -3, 3);
	kbt_fill_uniform(&r, l, SG, 1, 20);
	for (int i = 0; i < SG; i++)
		m[i] = i % 2 ? 6.0f : (float)(-1.0 + 0.5 * i);   /* odd rows: old max wins */
	k.first = _i == 1;
	k.v_tcm = _i == 1;
	if (k.first)
		for (int i = 0; i < SG; i++) {
			m[i] = -INFINITY;
			l[i] = 0;
			for (int j = 0; j < SD; j++)
				o[i * SD + j] = 0;
		}
	k.s = kbt_data_put(sim, KB_FP32, 2, ss, s);
	k.m = kbt_data_put(sim, KB_FP32, 2, s1, m);
	k.l = kbt_data_put(sim, KB_FP32, 2, s1, l);
	k.o = kbt_data_put(sim, KB_FP32, 2, so, o);
	k.v = kbt_data_put(sim, KB_FP32, 2, sv, v);
	k.mo = kbt_data_put(sim, KB_FP32, 2, s1, NULL);
	k.lo = kbt_data_put(sim, KB_FP32, 2, s1, NULL);
	k.oo = kbt_data_put(sim, KB_FP32, 2, so, NULL);
	kbt_data_run(sim, sm_kernel, &k);
	kbt_data_get(sim, KB_FP32, k.mo, SG, gm);
	kbt_data_get(sim, KB_FP32, k.lo, SG, gl);
	kbt_data_get(sim, KB_FP32, k.oo, SG * SD, go);
	for (int i = 0; i < SG; i++) {
		double mx = -INFINITY, mn, corr, lsum = 0, wl;

		for (int j = 0; j < ST; j++)
			mx = s[i * ST + j] > mx ? s[i * ST + j] : mx;
		mn = m[i] > mx ? m[i] : mx;
		corr = exp((double)m[i] - mn);
		for (int c = 0; c < SD; c++)
			wo[i * SD + c] = (double)o[i * SD + c] * corr;
		for (int j = 0; j < ST; j++) {
			double pj = exp((double)s[i * ST + j] - mn);

			lsum += pj;
			for (int c = 0; c < SD; c++)
				wo[i * SD + c] += pj * v[j * SD + c];
		}
		wl = (double)l[i] * corr + lsum;
		ck_assert_msg(gm[i] == (float)mn, "row %d: m = %.9g, want %.9g", i, (double)gm[i], mn);
		ck_assert_msg(fabs(gl[i] - wl) <= 1e-5 * wl, "row %d: l = %.9g, want %.9g", i,
			      (double)gl[i], wl);
	}
	for (int i = 0; i < SG * SD; i++)
		go_d[i] = go[i];
	rel = kbt_normwise_rel(go_d, wo, SG * SD, &ab);
	ck_assert_msg(rel <= 1e-5, "O: max abs err %.3g, rel %.3g (tolerance 1e-5)", ab, rel);
	kb_simulation_destroy(sim);
}
END_TEST

/*
 * A recipe prologue before a MATH head that streams an HBM operand and
 * writes an HBM output (ADR-0065 D4: the head may be gemm or math):
 * y = exp(P * x) with P = exp(s - m_new) the recipe's primary output,
 * auto-bound to the head's a. The head reads its own operands, not the
 * last recipe op's result.
 */
typedef struct pmh_args {
	uint64_t s, x, y, mo;
} pmh_args;

static void pmh_kernel(kb_tl *tl, void *p)
{
	const pmh_args *k = p;
	int64_t ss[2] = { SG, ST }, s1[2] = { SG, 1 }, so[2] = { SG, SD };
	kb_tl_tensor *S = kb_tl_load(tl, kb_tl_ref(tl, k->s, KB_FP32, 2, ss), NULL);
	kb_tl_tensor *M = kb_tl_full(tl, KB_FP32, 2, s1, -INFINITY);
	kb_tl_tensor *L = kb_tl_full(tl, KB_FP32, 2, s1, 0.0);
	kb_tl_tensor *O = kb_tl_full(tl, KB_FP32, 2, so, 0.0);
	kb_tl_recipe_call merge = { "softmax_merge", { { "s", S }, { "m", M }, { "l", L }, { "O", O } } };
	kb_tl_op ex = { .op = "exp" };
	kb_tl_composite_desc d = { .op = "mul", .b = kb_tl_ref(tl, k->x, KB_FP32, 2, ss), .out_hbm = k->y,
				   .prologue = &merge, .n_prologue = 1, .epilogue = &ex, .n_epilogue = 1 };

	kb_tl_composite(tl, &d);
	kb_tl_store(tl, kb_tl_ref(tl, k->mo, KB_FP32, 2, s1), M);
}

START_TEST(prologue_math_head)
{
	int64_t ss[2] = { SG, ST }, s1[2] = { SG, 1 };
	float s[SG * ST], x[SG * ST], y[SG * ST], gm[SG];
	kb_simulation *sim = kbt_data_sim(1, 1);
	pmh_args k;
	kb_rng r;

	kb__rng_seed(&r, 77);
	kbt_fill_uniform(&r, s, SG * ST, -4, 4);
	kbt_fill_uniform(&r, x, SG * ST, -1, 1);
	k.s = kbt_data_put(sim, KB_FP32, 2, ss, s);
	k.x = kbt_data_put(sim, KB_FP32, 2, ss, x);
	k.y = kbt_data_put(sim, KB_FP32, 2, ss, NULL);
	k.mo = kbt_data_put(sim, KB_FP32, 2, s1, NULL);
	kbt_data_run(sim, pmh_kernel, &k);
	kbt_data_get(sim, KB_FP32, k.y, SG * ST, y);
	kbt_data_get(sim, KB_FP32, k.mo, SG, gm);
	for (int i = 0; i < SG; i++) {
		double mx = -INFINITY;

		for (int j = 0; j < ST; j++)
			mx = s[i * ST + j] > mx ? s[i * ST + j] : mx;
		ck_assert_msg(gm[i] == (float)mx, "row %d: m = %.9g, want %.9g", i, (double)gm[i], mx);
		for (int j = 0; j < ST; j++) {
			double want = exp(exp((double)s[i * ST + j] - mx) * x[i * ST + j]);

			ck_assert_msg(fabs(y[i * ST + j] - want) <= 1e-5 * want, "y[%d][%d] = %.9g, want %.9g",
				      i, j, (double)y[i * ST + j], want);
		}
	}
	kb_simulation_destroy(sim);
}
END_TEST

TCase *data_math_tcase(void)
{
	TCase *tc = tcase_create("math");

	tcase_add_loop_test(tc, math_head_op, 0, (int)(sizeof(mcases) / sizeof(mcases[0])));
	tcase_add_loop_test(tc, math_epilogue_chain, 0, 2);
	tcase_add_test(tc, math_in_place);
	tcase_add_test(tc, math_fp16_storage);
	tcase_add_test(tc, math_fma_not_a_head);
	return tc;
}

TCase *data_softmax_merge_tcase(void)
{
	TCase *tc = tcase_create("softmax_merge");

	tcase_add_loop_test(tc, softmax_merge_step, 0, 2);
	tcase_add_test(tc, prologue_math_head);
	return tc;
}
