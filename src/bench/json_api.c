/*
 * JSON in, JSON out (kernbench/json.h): the bench runner, sweeps, the
 * catalogue and simulations through strings, so that a binding never
 * copies a struct layout. Inputs are turned into the ordinary calls
 * (kb_params_set, kb_topology_set, kb_sweep_add_*), so every check and
 * every error message is the one of the ordinary API.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "bench/bench_impl.h"
#include "bench/params.h"
#include "bench/provenance.h"
#include "bench/json_impl.h"
#include "kernbench/json.h"
#include "num/math_op.h"
#include "tl/recipes.h"

/* ---- inputs ----------------------------------------------------------- */

/* Parses text as a JSON object (NULL text: an empty object). */
json_t *kb__json_parse_object(const char *text, const char *what, kb_error *err)
{
	json_error_t je;
	json_t *o;

	if (!text)
		return json_object();
	o = json_loads(text, 0, &je);
	if (!o) {
		kb__err_at(err, KB_EPARSE, what, je.line, je.column, "%s:%d:%d: %s", what, je.line,
			   je.column, je.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		kb__err(err, KB_ETYPE, "%s must be a JSON object", what);
		return NULL;
	}
	return o;
}

/* The shortest text that reads back to the same double. */
static void real_text(double v, char *buf, size_t n)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

/* A scalar as the text the ordinary API reads (numbers, strings, booleans). */
int kb__json_value_text(const json_t *v, const char *key, char *buf, size_t n, kb_error *err)
{
	if (json_is_integer(v))
		snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		real_text(json_real_value(v), buf, n);
	else if (json_is_string(v) && strlen(json_string_value(v)) < n)
		snprintf(buf, n, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, n, "%d", json_is_true(v) ? 1 : 0);
	else
		return kb__err(err, KB_ETYPE, "%s: expected a number or a string", key);
	return KB_OK;
}

/* Applies {"a.b": 1} and {"a": {"b": 1}} (prefix: the path so far). */
static int set_keys(kb_topology *t, const json_t *o, const char *prefix, kb_error *err)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		char key[256], text[64];
		int rc;

		if ((size_t)snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "", k) >=
		    sizeof(key))
			return kb__err(err, KB_EKEY, "topology key '%s%s' is too long", prefix, k);
		if (json_is_object(v)) {
			rc = set_keys(t, v, key, err);
		} else {
			rc = kb__json_value_text(v, key, text, sizeof(text), err);
			if (!rc)
				rc = kb_topology_set(t, key, text, err);
		}
		if (rc)
			return rc;
	}
	return KB_OK;
}

int kb__json_topology_from(kb_topology **out, const json_t *o, kb_error *err)
{
	kb_topology *t = NULL;
	int rc;

	*out = NULL;
	if (o && json_object_get(o, "schema")) {
		char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

		rc = text ? kb_topology_load_string(&t, text, err) : kb__err(err, KB_ENOMEM, "out of memory");
		free(text);
	} else {
		rc = kb_topology_default(&t, err);
		if (!rc && o)
			rc = set_keys(t, o, "", err);
	}
	if (rc) {
		kb_topology_destroy(t);
		return rc;
	}
	*out = t;
	return KB_OK;
}

KB_API int kb_topology_from_json(kb_topology **out, const char *topology_json, kb_error *err)
{
	json_t *o;
	int rc;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_topology_from_json: out is NULL");
	*out = NULL;
	if (!(o = kb__json_parse_object(topology_json, "topology", err)))
		return err ? err->code : KB_EPARSE;
	rc = kb__json_topology_from(out, o, err);
	json_decref(o);
	return rc;
}


static int get_int(const json_t *v, const char *key, long long lo, long long hi, long long *out,
		   kb_error *err)
{
	if (!json_is_integer(v))
		return kb__err(err, KB_ETYPE, "option %s: expected an integer", key);
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		return kb__err(err, KB_ERANGE, "option %s = %" JSON_INTEGER_FORMAT " is out of range [%lld, %lld]",
			       key, json_integer_value(v), lo, hi);
	*out = json_integer_value(v);
	return KB_OK;
}

static int get_path(const json_t *v, const char *key, const char **out, kb_error *err)
{
	if (json_is_null(v)) {
		*out = NULL;
		return KB_OK;
	}
	if (!json_is_string(v))
		return kb__err(err, KB_ETYPE, "option %s: expected a string", key);
	*out = json_string_value(v);
	return KB_OK;
}

/* Reads the keys of o named in `allowed` ("threads data ..."); strings
 * point into o, which must outlive the options. */
int kb__json_read_opts(const json_t *o, const char *allowed, json_opts *jo, kb_error *err)
{
	const char *k;
	json_t *v;
	long long x;
	int rc = KB_OK;

	memset(jo, 0, sizeof(*jo));
	jo->threads = KB_THREADS_AUTO;
	json_object_foreach((json_t *)o, k, v) {
		const char *hit = strstr(allowed, k);
		size_t n = strlen(k);

		if (!hit || (hit != allowed && hit[-1] != ' ') || (hit[n] && hit[n] != ' '))
			return kb__err(err, KB_EKEY, "unknown option '%s' (known: %s)", k, allowed);
		if (strcmp(k, "threads") == 0 && json_is_string(v) &&
		    strcmp(json_string_value(v), "auto") == 0)
			jo->threads = KB_THREADS_AUTO;
		else if (strcmp(k, "threads") == 0 && !(rc = get_int(v, k, 0, 4096, &x, err)))
			jo->threads = (int)x;
		else if (strcmp(k, "data") == 0 || strcmp(k, "kernel_threads") == 0) {
			if (!json_is_boolean(v))
				return kb__err(err, KB_ETYPE, "option %s: expected true or false", k);
			*(k[0] == 'd' ? &jo->data : &jo->kernel_threads) = json_is_true(v);
		} else if (strcmp(k, "pes") == 0)
			rc = get_int(v, k, 0, 1 << 20, &jo->pes, err);
		else if (strcmp(k, "jobs") == 0)
			rc = get_int(v, k, 0, 4096, &jo->jobs, err);
		else if (strcmp(k, "op_log") == 0)
			rc = get_path(v, k, &jo->op_log, err);
		else if (strcmp(k, "trace") == 0)
			rc = get_path(v, k, &jo->trace, err);
		else if (strcmp(k, "dump") == 0)
			rc = get_path(v, k, &jo->dump, err);
		else if (strcmp(k, "argv") == 0) {
			size_t i;

			if (!json_is_array(v))
				return kb__err(err, KB_ETYPE, "option argv: expected a list of strings");
			free(jo->argv);
			jo->argv = calloc(json_array_size(v) + 1, sizeof(*jo->argv));
			if (!jo->argv)
				return kb__err(err, KB_ENOMEM, "out of memory");
			for (i = 0; i < json_array_size(v); i++) {
				json_t *s = json_array_get(v, i);

				if (!json_is_string(s))
					return kb__err(err, KB_ETYPE, "option argv: expected a list of strings");
				jo->argv[jo->argc++] = json_string_value(s);
			}
		}
		if (rc)
			return rc;
	}
	return KB_OK;
}

static int params_from(kb_params **out, const char *params_json, kb_error *err)
{
	json_t *o = kb__json_parse_object(params_json, "params", err), *v;
	const char *k;
	int rc = KB_OK;

	*out = NULL;
	if (!o)
		return err ? err->code : KB_EPARSE;
	rc = kb_params_create(out, err);
	json_object_foreach(o, k, v) {
		char text[256];

		if (rc || (rc = kb__json_value_text(v, k, text, sizeof(text), err)) ||
		    (rc = kb_params_set(*out, k, text, err)))
			break;
	}
	json_decref(o);
	if (rc) {
		kb_params_destroy(*out);
		*out = NULL;
	}
	return rc;
}

static int dump_out(json_t *o, char **out, kb_error *err)
{
	*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(o);
	return *out ? KB_OK : kb__err(err, KB_ENOMEM, "out of memory");
}

/* ---- runs ------------------------------------------------------------- */

KB_API int kb_bench_run_json(const char *bench, const char *params_json,
			     const char *topology_json, const char *options_json,
			     char **result_json, kb_error *err)
{
	return kb_registry_run_json(NULL, bench, params_json, topology_json, options_json,
				    result_json, err);
}

KB_API int kb_registry_run_json(const kb_registry *reg, const char *bench, const char *params_json,
				const char *topology_json, const char *options_json,
				char **result_json, kb_error *err)
{
	kb_run_options ro = KB_RUN_OPTIONS_INIT;
	json_t *opts = NULL;
	kb_params *params = NULL;
	kb_topology *topo = NULL;
	json_opts jo = { 0 };
	kb_result res = KB_RESULT_INIT;
	char *text;
	int rc;

	kb_error_clear(err);
	if (!result_json)
		return kb__err(err, KB_EINVAL, "kb_registry_run_json: result_json is NULL");
	*result_json = NULL;
	if (!(opts = kb__json_parse_object(options_json, "options", err)))
		return err ? err->code : KB_EPARSE;
	if ((rc = kb__json_read_opts(opts, "threads data op_log trace dump argv", &jo, err)) ||
	    (rc = params_from(&params, params_json, err)) ||
	    (rc = kb_topology_from_json(&topo, topology_json, err)))
		goto done;
	ro.threads = jo.threads;
	ro.data = jo.data;
	ro.oplog_path = jo.op_log;
	ro.trace_path = jo.trace;
	ro.dump_dir = jo.dump;
	ro.argc = jo.argc;
	ro.argv = jo.argv;
	if ((rc = kb_registry_run(reg ? reg : kb__builtin_registry(), bench, params, topo, &ro,
				  &res, err)))
		goto done;
	text = kb_result_to_json(&res);
	kb_result_clear(&res);
	if (!text) {
		rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto done;
	}
	*result_json = text;
done:
	free(jo.argv);
	kb_topology_destroy(topo);
	kb_params_destroy(params);
	json_decref(opts);
	return rc;
}

/* ---- the catalogue ---------------------------------------------------- */

static json_t *choices_json(const char *choices)
{
	json_t *a;

	if (!choices)
		return json_null();
	a = json_array();
	for (const char *c = choices; *c;) {
		const char *bar = strchr(c, '|');
		size_t len = bar ? (size_t)(bar - c) : strlen(c);

		json_array_append_new(a, json_stringn(c, len));
		c += len + (bar != NULL);
	}
	return a;
}

/* A bound as `list --json` prints it: an integer parameter's bounds are
 * integers (9000000000000000000, not 9e+18), a real's reals. */
static json_t *bound(const kb_param_info *p, double v)
{
	if (p->type == KB_PARAM_STRING || !isfinite(v))
		return json_null();
	if (p->type == KB_PARAM_INT && v >= -9.2e18 && v <= 9.2e18)
		return json_integer((json_int_t)v);
	return json_real(v);
}

static json_t *benches_json(const kb_registry *reg)
{
	static const char *const types[] = { "int", "real", "string" };
	json_t *list = json_array();

	for (size_t i = 0; i < kb_registry_count(reg); i++) {
		const kb_bench_info *b = &kb_registry_at(reg, i)->info;
		json_t *o = json_object(), *ps = json_array();

		for (size_t j = 0; j < b->n_params; j++) {
			const kb_param_info *p = &b->params[j];
			json_t *po = json_object();

			json_object_set_new(po, "name", json_string(p->name));
			json_object_set_new(po, "type", json_string(types[p->type]));
			json_object_set_new(po, "default",
					    kb__param_json(p->type, p->default_value ? p->default_value : ""));
			json_object_set_new(po, "help", json_string(p->help ? p->help : ""));
			json_object_set_new(po, "choices", choices_json(p->choices));
			json_object_set_new(po, "min", bound(p, p->min));
			json_object_set_new(po, "max", bound(p, p->max));
			json_array_append_new(ps, po);
		}
		json_object_set_new(o, "name", json_string(b->name));
		json_object_set_new(o, "help", json_string(b->help ? b->help : ""));
		json_object_set_new(o, "params", ps);
		json_array_append_new(list, o);
	}
	return list;
}

static json_t *recipes_json(void)
{
	json_t *list = json_array();

	for (size_t i = 0; i < kb__recipe_count(); i++) {
		const kb_recipe *r = kb__recipe_get(i);
		json_t *o = json_object(), *ops = json_array();

		for (int j = 0; j < KB_RECIPE_MAX_OPERANDS && r->operands[j].name; j++) {
			json_t *op = json_object();

			json_object_set_new(op, "name", json_string(r->operands[j].name));
			json_object_set_new(op, "access",
					    json_string(r->operands[j].access == KB_RECIPE_RW ? "rw" : "r"));
			json_array_append_new(ops, op);
		}
		json_object_set_new(o, "name", json_string(r->name));
		json_object_set_new(o, "operands", ops);
		json_object_set_new(o, "primary_out",
				    r->primary_out ? json_string(r->primary_out) : json_null());
		json_array_append_new(list, o);
	}
	return list;
}

/* The op kinds of a composite: the head or an epilogue op. An epilogue
 * op's first input is the running value; the rest are named operands. */
static json_t *ops_json(void)
{
	static const char *const names[] = { "other", "bias", "src_b", "src_c" };
	json_t *list = json_array(), *gemm = json_object(), *ab = json_array();

	json_array_append_new(ab, json_string("a"));
	json_array_append_new(ab, json_string("b"));
	json_object_set_new(gemm, "name", json_string("gemm"));
	json_object_set_new(gemm, "engine", json_string("gemm"));
	json_object_set_new(gemm, "inputs", json_integer(2));
	json_object_set_new(gemm, "operands", ab);
	json_array_append_new(list, gemm);
	for (int k = 0; k < KB_MATH_KIND_COUNT; k++) {
		json_t *o = json_object(), *ops = json_array();
		int n = kb__math_arity((kb_math_kind)k);

		for (int j = 0; j + 1 < n && j < 4; j++)
			json_array_append_new(ops, json_string(names[j]));
		json_object_set_new(o, "name", json_string(kb__math_kind_name((kb_math_kind)k)));
		json_object_set_new(o, "engine", json_string("math"));
		json_object_set_new(o, "inputs", json_integer(n));
		json_object_set_new(o, "operands", ops);
		json_array_append_new(list, o);
	}
	return list;
}

KB_API int kb_catalog_json(char **out, kb_error *err)
{
	return kb_registry_catalog_json(out, NULL, err);
}

KB_API int kb_registry_catalog_json(char **out, const kb_registry *reg, kb_error *err)
{
	json_t *o = json_object();

	kb_error_clear(err);
	if (!out) {
		json_decref(o);
		return kb__err(err, KB_EINVAL, "kb_catalog_json: out is NULL");
	}
	json_object_set_new(o, "benches", benches_json(reg ? reg : kb__builtin_registry()));
	json_object_set_new(o, "recipes", recipes_json());
	json_object_set_new(o, "ops", ops_json());
	return dump_out(o, out, err);
}

/* ---- simulations ------------------------------------------------------ */

KB_API int kb_simulation_create_json(kb_simulation **out, const char *topology_json,
				     const char *options_json, kb_error *err)
{
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_topology *topo = NULL;
	json_t *opts;
	json_opts jo;
	int rc;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_simulation_create_json: out is NULL");
	*out = NULL;
	if (!(opts = kb__json_parse_object(options_json, "options", err)))
		return err ? err->code : KB_EPARSE;
	rc = kb__json_read_opts(opts, "threads data op_log trace pes kernel_threads", &jo, err);
	if (!rc)
		rc = kb_topology_from_json(&topo, topology_json, err);
	if (!rc) {
		so.threads = jo.threads;
		so.data = jo.data;
		so.oplog_path = jo.op_log;
		so.trace_path = jo.trace;
		so.pes = (uint32_t)jo.pes;
		so.kernel_threads = jo.kernel_threads;
		rc = kb_simulation_create(out, topo, &so, err);
	}
	kb_topology_destroy(topo);
	json_decref(opts);
	return rc;
}

KB_API int kb_simulation_run_json(kb_simulation *sim, char **result_json, kb_error *err)
{
	kb_result res = KB_RESULT_INIT;
	int rc;

	kb_error_clear(err);
	if (!result_json)
		return kb__err(err, KB_EINVAL, "kb_simulation_run_json: result_json is NULL");
	*result_json = NULL;
	if ((rc = kb_simulation_run(sim, &res, err)))
		return rc;
	*result_json = kb_result_to_json(&res);
	kb_result_clear(&res);
	return *result_json ? KB_OK : kb__err(err, KB_ENOMEM, "out of memory");
}
