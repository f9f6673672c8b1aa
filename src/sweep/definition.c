/*
 * What defines a sweep (its points and the meaning of its rows), its hash,
 * and the record FILE.meta.json a writer leaves beside an output: the
 * provenance of kb_provenance_json with the sweep's definition as "params"
 * ({"benches", "param": ["NAME=V1,V2"], "set": [...], "jobs", "threads",
 * "data"}). Resume compares the record with the sweep it continues.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/sha256.h"
#include "kernbench/json.h"
#include "sweep/sweep_impl.h"

/* The base topology's hash (the embedded default when none was set). */
static int topo_hash(const kb_sweep *s, char hex[65], kb_error *err)
{
	kb_topology *def = NULL;
	int rc = s->topo ? 0 : kb_topology_default(&def, err);

	if (!rc)
		rc = kb_topology_sha256(s->topo ? s->topo : def, hex, err);
	kb_topology_destroy(def);
	return rc;
}

static json_t *string_array(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *definition(const kb_sweep *s, kb_error *err)
{
	json_t *o = json_object(), *keys = json_array();
	char hex[65];
	int bad = !o || !keys;

	if (topo_hash(s, hex, err)) {
		json_decref(o);
		json_decref(keys);
		return NULL;
	}
	for (size_t i = 0; !bad && i < s->n_keys; i++) {
		json_t *k = json_object();

		bad |= !k;
		bad |= json_object_set_new(k, "name", json_string(s->keys[i].name));
		bad |= json_object_set_new(k, "kind", json_string(s->keys[i].is_set ? "set" : "param"));
		bad |= json_object_set_new(k, "values", string_array(s->keys[i].values,
								     s->keys[i].n_values));
		bad |= json_array_append_new(keys, k);
	}
	bad |= json_object_set_new(o, "kernbench_version", json_string(kb_version()));
	bad |= json_object_set_new(o, "benches", string_array(s->benches, s->n_benches));
	bad |= json_object_set_new(o, "keys", keys);
	bad |= json_object_set_new(o, "threads", json_integer(s->opt.threads));
	bad |= json_object_set_new(o, "data", json_boolean(s->opt.data));
	bad |= json_object_set_new(o, "topology_sha256", json_string(hex));
	if (bad) {
		json_decref(o);
		kb__err(err, KB_ENOMEM, "out of memory");
		return NULL;
	}
	return o;
}

KB_API int kb_sweep_definition_json(char **out, const kb_sweep *s, kb_error *err)
{
	json_t *o;

	kb_error_clear(err);
	if (!out || !s)
		return kb__err(err, KB_EINVAL, "kb_sweep_definition_json: NULL argument");
	if (!(o = definition(s, err)))
		return err && err->code ? err->code : KB_ENOMEM;
	*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return *out ? 0 : kb__err(err, KB_ENOMEM, "out of memory");
}

KB_API int kb_sweep_definition_sha256(const kb_sweep *s, char hex[65], kb_error *err)
{
	kb_sha256 h;
	char *text = NULL;
	int rc = kb_sweep_definition_json(&text, s, err);

	if (rc)
		return rc;
	kb__sha256_init(&h);
	kb__sha256_update(&h, text, strlen(text));
	kb__sha256_hex(&h, hex);
	free(text);
	return 0;
}

/* A member's value as short text for a message. */
static void brief(const json_t *v, char *buf, size_t n)
{
	char *t = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

	snprintf(buf, n, "%s", t ? t : "(none)");
	if (t && strlen(t) >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
	free(t);
}

KB_API int kb_sweep_definition_compare(const char *mine, const char *theirs, kb_error *err)
{
	static const char *const members[] = {
		"kernbench_version", "topology_sha256", "benches", "keys", "threads", "data", NULL
	};
	json_t *a = mine ? json_loads(mine, 0, NULL) : NULL;
	json_t *b = theirs ? json_loads(theirs, 0, NULL) : NULL;
	int rc = 0;

	kb_error_clear(err);
	if (!json_is_object(a) || !json_is_object(b))
		rc = kb__err(err, KB_EPARSE, "kb_sweep_definition_compare: not a definition");
	for (size_t i = 0; !rc && members[i]; i++) {
		const json_t *x = json_object_get(a, members[i]), *y = json_object_get(b, members[i]);
		char bx[200], by[200];

		if (x && y && json_equal(x, y))
			continue;
		brief(x, bx, sizeof(bx));
		brief(y, by, sizeof(by));
		rc = kb__err(err, KB_EINVAL, "%s: %s here, %s there", members[i], bx, by);
	}
	json_decref(a);
	json_decref(b);
	return rc;
}

/* ---- FILE.meta.json ----------------------------------------------------- */

char *kb__sweep_meta_path(const char *out)
{
	size_t n = strlen(out) + sizeof(".meta.json");
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s.meta.json", out);
	return p;
}

/* "NAME=V1,V2" of each key of one kind. */
static json_t *assignments(const kb_sweep *s, int is_set)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->n_keys; i++) {
		const sweep_key *k = &s->keys[i];
		size_t len = strlen(k->name) + 2;
		char *t, *p;

		if (k->is_set != is_set)
			continue;
		for (size_t j = 0; j < k->n_values; j++)
			len += strlen(k->values[j]) + 1;
		if (!(t = malloc(len))) {
			json_decref(a);
			return NULL;
		}
		p = stpcpy(stpcpy(t, k->name), "=");
		for (size_t j = 0; j < k->n_values; j++)
			p = stpcpy(stpcpy(p, j ? "," : ""), k->values[j]);
		json_array_append_new(a, json_string(t));
		free(t);
	}
	return a;
}

static char *record_params(const kb_sweep *s)
{
	json_t *o = json_object();
	char *t;

	json_object_set_new(o, "benches", string_array(s->benches, s->n_benches));
	json_object_set_new(o, "param", assignments(s, 0));
	json_object_set_new(o, "set", assignments(s, 1));
	json_object_set_new(o, "jobs", json_integer(s->opt.jobs));
	json_object_set_new(o, "threads", json_integer(s->opt.threads));
	json_object_set_new(o, "data", json_boolean(s->opt.data));
	t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return t;
}

int kb__sweep_meta_write(const kb_sweep *s, const char *out, int argc, const char *const *argv,
			 kb_error *err)
{
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;
	char *params = record_params(s), *meta = NULL, *path = kb__sweep_meta_path(out);
	FILE *f = NULL;
	int rc = 0;

	po.topology = s->topo;
	po.params_json = params;
	po.threads = s->opt.threads;
	po.argc = argc;
	po.argv = argv;
	if (!params || !path) {
		rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto done;
	}
	if ((rc = kb_provenance_json(&meta, &po, err)))
		goto done;
	errno = 0;
	f = fopen(path, "w");
	if (!f || fputs(meta, f) < 0 || fputc('\n', f) < 0 || fflush(f) != 0)
		rc = kb__err(err, KB_EIO, "%s: could not write the sweep's provenance: %s", path,
			     strerror(errno ? errno : EIO));
done:
	if (f && fclose(f) != 0 && !rc)
		rc = kb__err(err, KB_EIO, "%s: could not write the sweep's provenance", path);
	free(meta);
	free(params);
	free(path);
	return rc;
}

/* Names of the keys of one kind in a record's "param"/"set" list. */
static json_t *key_names(const json_t *list)
{
	json_t *a = json_array();
	size_t i;
	const json_t *v;

	json_array_foreach(list, i, v) {
		const char *t = json_string_value(v), *eq = t ? strchr(t, '=') : NULL;

		json_array_append_new(a, eq ? json_stringn(t, (size_t)(eq - t)) : json_null());
	}
	return a;
}

/* The part of a record that must match to resume: version, topology, the
 * bench list, the swept keys, data mode. Value lists may grow: every kept
 * row must be a point of the new sweep anyway (resume.c). */
static json_t *resume_identity(const json_t *rec)
{
	const json_t *p = json_object_get(rec, "params");
	json_t *o = json_object();

	json_object_set(o, "kernbench_version", json_object_get(rec, "kernbench_version"));
	json_object_set(o, "topology_sha256", json_object_get(rec, "topology_sha256"));
	json_object_set(o, "benches", json_object_get(p, "benches"));
	json_object_set_new(o, "param_keys", key_names(json_object_get(p, "param")));
	json_object_set_new(o, "set_keys", key_names(json_object_get(p, "set")));
	json_object_set(o, "data", json_object_get(p, "data"));
	return o;
}

int kb__sweep_meta_check(const kb_sweep *s, const char *out, int force, char **warning,
			 kb_error *err)
{
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;
	char *path = kb__sweep_meta_path(out), *params = record_params(s), *meta = NULL;
	json_t *old = NULL, *now = NULL, *a = NULL, *b = NULL;
	const char *k;
	json_t *v;
	FILE *f;
	int rc = 0;

	*warning = NULL;
	if (!path || !params) {
		rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto done;
	}
	if (!(f = fopen(path, "r")))
		goto done;  /* no record: an output of an older kernbench */
	old = json_loadf(f, 0, NULL);
	fclose(f);
	po.topology = s->topo;
	po.params_json = params;
	if ((rc = kb_provenance_json(&meta, &po, err)))
		goto done;
	now = json_loads(meta, 0, NULL);
	a = resume_identity(old);
	b = resume_identity(now);
	json_object_foreach(b, k, v) {
		char there[200], here[200], msg[600];

		if (json_equal(v, json_object_get(a, k)))
			continue;
		brief(json_object_get(a, k), there, sizeof(there));
		brief(v, here, sizeof(here));
		snprintf(msg, sizeof(msg), "%s records another sweep (%s %s) than this one (%s %s)",
			 path, k, there, k, here);
		if (!force) {
			rc = kb__err(err, KB_ESTATE, "%s; its rows would not be comparable. Resume "
				     "with force (--force) to continue anyway, or write another file",
				     msg);
		} else if (!(*warning = strdup(msg))) {
			rc = kb__err(err, KB_ENOMEM, "out of memory");
		}
		break;
	}
done:
	json_decref(old);
	json_decref(now);
	json_decref(a);
	json_decref(b);
	free(meta);
	free(params);
	free(path);
	return rc;
}
