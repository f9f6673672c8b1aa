/*
 * The PE model: PE_SCHEDULER's plan of a command (DDD §7, §10 P3), strict
 * FIFO hazards (DDD §8), K-before-V DMA order in decode opt2 (ADR-0065
 * D6.2), dispatch records (ADR-0064 Rev2) and the deadlock report.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"
#include "pe/hazard.h"
#include "pe/plan.h"
#include "tl/tl_int.h"

/* ---- captured commands and a minimal machine ---- */

#include "capture.h"

static kb_tl *new_tl(capture *cp)
{
	kb_tl_config cfg;
	kb_tl *tl;

	memset(&cfg, 0, sizeof(cfg));
	cfg.num_programs = 1;
	cfg.n_pes = 1;
	cfg.cost = (kb_cost_model){ 40.0, 0.0625, 1024, 1.0 };
	cfg.tcm_bytes = 1u << 20;
	cfg.hbm_bytes = UINT64_C(1) << 30;
	cfg.tag = 3;
	cfg.emit = cap_emit;
	cfg.emit_ctx = cp;
	tl = kb__tl_create(&cfg);
	ck_assert_ptr_nonnull(tl);
	return tl;
}

typedef struct fixture {
	kb_topology *topo;
	kb_machine m;
	capture cp;
	kb_tl *tl;
} fixture;

static void fx_init(fixture *f)
{
	kb_error err;

	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(kb_topology_default(&f->topo, &err), KB_OK);
	f->m.tp = kb__topology_params(f->topo);
	f->m.cost = (kb_cost_model){ 40.0, 0.0625, 1024, 1.0 };
	f->m.staging_slots = 4;
	f->m.n_pes = 1;
	f->tl = new_tl(&f->cp);
}

static void fx_done(fixture *f)
{
	cap_clear(&f->cp);
	kb__tl_destroy(f->tl);
	kb_topology_destroy(f->topo);
}

static kb_plan *plan_last(fixture *f)
{
	kb_plan *p = NULL;
	kb_error err;

	ck_assert_int_gt(f->cp.n, 0);
	ck_assert_int_eq(kb__plan_create(&p, f->cp.c[f->cp.n - 1], &f->m, &err), KB_OK);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* Checks a stage template against (kind, eng, op, operand) rows. */
static void expect_stages(const kb_stage_ref *st, uint32_t n, const int (*want)[4], uint32_t n_want,
			  const char *what)
{
	ck_assert_msg(n == n_want, "%s: %u stages, want %u", what, n, n_want);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(st[i].kind == want[i][0] && st[i].eng == want[i][1] &&
				      st[i].op == want[i][2] && st[i].operand == want[i][3],
			      "%s stage %u: (%d, %d, %d, %d), want (%d, %d, %d, %d)", what, i,
			      st[i].kind, st[i].eng, st[i].op, st[i].operand, want[i][0], want[i][1],
			      want[i][2], want[i][3]);
}

/* ---- plans ---- */

START_TEST(test_plan_softmax_merge)
{
	static const int last[][4] = {
		{ KB_ST_DMA_READ, KB_ENG_DMA, 8, 1 },   /* V only: P is TCM */
		{ KB_ST_FETCH, KB_ENG_TCM, 8, -1 },
		{ KB_ST_GEMM, KB_ENG_GEMM, 8, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 9, -1 },     /* add, per output tile */
		{ KB_ST_STORE, KB_ENG_TCM, 8, -1 },     /* O in TCM: no DMA_WRITE */
	};
	fixture f;
	kb_tl_tensor *S, *m, *l, *O, *V;
	kb_tl_recipe_call merge;
	kb_tl_op add;
	kb_tl_composite_desc d = { .op = "gemm" };
	kb_plan *p;
	uint64_t dma_reads = 0;

	fx_init(&f);
	S = tcm2(f.tl, KB_FP16, 8, 64);
	m = tcm2(f.tl, KB_FP32, 8, 1);
	l = tcm2(f.tl, KB_FP32, 8, 1);
	O = tcm2(f.tl, KB_FP32, 8, 128);
	V = hbm2(f.tl, 0x40000, KB_FP16, 64, 128);
	merge = (kb_tl_recipe_call){ "softmax_merge", { { "s", S }, { "m", m }, { "l", l }, { "O", O } } };
	add = (kb_tl_op){ .op = "add", .args = { { "other", O } } };
	d.b = V;
	d.out = O;
	d.prologue = &merge;
	d.n_prologue = 1;
	d.epilogue = &add;
	d.n_epilogue = 1;
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_int_eq(p->gemm, 8);
	ck_assert_uint_eq(p->n_pre, 8);
	for (uint32_t i = 0; i < p->n_pre; i++) {
		ck_assert_uint_eq(p->pre[i].kind, KB_ST_MATH);
		ck_assert_uint_eq(p->pre[i].eng, KB_ENG_MATH);
		ck_assert_int_eq(p->pre[i].op, (int)i);
	}
	ck_assert_uint_eq(p->n_post, 0);
	/* (G=8, TILE=64, d=128) at tiles 64/64/128: one k-step, one output tile */
	ck_assert_int_eq(p->M, 8);
	ck_assert_int_eq(p->K, 64);
	ck_assert_int_eq(p->N, 128);
	ck_assert_uint_eq(p->kt, 1);
	ck_assert_uint_eq(p->n_steps, 1);
	expect_stages(p->last, p->n_last, last, 5, "last k-step");
	ck_assert_int_eq(p->phase, KB_PH_PRE);
	for (uint64_t s = 0; s < p->n_steps; s++) {
		uint32_t n;
		const kb_stage_ref *st = kb__plan_stages(p, KB_PH_LOOP, s, &n);

		for (uint32_t i = 0; i < n; i++)
			dma_reads += st[i].kind == KB_ST_DMA_READ;
	}
	ck_assert_uint_eq(dma_reads, 1);
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

/* Stage costs of one phase's stages, from two plans of one command. */
static void same_costs(const kb_plan *a, const kb_plan *b, kb_phase ph, uint64_t step,
		       const kb_stage_ref *sa, const kb_stage_ref *sb, uint32_t n, int cmd)
{
	for (uint32_t i = 0; i < n; i++) {
		kb_stage_cost x, y;

		kb__plan_cost(a, ph, ph == KB_PH_LOOP ? step : i, &sa[i], &x);
		kb__plan_cost(b, ph, ph == KB_PH_LOOP ? step : i, &sb[i], &y);
		ck_assert_msg(memcmp(&x.cycles, &y.cycles, sizeof(double)) == 0 && x.bytes == y.bytes &&
				      x.n == y.n && strcmp(x.op, y.op) == 0,
			      "command %d phase %d stage %u: cost differs from a fresh plan's", cmd, ph, i);
	}
}

/* b, a plan made from scratch, and a of the same command (from a pool)
 * have the same stages, geometry and stage costs. */
static void same_plan(const kb_plan *a, const kb_plan *b, int cmd)
{
	ck_assert_int_eq(a->gemm, b->gemm);
	ck_assert_uint_eq(a->n_pre, b->n_pre);
	ck_assert_uint_eq(a->n_post, b->n_post);
	ck_assert_uint_eq(a->n_mid, b->n_mid);
	ck_assert_uint_eq(a->n_last, b->n_last);
	/* the loop's geometry: tile counts, sizes and steps */
	ck_assert_msg(memcmp(&a->mt, &b->mt, offsetof(kb_plan, pre) - offsetof(kb_plan, mt)) == 0,
		      "command %d: loop geometry differs from a fresh plan's", cmd);
	ck_assert(memcmp(a->pre, b->pre, a->n_pre * sizeof(a->pre[0])) == 0);
	ck_assert(memcmp(a->post, b->post, a->n_post * sizeof(a->post[0])) == 0);
	ck_assert(memcmp(a->mid, b->mid, a->n_mid * sizeof(a->mid[0])) == 0);
	ck_assert(memcmp(a->last, b->last, a->n_last * sizeof(a->last[0])) == 0);
	ck_assert_int_eq(a->phase, b->phase);
	same_costs(a, b, KB_PH_PRE, 0, a->pre, b->pre, a->n_pre, cmd);
	same_costs(a, b, KB_PH_POST, 0, a->post, b->post, a->n_post, cmd);
	for (uint64_t s = 0; s < a->n_steps; s++) {
		uint32_t na, nb;
		const kb_stage_ref *sa = kb__plan_stages(a, KB_PH_LOOP, s, &na);
		const kb_stage_ref *sb = kb__plan_stages(b, KB_PH_LOOP, s, &nb);

		ck_assert_uint_eq(na, nb);
		same_costs(a, b, KB_PH_LOOP, s, sa, sb, na, cmd);
	}
}

/* Six tiles of a decode-like kernel's composites, captured in f. */
static void decode_like(fixture *f)
{
	kb_tl_tensor *m, *l, *O, *q, *q96, *Kt;

	q = tcm2(f->tl, KB_FP16, 8, 128);
	m = tcm2(f->tl, KB_FP32, 8, 1);
	l = tcm2(f->tl, KB_FP32, 8, 1);
	O = tcm2(f->tl, KB_FP32, 8, 128);
	q96 = tcm2(f->tl, KB_FP16, 8, 96);
	Kt = tcm2(f->tl, KB_FP16, 64, 96);
	for (int j = 0; j < 6; j++) {
		kb_tl_op scale = { .op = "scale", .extras = { { "scale", 0.125 } } };
		kb_tl_op add = { .op = "add", .args = { { "other", O } } };
		kb_tl_recipe_call merge;
		kb_tl_composite_desc d;
		kb_tl_tensor *S, *K = hbm2(f->tl, 0x10000 + (uint64_t)j * 0x8000, KB_FP16, 64, 128);

		ck_assert_int_eq(kb_tl_scope_begin(f->tl), KB_OK);
		d = (kb_tl_composite_desc){ .op = "gemm", .a = q, .b = K, .flags = KB_TL_TRANS_B,
					    .epilogue = &scale, .n_epilogue = 1 };
		S = kb_tl_composite(f->tl, &d);
		ck_assert_ptr_nonnull(S);
		merge = (kb_tl_recipe_call){ "softmax_merge", { { "s", S }, { "m", m }, { "l", l }, { "O", O } } };
		d = (kb_tl_composite_desc){ .op = "gemm", .b = hbm2(f->tl, 0x80000, KB_FP16, 64, 128),
					    .out = O, .prologue = &merge, .n_prologue = 1,
					    .epilogue = &add, .n_epilogue = 1 };
		ck_assert_ptr_nonnull(kb_tl_composite(f->tl, &d));
		d = (kb_tl_composite_desc){ .op = "exp_diff", .a = S, .b = m };
		ck_assert_ptr_nonnull(kb_tl_composite(f->tl, &d));
		/* opt3's Q.K^T on a K tile in TCM: two k-steps (64, then 32) */
		d = (kb_tl_composite_desc){ .op = "gemm", .a = q96, .b = Kt, .flags = KB_TL_TRANS_B,
					    .epilogue = &scale, .n_epilogue = 1 };
		ck_assert_ptr_nonnull(kb_tl_composite(f->tl, &d));
		ck_assert_int_eq(kb_tl_scope_end(f->tl), KB_OK);
	}
}

/* A plan copied from the pool's memo of a digest key (the tl context's
 * replays) has the stages, geometry and stage costs of a plan built
 * from scratch, for every command of a decode-like kernel. */
/* The scheduler's kb__plan_first_cost (no tests, once a step) names the
 * memo entry kb__plan_cost_index (with tests) does, for every step's
 * first stage of a plan with memoised costs. */
static void first_costs_match(const kb_plan *p, int cmd)
{
	static const kb_phase phases[] = { KB_PH_PRE, KB_PH_LOOP, KB_PH_POST };

	if (!p->cost_ok)
		return;
	for (int k = 0; k < 3; k++) {
		uint64_t steps = phases[k] == KB_PH_PRE    ? p->n_pre
				 : phases[k] == KB_PH_POST ? p->n_post
							   : p->n_steps;

		for (uint64_t step = 0; step < steps; step++) {
			uint32_t n;
			const kb_stage_ref *st = kb__plan_stages(p, phases[k], step, &n);
			int i = kb__plan_cost_index(p, phases[k], step, st);

			ck_assert_msg(i >= 0 && kb__plan_first_cost(p, phases[k], step, st) == &p->cost[i],
				      "command %d: phase %d step %llu: first cost is not entry %d", cmd,
				      (int)phases[k], (unsigned long long)step, i);
		}
	}
}

START_TEST(test_plan_memo_matches)
{
	fixture f;
	kb_plan_pool pool = { 0 };
	int keyed = 0, multi = 0;

	fx_init(&f);
	decode_like(&f);
	for (int i = 0; i < f.cp.n; i++) {
		kb_cmd *c = f.cp.c[i];
		kb_plan *a, *b;
		kb_error err;

		ck_assert_int_eq(kb__plan_create_from(&a, &pool, c, &f.m, &err), KB_OK);
		ck_assert_int_eq(kb__plan_create(&b, c, &f.m, &err), KB_OK);
		keyed += c->kind == KB_CMD_COMPOSITE && c->dig->key != 0;
		/* a replay of several loop steps takes its costs from the memo */
		multi += c->kind == KB_CMD_COMPOSITE && c->dig->key != 0 && a->n_steps > 1 && a->cost_ok;
		same_plan(a, b, i);
		first_costs_match(a, i);
		kb__plan_recycle(a, &pool);
		kb__plan_free(b);
	}
	/* templates from the second tile's calls on: tiles 3 to 6 replay */
	ck_assert_int_ge(keyed, 16);
	ck_assert_int_ge(multi, 4);
	ck_assert_ptr_nonnull(pool.memo);
	kb__plan_free_pool(&pool);
	fx_done(&f);
}
END_TEST

/* A pool's memo serves the machine of its first plan: the same commands
 * planned from that pool for another machine (other GEMM tiles, other DMA
 * set-up) get that machine's plans, by either of kb__plan_create_from's
 * paths, not the first machine's geometry and costs from the memo. */
START_TEST(test_plan_memo_one_machine)
{
	fixture f;
	kb_plan_pool pool = { 0 };
	kb_topology *t2;
	kb_machine m2;
	kb_error err;

	fx_init(&f);
	decode_like(&f);
	ck_assert_int_eq(kb_topology_clone(&t2, f.topo, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t2, "pe.gemm.tile_k", "32", &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t2, "pe.dma.setup_cycles", "100", &err), KB_OK);
	m2 = f.m;
	m2.tp = kb__topology_params(t2);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < f.cp.n; i++) {
			const kb_machine *m = round ? &m2 : &f.m;
			kb_plan *a, *b;

			ck_assert_int_eq(kb__plan_create_from(&a, &pool, f.cp.c[i], m, &err), KB_OK);
			ck_assert_int_eq(kb__plan_create(&b, f.cp.c[i], m, &err), KB_OK);
			same_plan(a, b, i);
			kb__plan_recycle(a, &pool);
			kb__plan_free(b);
		}
	kb__plan_free_pool(&pool);
	kb_topology_destroy(t2);
	fx_done(&f);
}
END_TEST

START_TEST(test_plan_gemm_multi_k)
{
	/* A HBM, B TCM, out HBM, K = 256: four k-steps; the non-last ones
	 * stream A, fetch and accumulate; the last stores and writes back. */
	static const int mid[][4] = {
		{ KB_ST_DMA_READ, KB_ENG_DMA, 0, 0 },
		{ KB_ST_FETCH, KB_ENG_TCM, 0, -1 },
		{ KB_ST_GEMM, KB_ENG_GEMM, 0, -1 },
	};
	static const int last[][4] = {
		{ KB_ST_DMA_READ, KB_ENG_DMA, 0, 0 },
		{ KB_ST_FETCH, KB_ENG_TCM, 0, -1 },
		{ KB_ST_GEMM, KB_ENG_GEMM, 0, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 1, -1 },
		{ KB_ST_STORE, KB_ENG_TCM, 0, -1 },
		{ KB_ST_DMA_WRITE, KB_ENG_DMA, 0, -1 },
	};
	fixture f;
	kb_tl_op relu = { .op = "relu" };
	kb_tl_composite_desc d = { .op = "gemm", .epilogue = &relu, .n_epilogue = 1 };
	kb_plan *p;
	uint32_t n;

	fx_init(&f);
	d.a = hbm2(f.tl, 0x1000, KB_FP16, 128, 256);
	d.b = tcm2(f.tl, KB_FP16, 256, 128);
	d.out = hbm2(f.tl, 0x100000, KB_FP16, 128, 128);
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_pre, 0);
	ck_assert_uint_eq(p->mt, 2);
	ck_assert_uint_eq(p->nt, 1);
	ck_assert_uint_eq(p->kt, 4);
	ck_assert_uint_eq(p->n_steps, 8);
	expect_stages(p->mid, p->n_mid, mid, 3, "mid k-step");
	expect_stages(p->last, p->n_last, last, 6, "last k-step");
	ck_assert_ptr_eq(kb__plan_stages(p, KB_PH_LOOP, 0, &n), p->mid);
	ck_assert_ptr_eq(kb__plan_stages(p, KB_PH_LOOP, 3, &n), p->last);
	ck_assert_ptr_eq(kb__plan_stages(p, KB_PH_LOOP, 4, &n), p->mid);
	ck_assert_ptr_eq(kb__plan_stages(p, KB_PH_LOOP, 7, &n), p->last);
	ck_assert_int_eq(p->phase, KB_PH_LOOP);
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

START_TEST(test_plan_math_only)
{
	static const int tcm[][4] = {
		{ KB_ST_MATH, KB_ENG_MATH, 0, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 1, -1 },
	};
	static const int hbm_out[][4] = {
		{ KB_ST_MATH, KB_ENG_MATH, 0, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 1, -1 },
		{ KB_ST_DMA_WRITE, KB_ENG_DMA, 0, -1 },
	};
	static const int hbm_in[][4] = {
		{ KB_ST_DMA_READ, KB_ENG_DMA, 0, 0 },
		{ KB_ST_MATH, KB_ENG_MATH, 0, -1 },
	};
	fixture f;
	kb_tl_op scale = { .op = "scale", .extras = { { "scale", 2.0 } } };
	kb_tl_composite_desc d = { .op = "add", .epilogue = &scale, .n_epilogue = 1 };
	kb_tl_tensor *x, *y;
	kb_plan *p;

	fx_init(&f);
	x = tcm2(f.tl, KB_FP32, 8, 128);
	y = tcm2(f.tl, KB_FP32, 8, 128);
	d.a = x;
	d.b = y;
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_int_eq(p->gemm, -1);
	ck_assert_uint_eq(p->n_pre, 0);
	ck_assert_uint_eq(p->n_steps, 1);
	expect_stages(p->last, p->n_last, tcm, 2, "math in TCM");
	kb__plan_free(p);

	d.out_hbm = 0x2000;   /* HBM output: written back */
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	expect_stages(p->last, p->n_last, hbm_out, 3, "math to HBM");
	kb__plan_free(p);

	/* HBM head operand: streamed in first */
	d = (kb_tl_composite_desc){ .op = "exp", .a = hbm2(f.tl, 0x8000, KB_FP32, 8, 128) };
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	expect_stages(p->last, p->n_last, hbm_in, 2, "math from HBM");
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

/* A recipe prologue before a MATH head (ADR-0065 D4/D6.7: the head may be
 * gemm or math): the head, not the first recipe op, streams its HBM
 * operand in and writes its HBM output back. */
START_TEST(test_plan_prologue_math_head)
{
	static const int want[][4] = {
		{ KB_ST_MATH, KB_ENG_MATH, 0, -1 }, { KB_ST_MATH, KB_ENG_MATH, 1, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 2, -1 }, { KB_ST_MATH, KB_ENG_MATH, 3, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 4, -1 }, { KB_ST_MATH, KB_ENG_MATH, 5, -1 },
		{ KB_ST_MATH, KB_ENG_MATH, 6, -1 }, { KB_ST_MATH, KB_ENG_MATH, 7, -1 },
		{ KB_ST_DMA_READ, KB_ENG_DMA, 8, 1 },   /* the head's b, from HBM */
		{ KB_ST_MATH, KB_ENG_MATH, 8, -1 },     /* mul: P * b */
		{ KB_ST_MATH, KB_ENG_MATH, 9, -1 },     /* exp epilogue on the running value */
		{ KB_ST_DMA_WRITE, KB_ENG_DMA, 8, -1 }, /* the head's HBM output, once final */
	};
	fixture f;
	kb_tl_tensor *S, *m, *l, *O;
	kb_tl_recipe_call merge;
	kb_tl_op ex = { .op = "exp" };
	kb_tl_composite_desc d = { .op = "mul", .epilogue = &ex, .n_epilogue = 1 };
	kb_stage_cost c;
	kb_plan *p;

	fx_init(&f);
	S = tcm2(f.tl, KB_FP32, 8, 64);
	m = tcm2(f.tl, KB_FP32, 8, 1);
	l = tcm2(f.tl, KB_FP32, 8, 1);
	O = tcm2(f.tl, KB_FP32, 8, 128);
	merge = (kb_tl_recipe_call){ "softmax_merge", { { "s", S }, { "m", m }, { "l", l }, { "O", O } } };
	d.prologue = &merge;
	d.n_prologue = 1;
	d.b = hbm2(f.tl, 0x8000, KB_FP32, 8, 64);
	d.out_hbm = 0x20000;
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_int_eq(p->gemm, -1);
	expect_stages(p->last, p->n_last, want, 12, "prologue + math head");
	kb__plan_cost(p, KB_PH_LOOP, 0, &p->last[8], &c);
	ck_assert_int_eq(c.bytes, 8 * 64 * 4);
	kb__plan_cost(p, KB_PH_LOOP, 0, &p->last[11], &c);
	ck_assert_int_eq(c.bytes, 8 * 64 * 4);
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

/* Issue 15 hole 3: emit's check of the plan's limits agrees with the
 * plan PE_SCHEDULER builds at admission. The largest composites emit
 * accepts plan without error at exactly KB_PLAN_MAX_STAGES stages, and one
 * op more fails at emit, so admission never meets a plan over its limits. */
START_TEST(test_plan_limit_matches_emit)
{
	fixture f;
	kb_tl_op relu[40];
	kb_tl_composite_desc d;
	kb_plan *p;

	fx_init(&f);
	for (int i = 0; i < 40; i++)
		relu[i] = (kb_tl_op){ .op = "relu" };
	/* GEMM-less, HBM in and out: 2 DMA_READ + add + 36 relu + DMA_WRITE */
	d = (kb_tl_composite_desc){ .op = "add", .epilogue = relu, .n_epilogue = 36,
				    .out_hbm = 0x20000 };
	d.a = hbm2(f.tl, 0x1000, KB_FP32, 8, 64);
	d.b = hbm2(f.tl, 0x4000, KB_FP32, 8, 64);
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_last, KB_PLAN_MAX_STAGES);
	kb__plan_free(p);
	/* GEMM on HBM operands into HBM: the last k-step is 2 DMA_READ, FETCH,
	 * GEMM, 34 OUTPUT_TILE relu, STORE, DMA_WRITE */
	d = (kb_tl_composite_desc){ .op = "gemm", .epilogue = relu, .n_epilogue = 34,
				    .out_hbm = 0x20000 };
	d.a = hbm2(f.tl, 0x1000, KB_FP32, 8, 64);
	d.b = hbm2(f.tl, 0x8000, KB_FP32, 64, 64);
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_last, KB_PLAN_MAX_STAGES);
	kb__plan_free(p);
	d.n_epilogue = 35;
	ck_assert_ptr_null(kb_tl_composite(f.tl, &d));
	ck_assert_int_eq(kb__tl_error(f.tl)->detail, KB_V_TOO_MANY_STAGES);
	ck_assert(strstr(kb__tl_error(f.tl)->message, "op 35 (relu)") != NULL);
	fx_done(&f);
}
END_TEST

/* DDD §5.3: every MATH op costs ceil(n / vector_width), n the size of the
 * tensor it touches, operand or not: an op after the GEMM works on the
 * GEMM's output (a tile of it inside the loop, all of it after the loop);
 * an epilogue of a GEMM-less composite works on the head's result. */
START_TEST(test_math_cost_every_scope)
{
	fixture f;
	kb_tl_op kt = { .op = "relu", .scope = KB_TL_K_TILE };
	kb_tl_op ker = { .op = "scale", .scope = KB_TL_KERNEL, .extras = { { "scale", 0.5 } } };
	kb_tl_op both[2];
	kb_tl_op un = { .op = "relu" };
	kb_tl_composite_desc d = { .op = "gemm" };
	kb_stage_cost c;
	kb_plan *p;
	uint32_t vw;

	fx_init(&f);
	vw = (uint32_t)f.m.tp->math.vector_width;
	both[0] = kt;
	both[1] = ker;
	/* (128, 256) x (256, 128) into TCM: 2 x 1 output tiles, 4 k-steps */
	d.a = tcm2(f.tl, KB_FP32, 128, 256);
	d.b = tcm2(f.tl, KB_FP32, 256, 128);
	d.epilogue = both;
	d.n_epilogue = 2;
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_uint_eq(p->kt, 4);
	/* K_TILE: every k-step, after the GEMM, on the (64, 128) tile */
	ck_assert_uint_eq(p->n_mid, 3);
	ck_assert_uint_eq(p->mid[2].kind, KB_ST_MATH);
	ck_assert_int_eq(p->mid[2].op, 1);
	ck_assert_uint_eq(p->last[2].kind, KB_ST_MATH);
	ck_assert_int_eq(p->last[2].op, 1);
	kb__plan_cost(p, KB_PH_LOOP, 0, &p->mid[2], &c);
	ck_assert_int_eq(c.n, 64 * 128);
	ck_assert(c.cycles == (double)((64 * 128 + vw - 1) / vw));
	/* KERNEL after the GEMM: once after the loop, on the whole output */
	ck_assert_uint_eq(p->n_post, 1);
	ck_assert_int_eq(p->post[0].op, 2);
	kb__plan_cost(p, KB_PH_POST, 0, &p->post[0], &c);
	ck_assert_str_eq(c.op, "scale");
	ck_assert_int_eq(c.n, 128 * 128);
	ck_assert(c.cycles == (double)((128 * 128 + vw - 1) / vw));
	kb__plan_free(p);

	/* a unary epilogue of a GEMM-less composite: the head's (8, 100) result */
	d = (kb_tl_composite_desc){ .op = "exp", .a = tcm2(f.tl, KB_FP32, 8, 100),
				    .epilogue = &un, .n_epilogue = 1 };
	ck_assert_ptr_nonnull(kb_tl_composite(f.tl, &d));
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_last, 2);
	kb__plan_cost(p, KB_PH_LOOP, 0, &p->last[1], &c);
	ck_assert_str_eq(c.op, "relu");
	ck_assert_int_eq(c.n, 800);
	ck_assert(c.cycles == (double)((800 + vw - 1) / vw));
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

START_TEST(test_plan_simple_commands)
{
	fixture f;
	kb_plan *p;
	kb_tl_tensor *t;
	int64_t s[2] = { 8, 8 };

	fx_init(&f);
	t = kb_tl_load(f.tl, hbm2(f.tl, 0x1000, KB_FP32, 8, 8), NULL);
	ck_assert_ptr_nonnull(t);
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_last, 1);
	ck_assert_uint_eq(p->last[0].kind, KB_ST_DMA_READ);
	kb__plan_free(p);
	ck_assert_ptr_nonnull(kb_tl_full(f.tl, KB_FP32, 2, s, 1.0));
	p = plan_last(&f);
	ck_assert_uint_eq(p->n_last, 1);
	ck_assert_uint_eq(p->last[0].kind, KB_ST_FILL);
	ck_assert_uint_eq(p->last[0].eng, KB_ENG_MATH);
	kb__plan_free(p);
	fx_done(&f);
}
END_TEST

/* ---- runs: records ---- */

typedef struct rec {
	uint64_t t0, t1, cmd;
	uint32_t pe;
	char eng[8], op[16], kind[16];
	int64_t lbytes;
	int64_t step;            /* the record's "step", -1: none */
} rec;

typedef struct recs {
	rec *v;
	size_t n, cap;
} recs;

static int on_rec(const kb_oplog_record *r, void *payload)
{
	recs *rs = payload;
	rec *x;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? 2 * rs->cap : 256;
		rec *v = realloc(rs->v, cap * sizeof(*v));

		if (!v)
			return 1;
		rs->v = v;
		rs->cap = cap;
	}
	x = &rs->v[rs->n++];
	memset(x, 0, sizeof(*x));
	x->t0 = r->t0_ps;
	x->t1 = r->t1_ps;
	x->cmd = r->cmd;
	x->pe = r->pe;
	x->lbytes = r->lbytes;
	snprintf(x->eng, sizeof(x->eng), "%s", r->eng);
	snprintf(x->op, sizeof(x->op), "%s", r->op);
	snprintf(x->kind, sizeof(x->kind), "%s", r->kind ? r->kind : "");
	/* the JSON line carries the same fields */
	if (!r->json || r->json_len == 0 || r->json[0] != '{' || r->json[r->json_len - 1] != '}')
		return 1;
	x->step = -1;
	{
		char line[512];
		const char *at;

		snprintf(line, sizeof(line), "%.*s", (int)r->json_len, r->json);
		if ((at = strstr(line, "\"step\":")))
			x->step = strtoll(at + 7, NULL, 10);
	}
	return 0;
}

static int is_stage(const rec *r)
{
	return strcmp(r->eng, "cpu") != 0 && strcmp(r->eng, "sched") != 0;
}

/* First start and last end of cmd's engine stages on pe. */
static int span(const recs *rs, uint32_t pe, uint64_t cmd, uint64_t *t0, uint64_t *t1)
{
	int n = 0;

	*t0 = UINT64_MAX;
	*t1 = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const rec *r = &rs->v[i];

		if (r->pe != pe || r->cmd != cmd || !is_stage(r))
			continue;
		n++;
		if (r->t0 < *t0)
			*t0 = r->t0;
		if (r->t1 > *t1)
			*t1 = r->t1;
	}
	return n;
}

typedef struct two_args {
	uint64_t b1, b2;
	int shared;       /* both accumulate into one O (rw) or write their own */
} two_args;

/* Two GEMM composites with TCM a and HBM b (four k-steps each). */
static void two_kernel(kb_tl *tl, void *p)
{
	const two_args *a = p;
	int64_t sa[2] = { 64, 256 }, sb[2] = { 256, 128 }, so[2] = { 64, 128 };
	kb_tl_tensor *A = kb_tl_full(tl, KB_FP16, 2, sa, 1.0);
	kb_tl_tensor *O1 = kb_tl_full(tl, KB_FP32, 2, so, 0.0);
	kb_tl_tensor *O2 = a->shared ? O1 : kb_tl_full(tl, KB_FP32, 2, so, 0.0);
	kb_tl_op add1 = { .op = "add", .args = { { "other", O1 } } };
	kb_tl_op add2 = { .op = "add", .args = { { "other", O2 } } };
	kb_tl_composite_desc d1 = { .op = "gemm", .a = A, .b = kb_tl_ref(tl, a->b1, KB_FP16, 2, sb),
				    .out = O1, .epilogue = &add1, .n_epilogue = 1 };
	kb_tl_composite_desc d2 = { .op = "gemm", .a = A, .b = kb_tl_ref(tl, a->b2, KB_FP16, 2, sb),
				    .out = O2, .epilogue = &add2, .n_epilogue = 1 };

	/* both fills must be done before the composites go */
	kb_tl_wait(tl, O2);
	kb_tl_wait(tl, A);
	kb_tl_composite(tl, &d1);
	kb_tl_composite(tl, &d2);
}

static int run_two(int shared, recs *rs, uint64_t *c1, uint64_t *c2)
{
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	int64_t sb[2] = { 256, 128 };
	two_args a = { 0, 0, shared };
	kb_error err;
	kb_result res = KB_RESULT_INIT;
	int rc;

	o.threads = 1;
	o.on_record = on_rec;
	o.payload = rs;
	o.pes = 1;
	res = (kb_result)KB_RESULT_INIT;
	ck_assert_int_eq(kb_simulation_create(&sim, NULL, &o, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, sb, 1, &a.b1, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, sb, 1, &a.b2, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, two_kernel, &a, 0, 1, &err), KB_OK);
	rc = kb_simulation_run(sim, &res, &err);
	ck_assert_msg(rc == KB_OK, "run: %s", err.message);
	kb_result_clear(&res);
	kb_simulation_destroy(sim);
	/* the composites are the last two commands */
	*c1 = *c2 = 0;
	for (size_t i = 0; i < rs->n; i++)
		if (strcmp(rs->v[i].op, "dispatch") == 0 && strcmp(rs->v[i].kind, "composite") == 0) {
			*c1 = *c2;
			*c2 = rs->v[i].cmd;
		}
	ck_assert_uint_eq(*c2, *c1 + 1);
	return rc;
}

START_TEST(test_fifo_shared_rw)
{
	recs rs = { NULL, 0, 0 };
	uint64_t c1, c2, a0, a1, b0, b1;
	int hazard = 0;

	run_two(1, &rs, &c1, &c2);
	ck_assert_int_gt(span(&rs, 0, c1, &a0, &a1), 0);
	ck_assert_int_gt(span(&rs, 0, c2, &b0, &b1), 0);
	/* completion in dispatch order, no interleaving on any engine */
	ck_assert_msg(a1 <= b0, "cmd %llu ends at %llu, cmd %llu starts at %llu",
		      (unsigned long long)c1, (unsigned long long)a1, (unsigned long long)c2,
		      (unsigned long long)b0);
	ck_assert_uint_lt(a1, b1);
	for (size_t i = 0; i < rs.n; i++)
		hazard |= strcmp(rs.v[i].op, "hazard_wait") == 0 && rs.v[i].cmd == c2;
	ck_assert(hazard);
	free(rs.v);
}
END_TEST

START_TEST(test_disjoint_overlap)
{
	recs rs = { NULL, 0, 0 };
	uint64_t c1, c2, a0, a1, b0, b1;

	run_two(0, &rs, &c1, &c2);
	ck_assert_int_gt(span(&rs, 0, c1, &a0, &a1), 0);
	ck_assert_int_gt(span(&rs, 0, c2, &b0, &b1), 0);
	ck_assert_msg(b0 < a1, "disjoint composites do not overlap: B starts %llu, A ends %llu",
		      (unsigned long long)b0, (unsigned long long)a1);
	for (size_t i = 0; i < rs.n; i++)
		ck_assert(!(strcmp(rs.v[i].op, "hazard_wait") == 0 && rs.v[i].cmd == c2));
	free(rs.v);
}
END_TEST

/* One GEMM of TILES output tiles of one k-step each, b from HBM. */
#define TILES 40

static void wide_kernel(kb_tl *tl, void *p)
{
	int64_t sa[2] = { 8, 8 }, sb[2] = { 8, 8 * TILES }, so[2] = { 8, 8 * TILES };
	kb_tl_tensor *A = kb_tl_full(tl, KB_FP16, 2, sa, 1.0);
	kb_tl_tensor *O = kb_tl_full(tl, KB_FP32, 2, so, 0.0);
	kb_tl_composite_desc d = { .op = "gemm", .a = A,
				   .b = kb_tl_ref(tl, *(const uint64_t *)p, KB_FP16, 2, sb), .out = O };

	kb_tl_wait(tl, O);
	kb_tl_wait(tl, A);
	kb_tl_composite(tl, &d);
}

/* With TILES staging slots the scheduler feeds every tile at once: TILES
 * DMA reads reach PE_DMA together and its channel's ring (16 stages at
 * first) grows twice while they wait. They must still run one after
 * another in step order, none lost. */
START_TEST(test_stage_ring_grows)
{
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	kb_topology *t = NULL;
	int64_t sb[2] = { 8, 8 * TILES };
	uint64_t b, cmd = 0, prev_end = 0;
	recs rs = { NULL, 0, 0 };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int64_t next = 0;
	int rc;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pe.gemm.tile_m", "8", &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pe.gemm.tile_n", "8", &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pe.gemm.tile_k", "8", &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pe.sched.max_inflight_tiles", "48", &err), KB_OK);
	o.threads = 1;
	o.on_record = on_rec;
	o.payload = &rs;
	o.pes = 1;
	ck_assert_int_eq(kb_simulation_create(&sim, t, &o, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, sb, 1, &b, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, wide_kernel, &b, 0, 1, &err), KB_OK);
	rc = kb_simulation_run(sim, &res, &err);
	ck_assert_msg(rc == KB_OK, "run: %s", err.message);
	kb_result_clear(&res);
	kb_simulation_destroy(sim);
	kb_topology_destroy(t);
	for (size_t i = 0; i < rs.n; i++)
		if (strcmp(rs.v[i].op, "dispatch") == 0 && strcmp(rs.v[i].kind, "composite") == 0)
			cmd = rs.v[i].cmd;
	ck_assert_uint_gt(cmd, 0);
	/* records come in time order: the reads in the order they ran */
	for (size_t i = 0; i < rs.n; i++) {
		const rec *r = &rs.v[i];

		if (r->cmd != cmd || strcmp(r->op, "dma_read") != 0)
			continue;
		ck_assert_int_eq(r->step, next);
		ck_assert_uint_ge(r->t0, prev_end);
		prev_end = r->t1;
		next++;
	}
	ck_assert_int_eq(next, TILES);
	free(rs.v);
}
END_TEST

/* ---- decode opt2 through the bench ---- */

/* Runs a bench in timing mode, its records into rs; policy NULL: default. */
static void run_bench_policy(const char *bench, const char *const *params, const char *policy,
			     int threads, recs *rs, kb_result *out)
{
	kb_params *p = NULL;
	kb_topology *t = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	ck_assert_int_eq(kb_params_create(&p, &err), KB_OK);
	for (size_t i = 0; params[i]; i++)
		ck_assert_int_eq(kb_params_set_assignment(p, params[i], &err), KB_OK);
	if (policy) {
		ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
		ck_assert_int_eq(kb_topology_set(t, "pe.scheduler.policy", policy, &err), KB_OK);
	}
	o.threads = threads;
	o.on_record = on_rec;
	o.payload = rs;
	res = (kb_result)KB_RESULT_INIT;
	rc = kb_bench_run(bench, p, t, &o, &res, &err);
	ck_assert_msg(rc == KB_OK, "%s: %s", bench, err.message);
	ck_assert_uint_eq(res.records, rs->n);
	if (out)
		*out = res;
	else
		kb_result_clear(&res);
	kb_params_destroy(p);
	kb_topology_destroy(t);
}

static void run_bench_recs(const char *bench, const char *const *params, recs *rs)
{
	run_bench_policy(bench, params, NULL, 1, rs, NULL);
}

static int is_recipe_op(const char *op)
{
	static const char *const names[] = { "rmax", "max_elem", "exp_diff", "rsum", "fma",
					     "mul_bcast", "copy" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(op, names[i]) == 0)
			return 1;
	return 0;
}

START_TEST(test_k_before_v)
{
	const char *const params[] = { "S_kv=512", NULL };
	recs rs = { NULL, 0, 0 };
	int composites2 = 0;

	run_bench_recs("gqa_decode_opt2", params, &rs);
	for (size_t i = 0; i < rs.n; i++) {
		const rec *d = &rs.v[i];
		uint64_t pro_end = 0, first_dma = UINT64_MAX, gemm_start = UINT64_MAX;
		int n_math = 0, n_dma = 0;

		/* a #2 composite: its records include the recipe's MATH ops */
		if (strcmp(d->op, "dispatch") != 0 || strcmp(d->kind, "composite") != 0)
			continue;
		for (size_t k = 0; k < rs.n; k++) {
			const rec *r = &rs.v[k];

			if (r->pe != d->pe || r->cmd != d->cmd)
				continue;
			if (strcmp(r->eng, "math") == 0 && is_recipe_op(r->op)) {
				n_math++;
				if (r->t1 > pro_end)
					pro_end = r->t1;
			}
			if (strcmp(r->op, "dma_read") == 0) {
				n_dma++;
				if (r->t0 < first_dma)
					first_dma = r->t0;
			}
			if (strcmp(r->op, "gemm") == 0 && r->t0 < gemm_start)
				gemm_start = r->t0;
		}
		if (!n_math)
			continue;
		composites2++;
		ck_assert_int_eq(n_math, 8);
		ck_assert_int_eq(n_dma, 1);            /* the V tile, once */
		ck_assert_int_eq(d->lbytes, 306);
		ck_assert_msg(first_dma >= pro_end,
			      "cmd %llu: V dma_read at %llu before its prologue ends at %llu",
			      (unsigned long long)d->cmd, (unsigned long long)first_dma,
			      (unsigned long long)pro_end);
		ck_assert_uint_lt(first_dma, gemm_start);
	}
	ck_assert_int_eq(composites2, 8);   /* 512 / 64 KV tiles, one #2 each */
	free(rs.v);
}
END_TEST

/* Issue 15 hole 5: the default plan reads a K tile that fits in its
 * staging area in one DMA. opt2's Q.K^T is (G=8, d=128) x (TILE=64, d)^T:
 * K = d = 128 is two k-steps of tile_k = 64, but the (64, 128) K tile fits
 * the tile_k x tile_n staging area, so each K tile (and each V tile) is
 * one dma_read of TILE * d * 2 bytes; with the Q load, 2 * tiles + 1. */
START_TEST(test_k_tile_one_dma)
{
	const char *const params[] = { "S_kv=512", NULL };
	recs rs = { NULL, 0, 0 };
	int reads = 0, k_steps = 0;

	run_bench_recs("gqa_decode_opt2", params, &rs);
	for (size_t i = 0; i < rs.n; i++) {
		reads += strcmp(rs.v[i].op, "dma_read") == 0;
		k_steps += strcmp(rs.v[i].op, "gemm") == 0;
	}
	ck_assert_int_eq(reads, 2 * 8 + 1);
	ck_assert_int_eq(k_steps, 2 * 8);   /* one Q.K^T and one P.V step per tile */
	free(rs.v);
}
END_TEST

static int count_op(const recs *rs, const char *op)
{
	int n = 0;

	for (size_t i = 0; i < rs->n; i++)
		n += strcmp(rs->v[i].op, op) == 0;
	return n;
}

/*
 * pe.scheduler.policy (ADR-0065 A4). Under strict_fifo, opt2's next-tile
 * #1 (Q.K^T, touching none of m, l, O) waits behind this tile's #2, which
 * waits for the previous #2: nearly every command logs a hazard_wait.
 * rw_aware admits #1 ahead: fewer waits, an earlier end; the same run under
 * every thread count gives the same op_log (deterministic).
 */
START_TEST(test_rw_aware)
{
	const char *const params[] = { "S_kv=1024", NULL };
	recs ff = { NULL, 0, 0 }, rw = { NULL, 0, 0 }, rw0 = { NULL, 0, 0 };
	kb_result a = KB_RESULT_INIT, b = KB_RESULT_INIT, c = KB_RESULT_INIT;
	kb_topology *t;
	kb_error err;
	int wf, ww;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_ne(kb_topology_set(t, "pe.scheduler.policy", "fifo", &err), KB_OK);
	ck_assert_msg(strstr(err.message, "strict_fifo, rw_aware") != NULL, "'%s'", err.message);
	kb_topology_destroy(t);

	run_bench_policy("gqa_decode_opt2", params, "strict_fifo", 1, &ff, &a);
	run_bench_policy("gqa_decode_opt2", params, "rw_aware", 1, &rw, &b);
	run_bench_policy("gqa_decode_opt2", params, "rw_aware", 0, &rw0, &c);
	wf = count_op(&ff, "hazard_wait");
	ww = count_op(&rw, "hazard_wait");
	printf("opt2 S_kv=1024: strict_fifo %d hazard_waits, %.3f us; rw_aware %d, %.3f us\n", wf,
	       (double)a.sim_time_ps / 1e6, ww, (double)b.sim_time_ps / 1e6);
	ck_assert_int_lt(ww, wf);
	ck_assert_uint_lt(b.sim_time_ps, a.sim_time_ps);
	ck_assert_str_eq(b.oplog_sha256, c.oplog_sha256);
	ck_assert_uint_eq(count_op(&ff, "dma_read"), count_op(&rw, "dma_read"));
	ck_assert_uint_eq(count_op(&ff, "dispatch"), count_op(&rw, "dispatch"));
	kb_result_clear(&a);
	kb_result_clear(&b);
	kb_result_clear(&c);
	free(ff.v);
	free(rw.v);
	free(rw0.v);
}
END_TEST

START_TEST(test_dispatch_records)
{
	const char *const params[] = { "S_kv=256", NULL };
	const char *const benches[] = { "gqa_decode_opt2", "gqa_decode_opt3" };
	kb_cost_model cm = { 40.0, 0.0625, 1024, 1.0 };

	for (size_t b = 0; b < 2; b++) {
		recs rs = { NULL, 0, 0 };
		size_t n = 0;

		run_bench_recs(benches[b], params, &rs);
		for (size_t i = 0; i < rs.n; i++) {
			const rec *r = &rs.v[i];
			kb_cmd c;

			if (strcmp(r->op, "dispatch") != 0) {
				ck_assert_int_eq(r->lbytes, -1);
				continue;
			}
			n++;
			ck_assert_str_eq(r->eng, "cpu");
			ck_assert(r->kind[0] != '\0');
			ck_assert_int_gt(r->lbytes, 0);
			memset(&c, 0, sizeof(c));
			c.kind = KB_CMD_COMPOSITE;
			c.lbytes = (uint64_t)r->lbytes;
			ck_assert_uint_eq(r->t1 - r->t0, kb__dispatch_ps(&cm, &c));
			/* 40 + 0.0625 * lbytes cycles, in ps at 1 GHz */
			ck_assert_uint_eq((r->t1 - r->t0) * 16, 640000 + 1000 * (uint64_t)r->lbytes);
		}
		ck_assert_uint_gt(n, 4);
		free(rs.v);
	}
}
END_TEST

/* ---- deadlock ---- */

static void recv_kernel(kb_tl *tl, void *p)
{
	int64_t s[2] = { 8, 8 };

	(void)p;
	if (kb_tl_pe(tl) == 1)
		kb_tl_recv(tl, kb_tl_alloc(tl, KB_FP32, 2, s), 0, 7);
}

START_TEST(test_deadlock_message)
{
	kb_topology *t = NULL;
	kb_simulation *sim = NULL;
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pes_per_cluster", "2", &err), KB_OK);
	o.threads = 1;
	res = (kb_result)KB_RESULT_INIT;
	ck_assert_int_eq(kb_simulation_create(&sim, t, &o, &err), KB_OK);
	ck_assert_uint_eq(kb_simulation_pes(sim), 2);
	ck_assert_int_eq(kb_simulation_launch(sim, recv_kernel, NULL, 0, 2, &err), KB_OK);
	rc = kb_simulation_run(sim, &res, &err);
	ck_assert_int_eq(rc, KB_EDEADLOCK);
	ck_assert_int_eq(err.code, KB_EDEADLOCK);
	ck_assert_msg(strstr(err.message, "pe1") && strstr(err.message, "pe0"),
		      "deadlock message names neither side: %s", err.message);
	ck_assert_msg(strstr(err.message, "deadlock") != NULL, "%s", err.message);
	kb_result_clear(&res);
	kb_simulation_destroy(sim);
	kb_topology_destroy(t);
}
END_TEST

/* kb__cycles_ceil gives ceil((double)a / b) bit for bit: its shift for a
 * power-of-two rate, and the division for every other rate and count. */
START_TEST(test_ceil_div_exact)
{
	static const double rates[] = {
		1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 1048576.0, 4294967296.0,
		9223372036854775808.0, 0.5, 0.25, 0.001, 3.0, 48.0, 100.0, 64.5, 1e-300,
		-64.0, 0.0,
	};
	const int64_t big = INT64_C(1) << 53;
	int64_t counts[64];
	int n = 0;
	uint64_t x = 0x9e3779b97f4a7c15u;

	for (int64_t a = 0; a < 20; a++)
		counts[n++] = a;
	counts[n++] = 63;
	counts[n++] = 65;
	counts[n++] = 4095;
	counts[n++] = big - 1;
	counts[n++] = big;
	counts[n++] = big + 1;
	counts[n++] = INT64_MAX;
	counts[n++] = -1;
	for (; n < 64; n++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		counts[n] = (int64_t)(x >> (11 + n % 40));
	}
	for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++)
		for (int i = 0; i < n; i++) {
			double want = ceil((double)counts[i] / rates[r]), got = kb__cycles_ceil(counts[i], rates[r]);

			ck_assert_msg(memcmp(&want, &got, sizeof(got)) == 0 || (want != want && got != got),
				      "ceil(%lld / %g): %.17g, want %.17g", (long long)counts[i], rates[r], got, want);
		}
}
END_TEST

/* The scheduler's hazard test with signatures (pe/hazard.h) agrees with a
 * plain pairwise one on random command mixes: ids from a small pool (many
 * true conflicts, read-write ones alone included) and from all 64 bits
 * (signature bits shared without a conflict), one by one and against a
 * group whose members come and go at random, as PE_SCHEDULER asks it of
 * the in-flight commands. */
typedef struct hz_cmd {
	kb_cmd c;
	uint64_t ids[8];
} hz_cmd;

static uint64_t hz_rand(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

static void hz_make(hz_cmd *h, uint64_t *x)
{
	int wide = hz_rand(x) % 4 == 0;

	memset(h, 0, sizeof(*h));
	h->c.reads = h->ids;
	h->c.n_reads = (uint32_t)(hz_rand(x) % 5);
	h->c.writes = h->ids + 4;
	h->c.n_writes = (uint32_t)(hz_rand(x) % 3);
	for (int i = 0; i < 8; i++)
		h->ids[i] = wide ? hz_rand(x) : 1 + hz_rand(x) % 24;
}

/* c conflicts with f: some id c writes that f reads or writes, or c reads that f writes. */
static int hz_plain(const kb_cmd *c, const kb_cmd *f)
{
	for (uint32_t i = 0; i < c->n_reads + c->n_writes; i++) {
		int cw = i >= c->n_reads;
		uint64_t id = cw ? c->writes[i - c->n_reads] : c->reads[i];

		for (uint32_t j = 0; j < f->n_reads + f->n_writes; j++) {
			int fw = j >= f->n_reads;

			if ((cw || fw) && id == (fw ? f->writes[j - f->n_reads] : f->reads[j]))
				return 1;
		}
	}
	return 0;
}

START_TEST(test_hazard_signatures)
{
	enum { GROUP = 12 };
	static hz_cmd grp[GROUP], cand;
	int in[GROUP] = { 0 };
	uint64_t x = 0x2545f4914f6cdd1du;
	long conflicts = 0, sig_only = 0, blocked = 0;

	for (int i = 0; i < GROUP; i++)
		hz_make(&grp[i], &x);
	for (int round = 0; round < 20000; round++) {
		int k = (int)(hz_rand(&x) % GROUP), any = 0, fast_any = 0;
		kb_hazard_sig sc;

		/* The group (in flight) changes by one member a round. */
		if (in[k])
			hz_make(&grp[k], &x);
		in[k] = !in[k];
		hz_make(&cand, &x);
		sc = kb__hazard_sign(&cand.c);
		for (int i = 0; i < GROUP; i++) {
			kb_hazard_sig si = kb__hazard_sign(&grp[i].c);
			int plain = hz_plain(&cand.c, &grp[i].c);
			int fast = kb__hazard_may_conflict(sc, si) && kb__hazard_conflicts(&cand.c, &grp[i].c);

			/* Plain ifs, not ck_assert: each of Check's asserts writes a
			 * mark to the runner's pipe, and 480,000 of them under ASan
			 * on a loaded machine ran past the default timeout. */
			if (kb__hazard_conflicts(&cand.c, &grp[i].c) != plain)
				ck_abort_msg("round %d, member %d: conflicts %d, plain %d", round, i,
					     kb__hazard_conflicts(&cand.c, &grp[i].c), plain);
			if (fast != plain)
				ck_abort_msg("round %d, member %d: signature test %d, plain %d", round, i, fast,
					     plain);
			conflicts += plain;
			sig_only += !plain && kb__hazard_may_conflict(sc, si);
			any |= in[i] && plain;
			fast_any |= in[i] && fast;
		}
		if (fast_any != any)
			ck_abort_msg("round %d: blocked by the signature test %d, plainly %d", round, fast_any, any);
		blocked += any;
	}
	/* The mix exercised both outcomes and the signature's false alarms. */
	ck_assert_int_gt(conflicts, 1000);
	ck_assert_int_gt(sig_only, 100);
	ck_assert_int_gt(blocked, 1000);
	ck_assert_int_gt(20000 - blocked, 1000);
}
END_TEST

/* Command blocks freed on a thread that does not build commands, for
 * test_cmd_cache_in_flight: what that thread's cache keeps of a class. */
typedef struct cache_job {
	kb_cmd **c;
	int n, k;
	uint32_t kept;
} cache_job;

static void *free_elsewhere(void *arg)
{
	cache_job *j = arg;

	for (int i = 0; i < j->n; i++)
		kb__cmd_free(j->c[i]);
	j->kept = kb__cmd_cache.n[j->k];
	return NULL;   /* the thread's end gives its cache back to malloc */
}

/* A thread with more commands of a class in flight than the cache's first
 * 64 keeps all of them once freed (a multi-PE run's kernels on one thread
 * allocated the overflow again, aligned, for each command); a thread that
 * only frees keeps 64 (its cache stays bounded). */
START_TEST(test_cmd_cache_in_flight)
{
	enum { MORE = 300 };
	int k = kb__cmd_size_class(kb__cmd_block_size(1, 1));
	kb_cmd *first = kb__cmd_alloc(1, 1);   /* the cache started */
	cache_job j;
	pthread_t th;
	int n;

	ck_assert_int_ge(k, 0);
	ck_assert_ptr_nonnull(first);
	/* this thread's cache emptied, then MORE blocks from malloc */
	n = (int)kb__cmd_cache.n[k] + MORE;
	j.c = malloc((size_t)n * sizeof(*j.c));
	ck_assert_ptr_nonnull(j.c);
	for (int i = 0; i < n; i++)
		ck_assert_ptr_nonnull(j.c[i] = kb__cmd_alloc(1, 1));
	ck_assert_uint_eq(kb__cmd_cache.n[k], 0);
	for (int i = 0; i < n; i++)
		kb__cmd_free(j.c[i]);
	ck_assert_uint_eq(kb__cmd_cache.n[k], (uint32_t)n);
	/* the same blocks again, none from malloc */
	for (int i = 0; i < n; i++)
		ck_assert_ptr_nonnull(j.c[i] = kb__cmd_alloc(1, 1));
	ck_assert_uint_eq(kb__cmd_cache.n[k], 0);
	j.n = n;
	j.k = k;
	ck_assert_int_eq(pthread_create(&th, NULL, free_elsewhere, &j), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(j.kept, KB_CMD_CACHE_KEEP);
	kb__cmd_free(first);
	free(j.c);
}
END_TEST

Suite *pe_suite(void)
{
	Suite *s = suite_create("pe");
	TCase *plan = tcase_create("plan");
	TCase *run = tcase_create("run");

	tcase_add_test(plan, test_plan_softmax_merge);
	tcase_add_test(plan, test_plan_gemm_multi_k);
	tcase_add_test(plan, test_plan_memo_matches);
	tcase_add_test(plan, test_plan_memo_one_machine);
	tcase_add_test(plan, test_plan_math_only);
	tcase_add_test(plan, test_plan_simple_commands);
	tcase_add_test(plan, test_plan_prologue_math_head);
	tcase_add_test(plan, test_math_cost_every_scope);
	tcase_add_test(plan, test_plan_limit_matches_emit);
	tcase_add_test(plan, test_ceil_div_exact);
	tcase_add_test(plan, test_hazard_signatures);
	tcase_add_test(plan, test_cmd_cache_in_flight);
	tcase_add_test(run, test_fifo_shared_rw);
	tcase_add_test(run, test_disjoint_overlap);
	tcase_add_test(run, test_k_before_v);
	tcase_add_test(run, test_k_tile_one_dma);
	tcase_add_test(run, test_rw_aware);
	tcase_add_test(run, test_dispatch_records);
	tcase_add_test(run, test_stage_ring_grows);
	tcase_add_test(run, test_deadlock_message);
	tcase_set_timeout(run, 60);
	suite_add_tcase(s, plan);
	suite_add_tcase(s, run);
	return s;
}
