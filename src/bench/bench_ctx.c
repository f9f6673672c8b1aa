/*
 * What a bench's run function may ask of its run (kb_bench_ctx): its
 * parameters and options, a simulation built the run's way, seeded
 * inputs, the tensors to dump, and the run-check-dump sequence. The
 * built-in benches and plugins use the same calls.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "bench/bench_impl.h"
#include "bench/bench_util.h"
#include "runtime/result.h"

KB_API const kb_bench_def *kb_bench_def_of(const kb_bench_ctx *ctx)
{
	return ctx ? ctx->def : NULL;
}

KB_API void *kb_bench_payload(const kb_bench_ctx *ctx)
{
	return ctx ? ctx->def->payload : NULL;
}

KB_API const kb_run_options *kb_bench_options(const kb_bench_ctx *ctx)
{
	return ctx ? ctx->opt : NULL;
}

KB_API int64_t kb_bench_param_int(const kb_bench_ctx *ctx, const char *name)
{
	return kb__bench_int(ctx, name);
}

KB_API double kb_bench_param_real(const kb_bench_ctx *ctx, const char *name)
{
	return kb__bench_real(ctx, name);
}

KB_API const char *kb_bench_param_str(const kb_bench_ctx *ctx, const char *name)
{
	return kb__bench_str(ctx, name);
}

KB_API kb_topology *kb_bench_topology(kb_bench_ctx *ctx)
{
	return ctx ? ctx->topo : NULL;
}

KB_API int kb_bench_simulation(kb_bench_ctx *ctx, uint32_t pes, kb_simulation **out,
			       kb_error *err)
{
	kb_sim_options so;

	if (!ctx || !out)
		return kb__err(err, KB_EINVAL, "kb_bench_simulation: %s is NULL", ctx ? "out" : "ctx");
	so = kb__bench_sim_options(ctx, pes);
	return kb_simulation_create(out, ctx->topo, &so, err);
}

KB_API void kb_bench_seed(kb_bench_ctx *ctx, uint64_t seed)
{
	if (ctx)
		kb__rng_seed(&ctx->rng, seed);
}

KB_API int kb_bench_input(kb_bench_ctx *ctx, kb_simulation *sim, kb_dtype dt, int rank,
			  const int64_t *shape, double std, uint64_t *addr, double **host,
			  kb_error *err)
{
	if (host)
		*host = NULL;
	if (!ctx || !sim || !addr)
		return kb__err(err, KB_EINVAL, "kb_bench_input: %s is NULL",
			       !ctx ? "ctx" : !sim ? "sim" : "addr");
	/* Timing mode never reads the values: drawing them would only cost. */
	if (!ctx->opt->data)
		return kb_simulation_alloc(sim, dt, rank, shape, 0, addr, err);
	return kb__bench_input(sim, &ctx->rng, dt, rank, shape, std, addr, host, err);
}

static int tensor_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	return kb__bench_name_ok(s, sizeof(((kb__dump_tensor *)0)->name) - 1);
}

KB_API int kb_bench_tensor(kb_bench_ctx *ctx, const char *name, kb_dtype dt, int rank,
			   const int64_t *shape, uint64_t addr, kb_error *err)
{
	kb__dump_tensor *t;

	if (!ctx)
		return kb__err(err, KB_EINVAL, "kb_bench_tensor: ctx is NULL");
	/* The file name is the tensor's: nothing that leaves the directory. */
	if (!tensor_name_ok(name))
		return kb__err(err, KB_EINVAL,
			       "%s: tensor name '%.100s' is not valid for a file name (letters, "
			       "digits, '_', '-', '.')", ctx->info->name, name ? name : "(null)");
	if (rank < 1 || rank > KB_TL_MAX_RANK || !shape || !kb_dtype_size(dt))
		return kb__err(err, KB_EINVAL, "%s: tensor '%s': rank %d or dtype %d is not valid",
			       ctx->info->name, name, rank, (int)dt);
	for (size_t i = 0; i < ctx->n_dump; i++)
		if (strcmp(ctx->dump[i].name, name) == 0)
			return kb__err(err, KB_EINVAL, "%s: tensor '%s' is declared twice",
				       ctx->info->name, name);
	if (ctx->n_dump == ctx->cap_dump) {
		kb__dump_tensor *p = kb__grow(ctx->dump, &ctx->cap_dump, sizeof(*p), 8);

		if (!p)
			return kb__err(err, KB_ENOMEM, "out of memory");
		ctx->dump = p;
	}
	t = &ctx->dump[ctx->n_dump++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->dt = dt;
	t->rank = rank;
	memcpy(t->shape, shape, (size_t)rank * sizeof(*shape));
	t->addr = addr;
	return KB_OK;
}

KB_API int kb_bench_simulate(kb_bench_ctx *ctx, kb_simulation *sim, void *state, kb_result *res,
			     kb_error *err)
{
	int rc;

	if (!ctx || !sim || !res)
		return kb__err(err, KB_EINVAL, "kb_bench_simulate: %s is NULL",
			       !ctx ? "ctx" : !sim ? "sim" : "res");
	rc = kb_simulation_run(sim, res, err);
	if (rc || !ctx->opt->data)
		return rc;
	if (ctx->def->check)
		rc = ctx->def->check(ctx, sim, state, res, err);
	for (size_t i = 0; !rc && ctx->opt->dump_dir && i < ctx->n_dump; i++) {
		const kb__dump_tensor *t = &ctx->dump[i];

		rc = kb__bench_dump(sim, ctx->opt->dump_dir, t->name, t->dt, t->rank, t->shape,
				    t->addr, err);
	}
	return rc;
}

KB_API int kb_bench_compare(kb_simulation *sim, kb_dtype dt, uint64_t addr, const double *want,
			    size_t n, kb_result *res, kb_error *err)
{
	float *got;
	int rc;

	if (!sim || !res || (n && !want))
		return kb__err(err, KB_EINVAL, "kb_bench_compare: %s is NULL",
			       !sim ? "sim" : !res ? "res" : "want");
	rc = kb__result_check(res, "kb_bench_compare", err);
	if (rc)
		return rc;
	got = malloc((n ? n : 1) * sizeof(*got));
	if (!got)
		return kb__err(err, KB_ENOMEM, "out of memory comparing %zu elements", n);
	rc = kb__bench_output(sim, dt, addr, n, got, err);
	if (!rc)
		kb__bench_errors(got, want, n, res);
	free(got);
	return rc;
}

KB_API int kb_bench_error(kb_error *err, int code, const char *param, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kb__verr(err, code, fmt, ap);
	va_end(ap);
	if (err && param)
		snprintf(err->source, sizeof(err->source), "%s", param);
	return code;
}
