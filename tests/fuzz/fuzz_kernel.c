/*
 * Fuzz target: the kernel-API validation path. The input is a little
 * program of tl operations (byte code below) over a table of handles that
 * also holds NULL, a forged handle and handles whose scope has ended. It
 * runs against a bare tl context (kb__tl_create, an emit callback that
 * frees every command and, when the header asks, reports the consumer gone
 * after a number of commands); it must never crash, leak or hang, and a
 * failure must leave an error with a message. When the first byte is even
 * and the program stays small, the same program then runs as a real kernel
 * through kb_simulation (1 PE, timing mode, threads 1): success or a clean
 * error, never KB_EINTERNAL.
 *
 * Byte code: header [flags] [cancel_after]; then ops, one byte each
 * (value % OP_COUNT) followed by its operand bytes; a missing byte reads 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/simulation.h"
#include "kernbench/tl.h"
#include "pe/cmd.h"
#include "num/math_op.h"
#include "tl/tl_impl.h"

#define MAX_OPS 96
#define MAX_HANDLES 32
#define SIM_ELEM_BUDGET (1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader {
	const uint8_t *p;
	size_t n, at;
} reader;

static unsigned byte(reader *r)
{
	return r->at < r->n ? r->p[r->at++] : 0;
}

static uint64_t u64(reader *r)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)byte(r) << (8 * i);
	return v;
}

typedef struct program {
	const uint8_t *p;
	size_t n;
	uint64_t elems;          /* elements of every tensor created (simulation budget) */
} program;

typedef struct machine {
	kb_tl_tensor *h[MAX_HANDLES];
	unsigned n;
	uint64_t hbm_bytes;
} machine;

enum {
	OP_REF, OP_ALLOC, OP_FULL, OP_LOAD, OP_STORE, OP_COMPOSITE, OP_DOT, OP_WAIT,
	OP_SCOPE_BEGIN, OP_SCOPE_END, OP_CPU, OP_SEND, OP_RECV, OP_SHAPE, OP_COUNT
};

static int64_t dim(reader *r)
{
	static const int64_t small[] = { 1, 2, 3, 4, 8, 16, 32, 64 };
	static const int64_t special[] = { 0, -1, INT64_MAX, INT64_C(1) << 40, 1 << 20, 5, 7, 128 };
	unsigned b = byte(r);

	return b & 0x80 ? special[b & 7] : small[b & 7];
}

static int shape(reader *r, int64_t *s)
{
	int rank = (int)(byte(r) % 6);  /* 0 and 5 are invalid */

	for (int i = 0; i < KB_TL_MAX_RANK; i++)
		s[i] = i < rank ? dim(r) : 1;
	return rank;
}

static kb_dtype dtype(reader *r)
{
	unsigned b = byte(r) % 8;

	return b < 3 ? (kb_dtype)b : b < 7 ? KB_FP32 : (kb_dtype)7;  /* 7: invalid */
}

/* A handle operand: one from the table, NULL, or a forged value. */
static kb_tl_tensor *pick(reader *r, machine *m)
{
	unsigned b = byte(r);

	if (b == 0xff)
		return NULL;
	if (b == 0xfe)
		return (kb_tl_tensor *)(uintptr_t)u64(r);
	if (m->n == 0)
		return NULL;
	return m->h[b % m->n];
}

static void keep(machine *m, kb_tl_tensor *t)
{
	if (!t)
		return;
	if (m->n < MAX_HANDLES)
		m->h[m->n++] = t;
	else
		m->h[m->n - 1] = t;
}

static uint64_t address(reader *r, const machine *m)
{
	switch (byte(r) % 4) {
	case 0: return 0;
	case 1: return (uint64_t)byte(r) * 4096;
	case 2: return m->hbm_bytes - (uint64_t)byte(r) * 64;
	default: return u64(r);
	}
}

static const char *op_name(reader *r)
{
	unsigned b = byte(r) % (KB_MATH_KIND_COUNT + 4);

	if (b < KB_MATH_KIND_COUNT)
		return kb__math_kind_name((kb_math_kind)b);
	return b == KB_MATH_KIND_COUNT ? "gemm" : b == KB_MATH_KIND_COUNT + 1 ? "gemm" :
	       b == KB_MATH_KIND_COUNT + 2 ? "nosuchop" : NULL;
}

static void args(reader *r, machine *m, kb_tl_arg *a, const char *const *names, size_t n_names)
{
	unsigned n = byte(r) % (KB_TL_MAX_ARGS + 1);

	for (unsigned i = 0; i < n && i < KB_TL_MAX_ARGS; i++) {
		a[i].name = names[byte(r) % n_names];
		a[i].t = pick(r, m);
	}
}

static void extras(reader *r, kb_tl_extra *e)
{
	static const char *const names[] = { "scale", "value", "bogus" };
	static const double values[] = { 0.125, 1.0, -2.0, 0.0, 1e300, NAN, INFINITY, -INFINITY };
	unsigned n = byte(r) % (KB_TL_MAX_EXTRAS + 1);

	for (unsigned i = 0; i < n && i < KB_TL_MAX_EXTRAS; i++) {
		e[i].name = names[byte(r) % 3];
		e[i].value = values[byte(r) % 8];
	}
}

static kb_tl_tensor *composite(kb_tl *tl, reader *r, machine *m, unsigned head)
{
	static const char *const recipe_names[] = { "softmax_merge", "softmax_merge", "no_such_recipe", "" };
	static const char *const recipe_args[] = { "s", "m", "l", "O", "x" };
	static const char *const epi_args[] = { "other", "bias", "src_b", "src_c", "zz" };
	kb_tl_composite_desc d;
	kb_tl_recipe_call pro[3];
	kb_tl_op epi[4];
	unsigned mode;

	memset(&d, 0, sizeof(d));
	memset(pro, 0, sizeof(pro));
	memset(epi, 0, sizeof(epi));
	d.op = head ? op_name(r) : "gemm";
	d.a = pick(r, m);
	d.b = pick(r, m);
	d.flags = byte(r) & 3;
	mode = byte(r) % 4;
	if (mode & 1)
		d.out = pick(r, m);
	if (mode & 2)
		d.out_hbm = address(r, m);
	d.n_prologue = byte(r) % 4;
	for (size_t i = 0; i < d.n_prologue && i < 3; i++) {
		unsigned k = byte(r) % 5;

		pro[i].recipe = k < 4 ? recipe_names[k] : NULL;
		args(r, m, pro[i].args, recipe_args, 5);
	}
	if (d.n_prologue == 3 && byte(r) & 1)
		d.prologue = NULL;  /* n_prologue without a list */
	else
		d.prologue = pro;
	d.n_epilogue = byte(r) % 5;
	for (size_t i = 0; i < d.n_epilogue && i < 4; i++) {
		epi[i].op = op_name(r);
		epi[i].scope = (kb_tl_scope)(byte(r) % 5);
		args(r, m, epi[i].args, epi_args, 5);
		extras(r, epi[i].extras);
	}
	if (d.n_epilogue == 4 && byte(r) & 1)
		d.epilogue = NULL;
	else
		d.epilogue = epi;
	if (d.n_epilogue > 4)
		d.n_epilogue = 4;
	extras(r, d.extras);
	return kb_tl_composite(tl, byte(r) == 0xff ? NULL : &d);
}

static void count_elems(kb_tl *tl, program *prog, kb_tl_tensor *t)
{
	int64_t s[KB_TL_MAX_RANK];
	int rank;
	uint64_t n = 1;

	if (!t || kb_tl_shape(tl, t, &rank, s))
		return;
	for (int i = 0; i < rank; i++)
		n = s[i] > 0 && n < (UINT64_C(1) << 62) / (uint64_t)s[i] ? n * (uint64_t)s[i] : (UINT64_C(1) << 62);
	prog->elems += n;
}

/* Runs the program on tl: the same code for the bare context and the kernel. */
static void interpret(kb_tl *tl, program *prog, uint64_t hbm_bytes)
{
	reader r = { prog->p, prog->n, 2 };
	machine m;
	int64_t s[KB_TL_MAX_RANK];

	memset(&m, 0, sizeof(m));
	m.hbm_bytes = hbm_bytes;
	prog->elems = 0;
	for (int i = 0; i < MAX_OPS && r.at < r.n; i++) {
		kb_tl_tensor *t = NULL;
		int rank;

		switch (byte(&r) % OP_COUNT) {
		case OP_REF: {
			uint64_t addr = address(&r, &m);
			kb_dtype dt = dtype(&r);

			rank = shape(&r, s);
			t = kb_tl_ref(tl, addr, dt, rank, byte(&r) == 0xff ? NULL : s);
			break;
		}
		case OP_ALLOC: {
			kb_dtype dt = dtype(&r);

			rank = shape(&r, s);
			t = kb_tl_alloc(tl, dt, rank, s);
			break;
		}
		case OP_FULL: {
			kb_dtype dt = dtype(&r);

			rank = shape(&r, s);
			t = kb_tl_full(tl, dt, rank, s, (double)(int8_t)byte(&r));
			break;
		}
		case OP_LOAD: {
			kb_tl_tensor *src = pick(&r, &m), *dst = byte(&r) & 1 ? pick(&r, &m) : NULL;

			t = kb_tl_load(tl, src, dst);
			break;
		}
		case OP_STORE: {
			kb_tl_tensor *dst = pick(&r, &m), *src = pick(&r, &m);

			kb_tl_store(tl, dst, src);
			break;
		}
		case OP_COMPOSITE:
			t = composite(tl, &r, &m, 1);
			break;
		case OP_DOT: {
			kb_tl_tensor *a = pick(&r, &m), *b = pick(&r, &m);

			t = kb_tl_dot(tl, a, b, byte(&r) & 1);
			break;
		}
		case OP_WAIT:
			kb_tl_wait(tl, pick(&r, &m));
			break;
		case OP_SCOPE_BEGIN:
			kb_tl_scope_begin(tl);
			break;
		case OP_SCOPE_END:
			kb_tl_scope_end(tl);
			break;
		case OP_CPU: {
			static const double c[] = { 0, 1, 100, -1, 1e13, NAN, INFINITY, 0.5 };

			kb_tl_cpu_overhead(tl, c[byte(&r) % 8]);
			break;
		}
		case OP_SEND: {
			kb_tl_tensor *src = pick(&r, &m);

			kb_tl_send(tl, src, byte(&r) % 4, byte(&r));
			break;
		}
		case OP_RECV: {
			kb_tl_tensor *dst = pick(&r, &m);

			kb_tl_recv(tl, dst, byte(&r) % 4, byte(&r));
			break;
		}
		default:
			kb_tl_shape(tl, pick(&r, &m), &rank, s);
			break;
		}
		count_elems(tl, prog, t);
		keep(&m, t);
	}
	/* Identity queries stay harmless whatever happened. */
	(void)kb_tl_program_id(tl);
	(void)kb_tl_num_programs(tl);
	(void)kb_tl_pe(tl);
	(void)kb_tl_tcm_free(tl);
}

/* ---- the bare validation path ---- */

typedef struct sink {
	uint64_t emitted, cancel_after;
} sink;

static int emit(void *ctx, kb_cmd *cmd)
{
	sink *k = ctx;

	kb__cmd_free(cmd);
	k->emitted++;
	return k->cancel_after && k->emitted >= k->cancel_after;
}

static int validate(program *prog, int may_cancel)
{
	sink k = { 0, may_cancel && prog->n > 1 && prog->p[1] < 32 ? prog->p[1] : 0 };
	kb_tl_config cfg;
	const kb_error *e;
	kb_tl *tl;
	int failed;

	memset(&cfg, 0, sizeof(cfg));
	cfg.pe = 0;
	cfg.program_id = 0;
	cfg.num_programs = 1;
	cfg.n_pes = 2;
	cfg.cost.fixed_cycles = 40;
	cfg.cost.r_cycles_per_byte = 0.0625;
	cfg.cost.max_composite_logical_bytes = 1024;
	cfg.cost.clock_ghz = 1.0;
	cfg.tcm_bytes = 1u << 20;
	cfg.hbm_bytes = UINT64_C(1) << 34;
	cfg.tag = 7;
	cfg.emit = emit;
	cfg.emit_ctx = &k;
	tl = kb__tl_create(&cfg);
	if (!tl)
		abort();
	interpret(tl, prog, cfg.hbm_bytes);
	kb__tl_finish(tl);
	e = kb__tl_error(tl);
	failed = kb_tl_failed(tl);
	if (e && (e->code != KB_EVALIDATE || !e->message[0] || !failed)) {
		fprintf(stderr, "fuzz_kernel: inconsistent error: code %d '%s'\n", e->code, e->message);
		abort();
	}
	kb__tl_destroy(tl);
	return failed;
}

/* ---- the same program as a real kernel ---- */

static void kernel(kb_tl *tl, void *payload)
{
	interpret(tl, payload, UINT64_C(17179869184));
}

static void simulate(program *prog)
{
	kb_sim_options opt = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	opt.threads = 1;
	opt.pes = 1;
	res = (kb_result)KB_RESULT_INIT;
	rc = kb_simulation_create(&sim, NULL, &opt, &err);
	if (!rc)
		rc = kb_simulation_launch(sim, kernel, prog, 0, 1, &err);
	if (!rc)
		rc = kb_simulation_run(sim, &res, &err);
	if (rc && (rc > 0 || rc == KB_EINTERNAL || !err.message[0])) {
		fprintf(stderr, "fuzz_kernel: simulation returned %d: %s\n", rc, err.message);
		abort();
	}
	if (!rc)
		kb_result_clear(&res);
	kb_simulation_destroy(sim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	program prog = { data, size, 0 };

	if (size < 1)
		return 0;
	validate(&prog, 1);
	if (data[0] & 1)
		return 0;
	/* The size budget counts the whole program, as the kernel will run it. */
	if (size > 1 && data[1] && data[1] < 32)
		validate(&prog, 0);
	if (prog.elems <= SIM_ELEM_BUDGET)
		simulate(&prog);
	return 0;
}
