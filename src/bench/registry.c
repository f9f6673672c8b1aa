/* Running a bench of a registry: parameter validation, the run wrapper
 * (provenance, outputs, the bench's own run) and the result's JSON. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/outfile.h"
#include "base/outpath.h"
#include "base/suggest.h"
#include "bench/bench_impl.h"
#include "bench/json_text.h"
#include "bench/params.h"
#include "bench/provenance.h"
#include "pe/pe.h"
#include "runtime/result.h"

/* " (did you mean 'x'?)" when one of the names is close to name, else
 * " (known: a, b, ...)". */
void kb__names_hint(char *buf, size_t n, const char *name, size_t count,
		       const char *(*name_at)(const void *set, size_t i), const void *set)
{
	kb__suggest sg;
	const char *best;
	size_t used, len;

	kb__suggest_init(&sg, name, strlen(name));
	for (size_t i = 0; i < count; i++)
		kb__suggest_offer(&sg, name_at(set, i), strlen(name_at(set, i)));
	best = kb__suggest_best(&sg, &len);
	if (best) {
		snprintf(buf, n, " (did you mean '%.*s'?)", (int)len, best);
		return;
	}
	used = (size_t)snprintf(buf, n, " (known:");
	for (size_t i = 0; i < count && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s %s", i ? "," : "", name_at(set, i));
	if (used < n)
		snprintf(buf + used, n - used, ")");
}

static const char *param_name_at(const void *set, size_t i)
{
	return ((const kb_bench_info *)set)->params[i].name;
}

static const kb_param_info *param_info(const kb_bench_info *b, const char *name)
{
	for (size_t i = 0; i < b->n_params; i++)
		if (strcmp(b->params[i].name, name) == 0)
			return &b->params[i];
	return NULL;
}

static const char *value_of(const kb_bench_ctx *ctx, const char *name)
{
	const char *v = kb__params_get(ctx->params, name);
	const kb_param_info *pi = param_info(ctx->info, name);

	return v ? v : pi ? pi->default_value : NULL;
}

int64_t kb__bench_int(const kb_bench_ctx *ctx, const char *name)
{
	const char *v = value_of(ctx, name);

	return v ? strtoll(v, NULL, 10) : 0;
}

double kb__bench_real(const kb_bench_ctx *ctx, const char *name)
{
	const char *v = value_of(ctx, name);

	return v ? strtod(v, NULL) : 0.0;
}

const char *kb__bench_str(const kb_bench_ctx *ctx, const char *name)
{
	const char *v = value_of(ctx, name);

	return v ? v : "";
}

kb_sim_options kb__bench_sim_options(const kb_bench_ctx *ctx, uint32_t pes)
{
	kb_sim_options o = KB_SIM_OPTIONS_INIT;

	o.threads = ctx->opt->threads;
	o.data = ctx->opt->data;
	o.oplog_path = ctx->opt->oplog_path;
	o.trace_path = ctx->opt->trace_path;
	o.on_record = ctx->opt->on_record;
	o.payload = ctx->opt->payload;
	o.pes = pes;
	o.trace_metadata = ctx->meta_json;
	return o;
}

static int choice_ok(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *c = choices; c && *c;) {
		const char *bar = strchr(c, '|');
		size_t len = bar ? (size_t)(bar - c) : strlen(c);

		if (len == n && strncmp(c, v, n) == 0)
			return 1;
		c = bar ? bar + 1 : NULL;
	}
	return 0;
}

/* A range bound as written in the bench's table: integers in full
 * (1048576, not 1.04858e+06; 9000000000000000000, not 9e+18). */
static void bound_text(char *buf, size_t n, const kb_param_info *pi, double x)
{
	if (pi->type == KB_PARAM_INT)
		snprintf(buf, n, "%.0f", x);
	else
		snprintf(buf, n, "%.15g", x);
}

/* One value against its parameter's type and range. Errors name the
 * parameter in err->source. */
int kb__param_check(const char *bench, const kb_param_info *pi, const char *v, kb_error *err)
{
	char *end, lo[32], hi[32];
	double x;

	if (pi->type == KB_PARAM_STRING) {
		if (pi->choices && !choice_ok(pi->choices, v))
			return kb__err_at(err, KB_ERANGE, pi->name, 0, 0,
					  "%s: parameter %s = '%s' is not one of %s", bench, pi->name, v,
					  pi->choices);
		return KB_OK;
	}
	errno = 0;
	if (pi->type == KB_PARAM_INT) {
		long long i = strtoll(v, &end, 10);

		x = (double)i;
		if (!*v || *end || errno)
			return kb__err_at(err, KB_EPARSE, pi->name, 0, 0,
					  "%s: parameter %s = '%s' is not an integer", bench, pi->name, v);
	} else {
		x = strtod(v, &end);
		if (!*v || *end || errno || !isfinite(x))
			return kb__err_at(err, KB_EPARSE, pi->name, 0, 0,
					  "%s: parameter %s = '%s' is not a finite number", bench, pi->name,
					  v);
	}
	if (x < pi->min || x > pi->max) {
		bound_text(lo, sizeof(lo), pi, pi->min);
		bound_text(hi, sizeof(hi), pi, pi->max);
		return kb__err_at(err, KB_ERANGE, pi->name, 0, 0,
				  "%s: parameter %s = %s is out of range [%s, %s]", bench, pi->name, v, lo,
				  hi);
	}
	return KB_OK;
}

static int check_params(const kb_bench_info *b, const kb_params *p, kb_error *err)
{
	for (size_t i = 0; i < kb__params_count(p); i++) {
		const char *name = kb__params_name(p, i);
		const kb_param_info *pi = param_info(b, name);

		if (!pi) {
			char hint[400];

			kb__names_hint(hint, sizeof(hint), name, b->n_params, param_name_at, b);
			return kb__err_at(err, KB_ENOTFOUND, name, 0, 0, "%s has no parameter '%s'%s",
					  b->name, name, hint);
		}
		if (kb__param_check(b->name, pi, kb__params_value(p, i), err))
			return err ? err->code : KB_EINVAL;
	}
	return KB_OK;
}

json_t *kb__param_json(kb_param_type type, const char *text)
{
	char *end = NULL;

	/* A value that is not a whole number of its type (a sweep row's bad
	 * value, reported as an error) stays the text it was, never a number
	 * made of its prefix. */
	if (type == KB_PARAM_INT) {
		long long v = strtoll(text, &end, 10);

		if (*text && !*end)
			return json_integer(v);
	} else if (type == KB_PARAM_REAL) {
		double v = strtod(text, &end);

		if (*text && !*end)
			return json_real(v);
	}
	return json_string(text);
}

/* Whether kb__param_json has no value for text even with memory: a real
 * past a double's range (1e999), which jansson does not hold. Such a
 * parameter has always been left out of the object. */
static int param_unheld(kb_param_type type, const char *text)
{
	char *end = NULL;
	double v = type == KB_PARAM_REAL ? strtod(text, &end) : 0.0;

	return type == KB_PARAM_REAL && *text && !*end && !isfinite(v);
}

/* The run's parameters, every one with its value or default, in the
 * bench's order: a new object, or NULL (no memory, for the object or a
 * value: never one with a parameter dropped for it). */
static json_t *params_object(const kb_bench_info *b, const kb_params *p)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < b->n_params; i++) {
		const kb_param_info *pi = &b->params[i];
		const char *t = kb__params_get(p, pi->name);
		json_t *v = kb__param_json(pi->type, t ? t : pi->default_value);

		if (v ? json_object_set_new(o, pi->name, v) != 0
		      : !param_unheld(pi->type, t ? t : pi->default_value)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* params_object's compact dump (json_dumps, precision 17), written
 * directly (json_text.h); NULL where only jansson writes it. */
char *kb__params_text(const kb_bench_info *b, const kb_params *p)
{
	kb__jtext t = KB__JTEXT_INIT;

	kb__jt_put(&t, "{", 1);
	for (size_t i = 0; i < b->n_params && !t.bad; i++) {
		const kb_param_info *pi = &b->params[i];
		const char *v = kb__params_get(p, pi->name), *end = NULL;

		if (!v)
			v = pi->default_value;
		kb__jt_key(&t, pi->name, i == 0);
		/* As kb__param_json: a whole number of the type, else the text. */
		if (pi->type == KB_PARAM_INT) {
			long long x = strtoll(v, (char **)&end, 10);

			if (*v && !*end) {
				kb__jt_int(&t, x);
				continue;
			}
		} else if (pi->type == KB_PARAM_REAL) {
			double x = strtod(v, (char **)&end);

			if (*v && !*end) {
				if (!isfinite(x))
					t.bad = true;   /* json_real refuses it: no member */
				kb__jt_real(&t, x, 17);
				continue;
			}
		}
		kb__jt_string(&t, v);
	}
	kb__jt_put(&t, "}", 1);
	return kb__jt_finish(&t);
}

char *kb__params_dump(const kb_bench_info *b, const kb_params *p)
{
	json_t *o = params_object(b, p);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

/* The provenance's text for a run without a dump folder:
 * kb__provenance_text, else jansson's path. */
static int meta_text(const kb_topology *topo, const char *params, const kb_run_options *opt,
		     char **out, kb_error *err)
{
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;
	int rc;

	po.topology = topo;
	po.params_json = params;
	po.threads = opt->threads;
	po.argc = opt->argc;
	po.argv = opt->argv;
	rc = kb__provenance_text(&po, out, err);
	return rc || *out ? rc : kb__provenance_dump(&po, out, err);
}

/* The provenance, its params the object whose text is params (the same
 * values: the text is its compact dump). */
static json_t *make_meta(const kb_topology *topo, const char *params, json_t *pobj,
			 const kb_run_options *opt, kb_error *err)
{
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;

	po.topology = topo;
	po.params_json = params;
	po.threads = opt->threads;
	po.argc = opt->argc;
	po.argv = opt->argv;
	return kb__provenance(&po, json_incref(pobj), err);
}

/* DIR/meta.json beside the dumped tensors: the provenance, pretty. */
static int write_meta(const char *dir, const json_t *meta, kb_error *err)
{
	size_t n = strlen(dir) + sizeof("/meta.json");
	char *path = malloc(n);
	kb_outfile out;
	int rc = KB_OK;

	if (!path)
		return kb__err(err, KB_ENOMEM, "out of memory");
	snprintf(path, n, "%s/meta.json", dir);
	/* Whole or absent, like every output (base/outfile.h). */
	if (kb__outfile_open(&out, path, "w") != 0) {
		rc = kb__outfile_error(err, "opening", "the dump's provenance", path);
	} else {
		int ok = json_dumpf(meta, out.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0;

		rc = kb__outfile_close(&out, ok) != 0 || !ok ? KB_EIO : KB_OK;
		if (rc)
			rc = kb__err(err, KB_EIO, "%s: cannot write the dump's provenance", path);
	}
	free(path);
	return rc;
}

KB_API int kb_bench_run(const char *bench, const kb_params *params, const kb_topology *topo,
			const kb_run_options *opt, kb_result *res, kb_error *err)
{
	return kb_registry_run(kb__builtin_registry(), bench, params, topo, opt, res, err);
}

KB_API int kb_registry_run(const kb_registry *reg, const char *bench, const kb_params *params,
			   const kb_topology *topo, const kb_run_options *opt, kb_result *res,
			   kb_error *err)
{
	const kb_bench_def *def = NULL;
	kb_run_options dflt = KB_RUN_OPTIONS_INIT;
	kb_bench_ctx ctx = { 0 };
	kb_result full = KB_RESULT_INIT; /* filled in full, then handed over within res->size */
	char *ptext;
	json_t *meta, *pobj;
	int rc;

	kb_error_clear(err);
	rc = kb__result_begin(res, "kb_bench_run", err);
	if (rc)
		return rc;
	kb__result_init(&full);
	rc = kb_registry_lookup(reg, bench, &def, err);
	if (rc)
		return rc;
	rc = check_params(&def->info, params, err);
	if (rc)
		return rc;
	if (!opt)
		opt = &dflt;
	if (opt->dump_dir && !opt->data)
		return kb__err(err, KB_EINVAL, "dumping tensors needs data mode");
	{
		const char *const paths[] = { opt->oplog_path, opt->trace_path };
		static const char *const names[] = { "op_log", "trace" };

		rc = kb__outputs_check(paths, names, 2, opt->dump_dir, err);
		if (rc)
			return rc;
	}
	ctx.def = def;
	ctx.info = &def->info;
	ctx.params = params;
	kb__rng_seed(&ctx.rng, 1);
	ctx.opt = opt;
	rc = topo ? kb_topology_clone(&ctx.topo, topo, err) : kb_topology_default(&ctx.topo, err);
	if (rc)
		return rc;
	/* Provenance first: a bench may grow its copy of the topology, and the
	 * hash is of the topology as given (as `kernbench topology` prints it).
	 * The texts are written directly (issue 13); a dump folder's
	 * meta.json needs the object, and so do texts only jansson writes. */
	ptext = opt->dump_dir ? NULL : kb__params_text(&def->info, params);
	meta = NULL;
	if (ptext) {
		rc = meta_text(ctx.topo, ptext, opt, &full.meta_json, err);
	} else {
		pobj = params_object(&def->info, params);
		ptext = pobj ? json_dumps(pobj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		meta = ptext ? make_meta(ctx.topo, ptext, pobj, opt, err) : NULL;
		json_decref(pobj);
		rc = meta ? KB_OK : (err && err->code ? err->code : KB_ENOMEM);
		if (!rc && !(full.meta_json = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER)))
			rc = kb__err(err, KB_ENOMEM, "out of memory");
	}
	ctx.meta_json = full.meta_json;
	if (!rc) {
		/* A bench's run fills res afresh: keep the provenance aside. */
		char *keep = full.meta_json;

		full.meta_json = NULL;
		rc = def->run(&ctx, &full, err);
		full.meta_json = keep;
	}
	kb_topology_destroy(ctx.topo);
	free(ctx.dump);
	if (!rc && opt->dump_dir)
		rc = write_meta(opt->dump_dir, meta, err);
	json_decref(meta);
	full.params_json = ptext;
	if (rc) {
		kb_result_clear(&full);
		return rc;
	}
	snprintf(full.bench, sizeof(full.bench), "%s", def->info.name);
	full.threads = opt->threads;
	full.data = opt->data;
	kb__result_deliver(res, &full);
	return KB_OK;
}

static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* Per PE, per engine: busy picoseconds, or (util) the busy fraction of
 * the simulated time, so a user sees load balance at a glance. */
static json_t *busy_json(const kb_result *r, int util)
{
	json_t *pes = json_array();

	for (uint32_t p = 0; pes && p < r->pes; p++) {
		json_t *o = json_object();

		json_object_set_new(o, "pe", json_integer(p));
		for (size_t i = 0; i < r->n_busy; i++) {
			const kb_engine_busy *b = &r->busy[i];

			if (b->pe != p)
				continue;
			json_object_set_new(o, b->eng, util ? json_real(r->sim_time_ps ? (double)b->busy_ps / (double)r->sim_time_ps : 0.0)
							     : json_integer((json_int_t)b->busy_ps));
		}
		json_array_append_new(pes, o);
	}
	return pes;
}

json_t *kb__result_json(const kb_result *r)
{
	json_t *o = json_object(), *params;

	if (!o || !r || r->size < KB_RESULT_SIZE_V1) {
		json_decref(o);
		return NULL;
	}
	json_object_set_new(o, "bench", json_string(r->bench));
	params = r->params_json ? json_loads(r->params_json, 0, NULL) : NULL;
	json_object_set_new(o, "params", params ? params : json_object());
	json_object_set_new(o, "threads", r->threads == KB_THREADS_AUTO ? json_string("auto")
									  : json_integer(r->threads));
	json_object_set_new(o, "workers", json_integer(r->workers));
	json_object_set_new(o, "data", json_boolean(r->data));
	json_object_set_new(o, "pes", json_integer(r->pes));
	json_object_set_new(o, "sim_time_ps", json_integer((json_int_t)r->sim_time_ps));
	json_object_set_new(o, "events", json_integer((json_int_t)r->events));
	json_object_set_new(o, "records", json_integer((json_int_t)r->records));
	json_object_set_new(o, "commands", json_integer((json_int_t)r->commands));
	json_object_set_new(o, "dispatch_ps", json_integer((json_int_t)r->dispatch_ps));
	if (r->tiles) {
		json_object_set_new(o, "tiles", json_integer((json_int_t)r->tiles));
		json_object_set_new(o, "dispatch_per_tile_ns", real_or_null(r->dispatch_per_tile_ns));
		json_object_set_new(o, "dispatch_kernel_per_tile_ns",
				    real_or_null(r->dispatch_kernel_per_tile_ns));
	}
	json_object_set_new(o, "windows", json_integer((json_int_t)r->windows));
	json_object_set_new(o, "parallel_windows", json_integer((json_int_t)r->parallel_windows));
	if (r->windows) {
		json_t *x = json_object();

		json_object_set_new(x, "threads", json_integer(r->exec.threads));
		json_object_set_new(x, "window_ps", json_integer((json_int_t)r->exec.window_ps));
		json_object_set_new(x, "ns_events", json_integer((json_int_t)r->exec.ns_events));
		json_object_set_new(x, "ns_barrier", json_integer((json_int_t)r->exec.ns_barrier));
		json_object_set_new(x, "ns_next", json_integer((json_int_t)r->exec.ns_next));
		json_object_set_new(x, "ns_drain", json_integer((json_int_t)r->exec.ns_drain));
		json_object_set_new(x, "ns_oplog", json_integer((json_int_t)r->exec.ns_oplog));
		json_object_set_new(x, "ns_wall", json_integer((json_int_t)r->exec.ns_wall));
		json_object_set_new(x, "ns_oplog_serial",
				    json_integer((json_int_t)r->exec.ns_oplog_serial));
		json_object_set_new(x, "gathered", json_integer(r->exec.gathered));
		if (KB__RESULT_HAS(r, exec_switches)) {
			json_object_set_new(x, "alone_events",
					    json_integer((json_int_t)r->alone_events));
			json_object_set_new(x, "switches", json_integer((json_int_t)r->exec_switches));
		}
		json_object_set_new(o, "executor", x);
	}
	json_object_set_new(o, "wall_s", json_real(r->wall_s));
	json_object_set_new(o, "events_per_s", json_real(r->events_per_s));
	json_object_set_new(o, "oplog_sha256", json_string(r->oplog_sha256));
	if (r->data) {
		json_object_set_new(o, "max_abs_err", real_or_null(r->max_abs_err));
		json_object_set_new(o, "max_rel_err", real_or_null(r->max_rel_err));
	}
	if (r->n_busy) {
		json_object_set_new(o, "busy_ps", busy_json(r, 0));
		json_object_set_new(o, "utilization", busy_json(r, 1));
	}
	if (r->meta_json) {
		json_t *meta = json_loads(r->meta_json, 0, NULL);

		if (meta)
			json_object_set_new(o, "meta", meta);
	}
	return o;
}

/* ---- a result read back from its JSON object -------------------------- */

static int get_u64(const json_t *o, const char *k, uint64_t *v, kb_error *err)
{
	const json_t *j = json_object_get(o, k);

	if (!j)
		return 0;  /* absent: stays 0 */
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return kb__err(err, KB_EPARSE, "result: '%s' is not a count", k);
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

/* A real, or NaN for null or absent. */
static int get_real(const json_t *o, const char *k, double *v, kb_error *err)
{
	const json_t *j = json_object_get(o, k);

	*v = NAN;
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_number(j))
		return kb__err(err, KB_EPARSE, "result: '%s' is not a number", k);
	*v = json_number_value(j);
	return 0;
}

static int busy_from_json(const json_t *pes, kb_result *r, kb_error *err)
{
	size_t i, n = 0;
	const json_t *pe;

	if (!pes)
		return 0;
	if (!json_is_array(pes))
		return kb__err(err, KB_EPARSE, "result: 'busy_ps' is not a list");
	r->busy = calloc(json_array_size(pes) * KB_ENG_COUNT + 1, sizeof(*r->busy));
	if (!r->busy)
		return kb__err(err, KB_ENOMEM, "out of memory");
	json_array_foreach(pes, i, pe) {
		for (int e = 0; e < KB_ENG_COUNT; e++) {
			const json_t *b = json_object_get(pe, kb__eng_names[e]);

			if (!b)
				continue;
			if (!json_is_integer(b))
				return kb__err(err, KB_EPARSE, "result: busy_ps of pe %zu", i);
			r->busy[n++] = (kb_engine_busy){ (uint32_t)i, kb__eng_names[e],
							 (uint64_t)json_integer_value(b) };
		}
	}
	r->n_busy = n;
	return 0;
}

static int text_member(const json_t *o, const char *k, char **out, kb_error *err)
{
	const json_t *j = json_object_get(o, k);

	if (!j)
		return 0;
	*out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY |
			      JSON_REAL_PRECISION(17));
	return *out ? 0 : kb__err(err, KB_ENOMEM, "out of memory");
}

int kb__result_from_json(const json_t *o, kb_result *r, kb_error *err)
{
	const json_t *th = json_object_get(o, "threads"), *x = json_object_get(o, "executor");
	const char *bench = json_string_value(json_object_get(o, "bench"));
	const char *sha = json_string_value(json_object_get(o, "oplog_sha256"));
	uint64_t u = 0;
	int rc = 0;

	kb__result_init(r);
	if (!json_is_object(o) || !bench || !sha || strlen(sha) >= sizeof(r->oplog_sha256))
		return kb__err(err, KB_EPARSE, "result: not a result object");
	snprintf(r->bench, sizeof(r->bench), "%s", bench);
	snprintf(r->oplog_sha256, sizeof(r->oplog_sha256), "%s", sha);
	r->threads = json_is_integer(th) ? (int)json_integer_value(th) : KB_THREADS_AUTO;
	r->data = json_is_true(json_object_get(o, "data"));
	rc = rc ? rc : get_u64(o, "workers", &u, err);
	r->workers = (unsigned)u;
	u = 0;
	rc = rc ? rc : get_u64(o, "pes", &u, err);
	r->pes = (uint32_t)u;
	rc = rc ? rc : get_u64(o, "sim_time_ps", &r->sim_time_ps, err);
	rc = rc ? rc : get_u64(o, "events", &r->events, err);
	rc = rc ? rc : get_u64(o, "records", &r->records, err);
	rc = rc ? rc : get_u64(o, "commands", &r->commands, err);
	rc = rc ? rc : get_u64(o, "dispatch_ps", &r->dispatch_ps, err);
	rc = rc ? rc : get_u64(o, "tiles", &r->tiles, err);
	rc = rc ? rc : get_u64(o, "windows", &r->windows, err);
	rc = rc ? rc : get_u64(o, "parallel_windows", &r->parallel_windows, err);
	rc = rc ? rc : get_real(o, "dispatch_per_tile_ns", &r->dispatch_per_tile_ns, err);
	rc = rc ? rc : get_real(o, "dispatch_kernel_per_tile_ns", &r->dispatch_kernel_per_tile_ns, err);
	rc = rc ? rc : get_real(o, "wall_s", &r->wall_s, err);
	rc = rc ? rc : get_real(o, "events_per_s", &r->events_per_s, err);
	rc = rc ? rc : get_real(o, "max_abs_err", &r->max_abs_err, err);
	rc = rc ? rc : get_real(o, "max_rel_err", &r->max_rel_err, err);
	if (!rc && json_is_object(x)) {
		u = 0;
		rc = get_u64(x, "threads", &u, err);
		r->exec.threads = (unsigned)u;
		rc = rc ? rc : get_u64(x, "window_ps", &r->exec.window_ps, err);
		rc = rc ? rc : get_u64(x, "ns_events", &r->exec.ns_events, err);
		rc = rc ? rc : get_u64(x, "ns_barrier", &r->exec.ns_barrier, err);
		rc = rc ? rc : get_u64(x, "ns_next", &r->exec.ns_next, err);
		rc = rc ? rc : get_u64(x, "ns_drain", &r->exec.ns_drain, err);
		rc = rc ? rc : get_u64(x, "ns_oplog", &r->exec.ns_oplog, err);
		rc = rc ? rc : get_u64(x, "ns_wall", &r->exec.ns_wall, err);
	}
	rc = rc ? rc : busy_from_json(json_object_get(o, "busy_ps"), r, err);
	rc = rc ? rc : text_member(o, "params", &r->params_json, err);
	rc = rc ? rc : text_member(o, "meta", &r->meta_json, err);
	if (rc)
		kb_result_clear(r);
	return rc;
}
