/*
 * kb_sweep_run_json (kernbench/json.h): a sweep defined by a JSON object,
 * built with the ordinary calls, each row as kb_sweep_row_to_json's text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "bench/json_impl.h"
#include "kernbench/json.h"
#include "kernbench/sweep.h"

/* A list (or a scalar: a list of one) as the comma-separated values text. */
static int list_text(const json_t *v, const char *key, char **out, kb_error *err)
{
	size_t n = json_is_array(v) ? json_array_size(v) : 1, used = 0, cap = 64;
	char *buf = malloc(cap);
	int rc = KB_OK;

	if (!buf)
		return kb__err(err, KB_ENOMEM, "out of memory");
	buf[0] = '\0';
	if (n == 0)
		rc = kb__err(err, KB_EINVAL, "%s: the list of values is empty", key);
	for (size_t i = 0; !rc && i < n; i++) {
		char text[256];
		size_t len;

		if ((rc = kb__json_value_text(json_is_array(v) ? json_array_get(v, i) : v, key, text,
				     sizeof(text), err)))
			break;
		if (strchr(text, ','))
			rc = kb__err(err, KB_EINVAL, "%s: value '%s' contains a comma", key, text);
		len = strlen(text);
		while (!rc && used + len + 2 > cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				rc = kb__err(err, KB_ENOMEM, "out of memory");
			else
				buf = nb;
		}
		if (!rc)
			used += (size_t)sprintf(buf + used, "%s%s", i ? "," : "", text);
	}
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return KB_OK;
}

static int add_lists(kb_sweep *s, const json_t *o, int is_set, kb_error *err)
{
	const char *k;
	json_t *v;

	if (o && !json_is_object(o))
		return kb__err(err, KB_ETYPE, "sweep %s: expected an object of lists",
			       is_set ? "set" : "params");
	json_object_foreach((json_t *)o, k, v) {
		char *text = NULL;
		int rc = list_text(v, k, &text, err);

		if (!rc)
			rc = is_set ? kb_sweep_add_set(s, k, text, err) : kb_sweep_add_param(s, k, text, err);
		free(text);
		if (rc)
			return rc;
	}
	return KB_OK;
}

typedef struct row_relay {
	const kb_sweep *s;
	kb_json_cb cb;
	void *payload;
	int oom;
} row_relay;

static int relay_row(const kb_sweep_row *row, void *payload)
{
	row_relay *r = payload;
	char *text = kb_sweep_row_to_json(r->s, row);
	int stop;

	if (!text) {
		r->oom = 1;
		return 1;
	}
	stop = r->cb ? r->cb(text, r->payload) : 0;
	free(text);
	return stop;
}

static int build_sweep(kb_sweep **out, const kb_registry *reg, const json_t *spec,
		       kb_error *err)
{
	kb_sweep_options so = KB_SWEEP_OPTIONS_INIT;
	const json_t *benches = json_object_get(spec, "benches");
	json_t *scope = json_object();
	kb_topology *topo = NULL;
	kb_sweep *s = NULL;
	json_opts jo;
	const char *k;
	json_t *v;
	int rc;

	/* The run options are the keys outside the sweep's definition. */
	json_object_foreach((json_t *)spec, k, v)
		if (strcmp(k, "benches") && strcmp(k, "params") && strcmp(k, "set") &&
		    strcmp(k, "topology"))
			json_object_set(scope, k, v);
	rc = kb__json_read_opts(scope, "jobs threads data argv", &jo, err);
	free(jo.argv);
	json_decref(scope);
	if (rc)
		return rc;
	so.jobs = (unsigned)jo.jobs;
	so.threads = json_object_get(spec, "threads") ? jo.threads : 1;
	so.data = jo.data;
	so.registry = reg;
	if ((rc = kb_sweep_create(&s, &so, err)))
		return rc;
	if (json_is_string(benches)) {
		rc = kb_sweep_add_bench(s, json_string_value(benches), err);
	} else if (json_is_array(benches) && json_array_size(benches)) {
		size_t i;

		json_array_foreach(benches, i, v)
			if (!rc)
				rc = json_is_string(v) ? kb_sweep_add_bench(s, json_string_value(v), err)
						       : kb__err(err, KB_ETYPE, "sweep benches: expected names");
	} else {
		rc = kb__err(err, KB_EINVAL, "sweep: \"benches\" must name at least one bench");
	}
	if (!rc)
		rc = add_lists(s, json_object_get(spec, "params"), 0, err);
	if (!rc)
		rc = add_lists(s, json_object_get(spec, "set"), 1, err);
	if (!rc && json_object_get(spec, "topology")) {
		const json_t *t = json_object_get(spec, "topology");

		rc = json_is_object(t) ? kb__json_topology_from(&topo, t, err)
				       : kb__err(err, KB_ETYPE, "sweep topology: expected an object");
		if (!rc)
			rc = kb_sweep_set_topology(s, topo, err);
		kb_topology_destroy(topo);
	}
	if (rc) {
		kb_sweep_destroy(s);
		return rc;
	}
	*out = s;
	return KB_OK;
}

KB_API int kb_sweep_run_json(const char *sweep_json, kb_json_cb on_row, void *payload,
			     kb_error *err)
{
	return kb_registry_sweep_json(NULL, sweep_json, on_row, payload, err);
}

KB_API int kb_registry_sweep_json(const kb_registry *reg, const char *sweep_json,
				  kb_json_cb on_row, void *payload, kb_error *err)
{
	row_relay relay = { NULL, on_row, payload, 0 };
	kb_sweep *s = NULL;
	json_t *spec;
	int rc;

	kb_error_clear(err);
	if (!(spec = kb__json_parse_object(sweep_json, "sweep", err)))
		return err ? err->code : KB_EPARSE;
	rc = build_sweep(&s, reg, spec, err);
	json_decref(spec);
	if (rc)
		return rc;
	relay.s = s;
	rc = kb_sweep_run(s, relay_row, &relay, err);
	if (relay.oom)
		rc = kb__err(err, KB_ENOMEM, "out of memory formatting a sweep row");
	kb_sweep_destroy(s);
	return rc;
}
