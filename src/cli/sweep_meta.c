/* OUT.meta.json: the provenance of a sweep (see sweep_meta.h). */
#include "cli/sweep_meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static char *meta_path(const char *out)
{
	size_t n = strlen(out) + sizeof(".meta.json");
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s.meta.json", out);
	return p;
}

static void string_list(FILE *f, const char *const *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		cli_json_string(f, v[i]);
	}
	fputc(']', f);
}

/* The definition as the JSON value recorded under "params". */
static char *definition(const cli_sweep_def *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs("{\"benches\":", f);
	string_list(f, d->benches, d->n_benches);
	fputs(",\"param\":", f);
	string_list(f, d->params, d->n_params);
	fputs(",\"set\":", f);
	string_list(f, d->sets, d->n_sets);
	fprintf(f, ",\"jobs\":%u,\"threads\":%d,\"data\":%s}", d->jobs, d->threads,
		d->data ? "true" : "false");
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int cli_sweep_meta_write(const char *out, const kb_topology *base, const cli_sweep_def *d)
{
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;
	char *def = definition(d), *meta = NULL, *path = meta_path(out);
	kb_error err;
	FILE *f = NULL;
	int rc = 0;

	po.topology = base;
	po.params_json = def;
	po.threads = d->threads;
	po.argc = cli_argc;
	po.argv = cli_argv;
	if (!def || !path) {
		rc = cli_error("out of memory");
		goto done;
	}
	if ((rc = kb_provenance_json(&meta, &po, &err))) {
		rc = cli_kb_error(&err, rc);
		goto done;
	}
	errno = 0;
	f = fopen(path, "w");
	if (!f || fputs(meta, f) < 0 || fputc('\n', f) < 0 || fflush(f) != 0)
		rc = cli_error("%s: could not write the sweep's provenance: %s", path,
			       strerror(errno ? errno : EIO));
done:
	if (f && fclose(f) != 0 && !rc)
		rc = cli_error("%s: could not write the sweep's provenance", path);
	kb_free(meta);
	free(def);
	free(path);
	return rc;
}

/* The string value of "key" in a flat JSON text we wrote ("" when absent). */
static void field(const char *text, const char *key, char *out, size_t n)
{
	char pat[64];
	const char *p, *end;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = strstr(text, pat);
	if (!p)
		return;
	p += strlen(pat);
	end = strchr(p, '"');
	if (end && (size_t)(end - p) < n) {
		memcpy(out, p, (size_t)(end - p));
		out[end - p] = '\0';
	}
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f)
		return NULL;
	do {
		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = len + 8192);

			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, 4096, f);
		len += got;
	} while (got > 0);
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

int cli_sweep_meta_check(const char *out, const kb_topology *base, int force)
{
	char *path = meta_path(out), *text = path ? read_all(path) : NULL;
	char hash[65], old_hash[80], old_version[64];
	kb_error err;
	int rc = 0, same;

	if (!text) {
		free(path);
		return 0;  /* no record: an output of an older kernbench */
	}
	if ((rc = kb_topology_sha256(base, hash, &err))) {
		rc = cli_kb_error(&err, rc);
		goto done;
	}
	field(text, "topology_sha256", old_hash, sizeof(old_hash));
	field(text, "kernbench_version", old_version, sizeof(old_version));
	same = strcmp(old_hash, hash) == 0 && strcmp(old_version, kb_version()) == 0;
	if (!same && !force)
		rc = cli_error("--resume: %s records another sweep (topology %.12s, version %s) than "
			       "this one (topology %.12s, version %s); its rows would not be "
			       "comparable. Use --force to resume anyway, or another --out",
			       path, old_hash, old_version, hash, kb_version());
	else if (!same)
		cli_warn("--resume --force: %s records topology %.12s, version %s; continuing with "
			 "topology %.12s, version %s", path, old_hash, old_version, hash, kb_version());
done:
	free(text);
	free(path);
	return rc;
}
