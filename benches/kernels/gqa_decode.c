/*
 * GQA decode attention, o = softmax(q k^T / sqrt(d)) v per KV head, with
 * q (H_kv, G, d), k and v (H_kv, S_kv, d) in their natural layouts, o
 * (H_kv, G, d). Q.K^T reads K transposed (KB_TL_TRANS_B), so the result is
 * exact for any input, not only near-uniform attention.
 *
 * Each KV head's sequence is split into P contiguous ranges of KV tiles
 * (flash-decoding), one PE each; every PE runs the online softmax over its
 * range, and the partial (m, l, O) states are gathered through PE_IPCQ to
 * the head's first PE, which merges them and writes o. A gather, not a
 * tree: P is small (a few PEs per head), one IPCQ hop per partial keeps the
 * merge off the critical path of the other PEs, and the merge of P - 1
 * partials on one PE is a handful of MATH commands.
 *
 * opt3 (ADR-0060 baseline): software pipelining; per KV tile the next
 * tile's K and V loads are issued before this tile's compute; Q.K^T is a
 * GEMM composite with a scale epilogue; the online-softmax update is eight
 * separate MATH commands (the steps softmax_merge fuses); P.V is a GEMM
 * composite accumulating into O.
 * opt2 (ADR-0065): two composites per tile: #1 Q.K^T (+ scale) and #2 the
 * softmax_merge prologue + P.V GEMM + add epilogue into O.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/fp16.h"
#include "bench/bench_util.h"
#include "bench/reference.h"

typedef struct decode_args {
	int64_t G, d, S, T;       /* query heads per KV head, head dim, KV length, tile */
	uint32_t H, P;
	kb_dtype dt;
	uint64_t q, k, v, o;
	int opt2;
} decode_args;

/* Tile range [t0, t1) of part p; the last tile may be ragged. */
static void part_range(const decode_args *a, uint32_t p, int64_t *t0, int64_t *t1)
{
	int64_t tiles = (a->S + a->T - 1) / a->T;

	*t0 = tiles * p / a->P;
	*t1 = tiles * (p + 1) / a->P;
}

static int64_t tile_rows(const decode_args *a, int64_t j)
{
	int64_t rest = a->S - j * a->T;

	return rest < a->T ? rest : a->T;
}

/* KV head h's tiles of K and V: where tile j lies and its shape, worked
 * out once per kernel (each tile's two refs were ~20 instructions each
 * of multiplies and the ragged test, issue 13). */
typedef struct kv_head {
	uint64_t k, v;             /* tile 0 of K, of V */
	uint64_t tile_bytes;       /* from one tile to the next */
	int64_t tiles;
	int64_t full[2], last[2];  /* a tile's shape; the last one's, ragged or not */
	kb_dtype dt;
} kv_head;

static void kv_head_init(kv_head *kv, const decode_args *a, uint32_t h)
{
	uint64_t es = kb_dtype_size(a->dt), head = (uint64_t)h * (uint64_t)a->S * (uint64_t)a->d * es;

	kv->k = a->k + head;
	kv->v = a->v + head;
	kv->tile_bytes = (uint64_t)a->T * (uint64_t)a->d * es;
	kv->tiles = (a->S + a->T - 1) / a->T;
	kv->full[0] = a->T;
	kv->last[0] = tile_rows(a, kv->tiles - 1);
	kv->full[1] = kv->last[1] = a->d;
	kv->dt = a->dt;
}

/* Tile j of K or V (base: kv->k or kv->v). */
static kb_tl_tensor *kv_ref(kb_tl *tl, const kv_head *kv, uint64_t base, int64_t j)
{
	return kb_tl_ref(tl, base + (uint64_t)j * kv->tile_bytes, kv->dt, 2,
			 j + 1 < kv->tiles ? kv->full : kv->last);
}

/* A GEMM-less composite: out = op(x, y) with optional epilogue, described
 * in d (zeroed once by its caller: only these fields change). */
static kb_tl_tensor *math(kb_tl *tl, kb_tl_composite_desc *d, const char *op, kb_tl_tensor *x,
			  kb_tl_tensor *y, kb_tl_tensor *out, const kb_tl_op *epi)
{
	d->op = op;
	d->a = x;
	d->b = y;
	d->out = out;
	d->epilogue = epi;
	d->n_epilogue = epi ? 1 : 0;
	return kb_tl_composite(tl, d);
}

/*
 * The running state, and the descriptors of a tile's composites, built
 * once per kernel: a tile's calls change only their handles. Zeroing a
 * descriptor (~150 bytes) or an op (~180) per call, as a designated
 * initializer does, made GCC emit a `rep stos` each, a dozen a tile,
 * whose start-up was ~2% of an opt3 run (issue 13).
 */
/* opt3's eight online-softmax steps, a descriptor each (state.step) */
enum { RMAX, MAX_NEW, CORR, P_EXP, RSUM, L_UPD, O_UPD, M_COPY, N_STEPS };

typedef struct state {
	kb_tl_tensor *q, *m, *l, *o;
	kb_tl_op scale;                 /* Q.K^T's epilogue */
	kb_tl_composite_desc qk;        /* S = (Q K^T) * scale */
	kb_tl_composite_desc step[N_STEPS];   /* opt3: only a and b change */
	kb_tl_op add_lloc, add_o;       /* opt3: l += l_loc, O += P V */
	kb_tl_composite_desc pv;        /* opt3: P.V; opt2: softmax_merge + P.V */
	kb_tl_recipe_call merge;        /* opt2 */
} state;

/* A step's descriptor: op on a and b (set per call) into out (NULL: a
 * new tensor), then epi if given. */
static void step_desc(kb_tl_composite_desc *d, const char *op, kb_tl_tensor *out,
		      const kb_tl_op *epi)
{
	*d = (kb_tl_composite_desc){ .op = op, .out = out, .epilogue = epi, .n_epilogue = epi ? 1 : 0 };
}

static void state_descs(state *s, const decode_args *a)
{
	s->scale = (kb_tl_op){ .op = "scale", .extras = { { "scale", 1.0 / sqrt((double)a->d) } } };
	s->qk = (kb_tl_composite_desc){ .op = "gemm", .a = s->q, .flags = KB_TL_TRANS_B,
					.epilogue = &s->scale, .n_epilogue = 1 };
	s->add_lloc = (kb_tl_op){ .op = "add" };
	s->add_o = (kb_tl_op){ .op = "add", .args = { { "other", s->o } } };
	s->merge = (kb_tl_recipe_call){ "softmax_merge",
					{ { "s", NULL }, { "m", s->m }, { "l", s->l }, { "O", s->o } } };
	if (a->opt2)
		s->pv = (kb_tl_composite_desc){ .op = "gemm", .out = s->o, .prologue = &s->merge,
						.n_prologue = 1, .epilogue = &s->add_o, .n_epilogue = 1 };
	else
		s->pv = (kb_tl_composite_desc){ .op = "gemm", .out = s->o, .epilogue = &s->add_o,
						.n_epilogue = 1 };
	step_desc(&s->step[RMAX], "rmax", NULL, NULL);
	step_desc(&s->step[MAX_NEW], "max_elem", NULL, NULL);
	step_desc(&s->step[CORR], "exp_diff", NULL, NULL);
	step_desc(&s->step[P_EXP], "exp_diff", NULL, NULL);
	step_desc(&s->step[RSUM], "rsum", NULL, NULL);
	step_desc(&s->step[L_UPD], "mul_bcast", s->l, &s->add_lloc);
	step_desc(&s->step[O_UPD], "mul_bcast", s->o, NULL);
	step_desc(&s->step[M_COPY], "copy", s->m, NULL);
}

/* opt3's step i on x and y */
static kb_tl_tensor *step(kb_tl *tl, state *s, int i, kb_tl_tensor *x, kb_tl_tensor *y)
{
	s->step[i].a = x;
	s->step[i].b = y;
	return kb_tl_composite(tl, &s->step[i]);
}

/* S = (Q K^T) * scale */
static kb_tl_tensor *scores(kb_tl *tl, state *s, kb_tl_tensor *k)
{
	s->qk.b = k;
	return kb_tl_composite(tl, &s->qk);
}

static void opt2_tile(kb_tl *tl, const kv_head *kv, int64_t j, state *s)
{
	kb_tl_scope_begin(tl);
	s->merge.args[0].t = scores(tl, s, kv_ref(tl, kv, kv->k, j));
	s->pv.b = kv_ref(tl, kv, kv->v, j);
	kb_tl_composite(tl, &s->pv);
	kb_tl_scope_end(tl);
}

/* The eight online-softmax steps as separate MATH commands, then P.V. */
static void opt3_compute(kb_tl *tl, kb_tl_tensor *k, kb_tl_tensor *v, state *s)
{
	kb_tl_tensor *S, *m_loc, *m_new, *corr, *P, *l_loc;

	kb_tl_scope_begin(tl);
	S = scores(tl, s, k);
	m_loc = step(tl, s, RMAX, S, NULL);
	m_new = step(tl, s, MAX_NEW, s->m, m_loc);
	corr = step(tl, s, CORR, s->m, m_new);
	P = step(tl, s, P_EXP, S, m_new);
	l_loc = step(tl, s, RSUM, P, NULL);
	s->add_lloc.args[0] = (kb_tl_arg){ "other", l_loc };
	step(tl, s, L_UPD, s->l, corr);   /* l = l * corr + l_loc */
	step(tl, s, O_UPD, s->o, corr);   /* O = O * corr */
	step(tl, s, M_COPY, m_new, NULL); /* m = m_new */
	s->pv.a = P;
	s->pv.b = v;
	kb_tl_composite(tl, &s->pv);                               /* O = O + P V */
	kb_tl_scope_end(tl);
}

/* Loads tile j of K or V (base) into buf, or into a TCM tensor of its own
 * when the tile is the ragged last one, and releases the tile's HBM view
 * at once: the load holds what it needs of it, and in the range's scope
 * the views of every tile would stay until the kernel ends (two handles a
 * tile: 3 MB more at S_kv = 1,048,576 than at 262,144, issue 13). */
static kb_tl_tensor *load_tile(kb_tl *tl, const kv_head *kv, uint64_t base, int64_t j,
			       kb_tl_tensor *buf)
{
	kb_tl_tensor *ref = kv_ref(tl, kv, base, j);
	kb_tl_tensor *t = kb_tl_load(tl, ref, j + 1 < kv->tiles || kv->last[0] == kv->full[0] ? buf : NULL);

	kb_tl_release(tl, ref);
	return t;
}

static void opt3_range(kb_tl *tl, const decode_args *a, const kv_head *kv, int64_t t0, int64_t t1,
		       state *s)
{
	int64_t full[2] = { a->T, a->d };
	kb_tl_tensor *kb[2], *vb[2], *kn = NULL, *vn = NULL;

	kb[0] = kb_tl_alloc(tl, a->dt, 2, full);
	kb[1] = kb_tl_alloc(tl, a->dt, 2, full);
	vb[0] = kb_tl_alloc(tl, a->dt, 2, full);
	vb[1] = kb_tl_alloc(tl, a->dt, 2, full);
	for (int64_t j = t0; j < t1 && !kb_tl_failed(tl); j++) {
		if (j == t0) {
			kn = load_tile(tl, kv, kv->k, j, kb[j & 1]);
			vn = load_tile(tl, kv, kv->v, j, vb[j & 1]);
		}
		{
			kb_tl_tensor *kc = kn, *vc = vn;

			if (j + 1 < t1) {
				kn = load_tile(tl, kv, kv->k, j + 1, kb[(j + 1) & 1]);
				vn = load_tile(tl, kv, kv->v, j + 1, vb[(j + 1) & 1]);
			}
			opt3_compute(tl, kc, vc, s);
		}
	}
}

/* Merges a partner's partial (m2, l2, O2) into s. */
static void merge_partial(kb_tl *tl, state *s, kb_tl_tensor *m2, kb_tl_tensor *l2, kb_tl_tensor *o2)
{
	kb_tl_composite_desc d = { 0 };
	kb_tl_tensor *m_new, *c1, *c2, *t;
	kb_tl_op add;

	kb_tl_scope_begin(tl);
	m_new = math(tl, &d, "max_elem", s->m, m2, NULL, NULL);
	c1 = math(tl, &d, "exp_diff", s->m, m_new, NULL, NULL);
	c2 = math(tl, &d, "exp_diff", m2, m_new, NULL, NULL);
	t = math(tl, &d, "mul_bcast", l2, c2, NULL, NULL);
	add = (kb_tl_op){ .op = "add", .args = { { "other", t } } };
	math(tl, &d, "mul_bcast", s->l, c1, s->l, &add);            /* l = l c1 + l2 c2 */
	t = math(tl, &d, "mul_bcast", o2, c2, NULL, NULL);
	add = (kb_tl_op){ .op = "add", .args = { { "other", t } } };
	math(tl, &d, "mul_bcast", s->o, c1, s->o, &add);            /* O = O c1 + O2 c2 */
	math(tl, &d, "copy", m_new, NULL, s->m, NULL);
	kb_tl_scope_end(tl);
}

static void decode_kernel(kb_tl *tl, void *p)
{
	const decode_args *a = p;
	uint32_t id = kb_tl_program_id(tl), h = id / a->P, part = id % a->P;
	uint32_t root = kb_tl_pe(tl) - part;
	int64_t sq[2] = { a->G, a->d }, sv[2] = { a->G, 1 }, t0, t1;
	uint64_t qoff = (uint64_t)h * (uint64_t)(a->G * a->d) * kb_dtype_size(a->dt);
	state s;
	kv_head kv;

	kv_head_init(&kv, a, h);
	s.q = kb_tl_load(tl, kb_tl_ref(tl, a->q + qoff, a->dt, 2, sq), NULL);
	s.m = kb_tl_full(tl, KB_FP32, 2, sv, -INFINITY);
	s.l = kb_tl_full(tl, KB_FP32, 2, sv, 0.0);
	s.o = kb_tl_full(tl, KB_FP32, 2, sq, 0.0);
	state_descs(&s, a);
	part_range(a, part, &t0, &t1);
	/* The seeds' per-tile metric counts the KV-tile loop's commands only. */
	kb_tl_tile_loop_begin(tl);
	if (a->opt2)
		for (int64_t j = t0; j < t1 && !kb_tl_failed(tl); j++)
			opt2_tile(tl, &kv, j, &s);
	else
		opt3_range(tl, a, &kv, t0, t1, &s);
	kb_tl_tile_loop_end(tl, (uint64_t)(t1 - t0));
	if (part != 0) {
		kb_tl_send(tl, s.m, root, 0);
		kb_tl_send(tl, s.l, root, 1);
		kb_tl_send(tl, s.o, root, 2);
		return;
	}
	for (uint32_t q = 1; q < a->P; q++) {
		kb_tl_tensor *m2, *l2, *o2;

		kb_tl_scope_begin(tl);
		m2 = kb_tl_alloc(tl, KB_FP32, 2, sv);
		l2 = kb_tl_alloc(tl, KB_FP32, 2, sv);
		o2 = kb_tl_alloc(tl, KB_FP32, 2, sq);
		kb_tl_recv(tl, m2, root + q, 0);
		kb_tl_recv(tl, l2, root + q, 1);
		kb_tl_recv(tl, o2, root + q, 2);
		merge_partial(tl, &s, m2, l2, o2);
		kb_tl_scope_end(tl);
	}
	{
		kb_tl_composite_desc fin = { .op = "div", .a = s.o, .b = s.l,
					     .out = kb_tl_ref(tl, a->o + qoff, a->dt, 2, sq) };

		kb_tl_composite(tl, &fin);                      /* o = O / l */
	}
}

/* K and V rows of one head read back from the memory store, a chunk at a
 * time: the bench keeps no host copy of the inputs. */
typedef struct kv_reader {
	kb_simulation *sim;
	kb_dtype dt;
	uint64_t base[2];        /* k, v of the head */
	int64_t d;
	void *raw;
	float *f;
	double *rows[2];
	int64_t cap;             /* rows each buffer holds */
	kb_error *err;
	int rc;
} kv_reader;

static int fetch_f64(kb_simulation *sim, kb_dtype dt, uint64_t addr, size_t n, void *raw, float *f,
		     double *dst, kb_error *err)
{
	int rc = kb_simulation_download(sim, addr, raw, n * kb_dtype_size(dt), err);

	if (rc)
		return rc;
	kb__load_f32(f, raw, dt, n);
	for (size_t i = 0; i < n; i++)
		dst[i] = f[i];
	return KB_OK;
}

static const double *kv_rows(void *payload, int which, int64_t row0, int64_t rows)
{
	kv_reader *r = payload;
	size_t es = kb_dtype_size(r->dt), n = (size_t)(rows * r->d);

	if (rows > r->cap) {
		r->rc = kb__err(r->err, KB_EINTERNAL, "reference asked for %lld rows at once",
				(long long)rows);
		return NULL;
	}
	r->rc = fetch_f64(r->sim, r->dt, r->base[which] + (uint64_t)(row0 * r->d) * es, n, r->raw,
			  r->f, r->rows[which], r->err);
	return r->rc ? NULL : r->rows[which];
}

/* Data mode, after the run (kb_bench_simulate): O against the attention
 * computed in double from Q, K and V as stored. */
static int decode_check(kb_bench_ctx *ctx, kb_simulation *sim, void *args, kb_result *res,
			kb_error *err)
{
	enum { CAP = 256 };
	const decode_args *a = args;
	size_t n = (size_t)a->H * (size_t)(a->G * a->d), es = kb_dtype_size(a->dt);
	size_t chunk = (size_t)(CAP * a->d) > (size_t)(a->G * a->d) ? (size_t)(CAP * a->d)
								  : (size_t)(a->G * a->d);
	double *want = malloc(n * sizeof(*want)), *q = malloc((size_t)(a->G * a->d) * sizeof(*q));
	float *got = malloc(n * sizeof(*got));
	kv_reader r = { sim, a->dt, { 0, 0 }, a->d, malloc(chunk * es), malloc(chunk * sizeof(float)),
			{ malloc(chunk * sizeof(double)), malloc(chunk * sizeof(double)) }, CAP, err, 0 };
	int rc = want && q && got && r.raw && r.f && r.rows[0] && r.rows[1]
		? KB_OK : kb__err(err, KB_ENOMEM, "out of memory checking the result");

	(void)ctx;
	if (!rc)
		rc = kb__bench_output(sim, a->dt, a->o, n, got, err);
	for (uint32_t h = 0; !rc && h < a->H; h++) {
		size_t qo = (size_t)h * (size_t)(a->G * a->d), ko = (size_t)h * (size_t)(a->S * a->d);

		r.base[0] = a->k + ko * es;
		r.base[1] = a->v + ko * es;
		rc = fetch_f64(sim, a->dt, a->q + qo * es, (size_t)(a->G * a->d), r.raw, r.f, q, err);
		if (!rc && kb__ref_attention_rows(q, kv_rows, &r, want + qo, a->G, a->S, a->d,
						  1.0 / sqrt((double)a->d)))
			rc = r.rc ? r.rc : kb__err(err, KB_ENOMEM, "out of memory checking the result");
	}
	if (!rc)
		kb__bench_errors(got, want, n, res);
	free(want);
	free(q);
	free(got);
	free(r.raw);
	free(r.f);
	free(r.rows[0]);
	free(r.rows[1]);
	return rc;
}

/* Makes the topology hold H_kv * P PEs over C clusters. */
static int fit_topology(kb_bench_ctx *ctx, uint32_t pes, uint32_t clusters, kb_error *err)
{
	kb_topology *topo = kb_bench_topology(ctx);
	double c = 0, per = 0;
	char buf[32];
	int rc;

	kb_topology_get_number(topo, "clusters", &c, err);
	kb_topology_get_number(topo, "pes_per_cluster", &per, err);
	if ((uint32_t)c != clusters) {
		snprintf(buf, sizeof(buf), "%u", clusters);
		rc = kb_topology_set(topo, "clusters", buf, err);
		if (rc)
			return rc;
	}
	if ((uint64_t)per * clusters < pes) {
		snprintf(buf, sizeof(buf), "%u", (pes + clusters - 1) / clusters);
		rc = kb_topology_set(topo, "pes_per_cluster", buf, err);
		if (rc)
			return rc;
	}
	return KB_OK;
}

/* Inputs drawn in the order q, k, v (the same values as ever for a seed),
 * the output, and what --dump writes (doc/benches.md). */
static int setup_tensors(kb_bench_ctx *ctx, kb_simulation *sim, decode_args *a, kb_error *err)
{
	int64_t sq[3] = { a->H, a->G, a->d }, skv[3] = { a->H, a->S, a->d };
	double std = kb_bench_param_real(ctx, "input_std");
	int rc;

	kb_bench_seed(ctx, (uint64_t)kb_bench_param_int(ctx, "seed"));
	rc = kb_bench_input(ctx, sim, a->dt, 3, sq, std, &a->q, NULL, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, a->dt, 3, skv, std, &a->k, NULL, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, a->dt, 3, skv, std, &a->v, NULL, err);
	if (!rc)
		rc = kb_simulation_alloc(sim, a->dt, 3, sq, 0, &a->o, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "q", a->dt, 3, sq, a->q, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "k", a->dt, 3, skv, a->k, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "v", a->dt, 3, skv, a->v, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "o", a->dt, 3, sq, a->o, err);
	return rc;
}

static int run_decode(kb_bench_ctx *ctx, kb_result *res, kb_error *err, int opt2)
{
	decode_args a = { kb_bench_param_int(ctx, "G"), kb_bench_param_int(ctx, "d"),
			  kb_bench_param_int(ctx, "S_kv"), kb_bench_param_int(ctx, "TILE"),
			  (uint32_t)kb_bench_param_int(ctx, "H_kv"),
			  (uint32_t)kb_bench_param_int(ctx, "P"), KB_FP16, 0, 0, 0, 0, opt2 };
	uint32_t clusters = (uint32_t)kb_bench_param_int(ctx, "C"), pes = a.H * a.P;
	int64_t tiles = (a.S + a.T - 1) / a.T;
	kb_simulation *sim = NULL;
	int rc;

	kb_dtype_parse(kb_bench_param_str(ctx, "dtype"), &a.dt);
	if (a.P > tiles)
		return kb__err_at(err, KB_ERANGE, "P", 0, 0,
				  "P = %u PEs per head exceeds the %lld KV tiles of S_kv = %lld", a.P,
				  (long long)tiles, (long long)a.S);
	if (clusters > pes)
		return kb__err_at(err, KB_ERANGE, "C", 0, 0,
				  "C = %u clusters for %u PEs: every cluster needs a PE", clusters, pes);
	rc = fit_topology(ctx, pes, clusters, err);
	if (!rc)
		rc = kb_bench_simulation(ctx, pes, &sim, err);
	/* The machine is grown from H_kv, P and C: a limit it passes is named
	 * by what the user set, not by the topology key it became. */
	if (rc == KB_ERANGE || rc == KB_ENOMEM)
		kb__err_prefix(err, "H_kv = %u x P = %u = %u PEs over C = %u cluster%s", a.H, a.P,
			       pes, clusters, clusters == 1 ? "" : "s");
	if (!rc)
		rc = setup_tensors(ctx, sim, &a, err);
	if (!rc)
		rc = kb_simulation_launch(sim, decode_kernel, &a, 0, pes, err);
	if (!rc)
		rc = kb_bench_simulate(ctx, sim, &a, res, err);
	kb_simulation_destroy(sim);
	return rc;
}

static int run_opt2(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	return run_decode(ctx, res, err, 1);
}

static int run_opt3(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	return run_decode(ctx, res, err, 0);
}

static const kb_param_info params[] = {
	{ "G", KB_PARAM_INT, "8", "query heads per KV head", NULL, 1, 4096 },
	{ "d", KB_PARAM_INT, "128", "head dimension", NULL, 1, 4096 },
	{ "S_kv", KB_PARAM_INT, "4096", "KV sequence length", NULL, 1, 1 << 26 },
	{ "TILE", KB_PARAM_INT, "64", "KV tile (rows per step)", NULL, 1, 65536 },
	{ "dtype", KB_PARAM_STRING, "fp16", "element type of q, k, v, o", "fp16|fp32|bf16", 0, 0 },
	{ "H_kv", KB_PARAM_INT, "1", "KV heads", NULL, 1, 1024 },
	{ "P", KB_PARAM_INT, "1", "PEs per KV head (split-KV)", NULL, 1, 1024 },
	{ "C", KB_PARAM_INT, "1", "clusters the PEs are placed over", NULL, 1, 1024 },
	{ "seed", KB_PARAM_INT, "1", "seed of the inputs (data mode)", NULL, 0, 9e18 },
	{ "input_std", KB_PARAM_REAL, "1", "standard deviation of the inputs", NULL, 0, 1e6 },
};

const kb_bench_def kb__bench_decode_opt2 = {
	KB_BENCH_ABI,
	{ "gqa_decode_opt2", "GQA decode, two composites per KV tile (softmax_merge recipe, ADR-0065)",
	  params, sizeof(params) / sizeof(params[0]) },
	run_opt2, decode_check, NULL,
};

const kb_bench_def kb__bench_decode_opt3 = {
	KB_BENCH_ABI,
	{ "gqa_decode_opt3", "GQA decode, software-pipelined baseline (12 commands per KV tile)",
	  params, sizeof(params) / sizeof(params[0]) },
	run_opt3, decode_check, NULL,
};
