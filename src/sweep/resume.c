/*
 * Resume: the rows an earlier (maybe interrupted) sweep left in its output,
 * read strictly, so that every row kept is verified (issue 18 §4).
 *
 * A sweep killed mid-write leaves at most one incomplete line at the end
 * (no final newline): it is left out, and *keep_len says where the valid
 * part ends. Anything else that is not a well-formed row of a point of this
 * sweep is an error naming the file and the line: a cell count, a quote in
 * the middle of a CSV cell, a NUL byte, a number that is not finite, a SHA
 * that is not 64 hex digits, a status other than "ok" or "error", JSON that
 * does not parse (jansson, trailing junk included), a member missing or
 * extra, a second row for one point. Nothing is silently dropped or run
 * again.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "sweep/sweep_impl.h"

/* ---- point lookup ------------------------------------------------------ */

/* "bench\x1fvalue\x1fvalue..." (CSV) or "bench\x1f<canonical keys JSON>"
 * (JSONL) of every point, sorted, for bsearch. */
typedef struct point_key {
	char *key;
	size_t index;
} point_key;

typedef struct rctx {
	const kb_sweep *s;
	const char *name;
	kb_sweep_format fmt;
	int data;
	size_t n_figs;
	point_key *pts;
	size_t n_pts;
	sweep_kept *rows;
	size_t line;
	kb_error *err;
} rctx;

static char *join_key(const char *bench, size_t n, const char *const *values)
{
	size_t len = strlen(bench) + 1;
	char *k, *p;

	for (size_t i = 0; i < n; i++)
		len += strlen(values[i]) + 1;
	if (!(k = malloc(len)))
		return NULL;
	p = stpcpy(k, bench);
	for (size_t i = 0; i < n; i++) {
		*p++ = '\x1f';
		p = stpcpy(p, values[i]);
	}
	return k;
}

/* Typed key values compare as jansson values: sorted members, 17 digits. */
static char *canonical(const json_t *keys)
{
	return json_dumps(keys, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const point_key *)a)->key, ((const point_key *)b)->key);
}

static int lookup_build(rctx *c)
{
	size_t total = kb_sweep_points(c->s);
	const char **values = calloc(c->s->n_keys + 1, sizeof(*values));

	c->pts = calloc(total + 1, sizeof(*c->pts));
	if (!c->pts || !values) {
		free(values);
		return kb__err(c->err, KB_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < total; i++) {
		const char *bench = kb__sweep_decode(c->s, i, values);

		if (c->fmt == KB_SWEEP_JSONL) {
			json_t *keys = kb__sweep_keys_json(c->s, bench, values);
			char *t = keys ? canonical(keys) : NULL;

			c->pts[i].key = t ? join_key(bench, 1, (const char *const *)&t) : NULL;
			free(t);
			json_decref(keys);
		} else {
			c->pts[i].key = join_key(bench, c->s->n_keys, values);
		}
		c->pts[i].index = i;
		c->n_pts++;
		if (!c->pts[i].key) {
			free(values);
			return kb__err(c->err, KB_ENOMEM, "out of memory");
		}
	}
	free(values);
	qsort(c->pts, c->n_pts, sizeof(*c->pts), cmp_key);
	return 0;
}

static void lookup_free(rctx *c)
{
	for (size_t i = 0; i < c->n_pts; i++)
		free(c->pts[i].key);
	free(c->pts);
}

static size_t lookup_find(const rctx *c, const char *bench, size_t n, const char *const *values)
{
	point_key probe = { join_key(bench, n, values), 0 };
	const point_key *hit = probe.key ? bsearch(&probe, c->pts, c->n_pts, sizeof(*c->pts), cmp_key)
					 : NULL;

	free(probe.key);
	return hit ? hit->index : (size_t)-1;
}

/* ---- checks shared by both formats ------------------------------------- */

static int bad(rctx *c, const char *fmt, ...) KB_PRINTF(2, 3);

/* A malformed row: KB_EPARSE with "FILE:LINE: " and the reason. */
static int bad(rctx *c, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kb__err_at(c->err, KB_EPARSE, c->name, (int)c->line, 0, "%s:%zu: %s", c->name,
			  c->line, msg);
}

/* A figure as the writer gives it: a plain finite decimal number. */
static int figure_ok(const char *t)
{
	char *end;
	double v;

	if (!*t || strspn(t, "+-0123456789.eE") != strlen(t))
		return 0;
	v = strtod(t, &end);
	return !*end && isfinite(v);
}

static int sha_ok(const char *t)
{
	return strlen(t) == 64 && strspn(t, "0123456789abcdef") == 64;
}

/* Figures that every ok row has (the others may be empty: no tiles, no data). */
static int figure_required(size_t k)
{
	return k == KB_SWEEP_FIG_SIM_NS || k == KB_SWEEP_FIG_COMMANDS ||
	       k == KB_SWEEP_FIG_EVENTS || k == KB_SWEEP_FIG_WALL_S;
}

/*
 * Verifies the cells of one row (figures as text, "" for absent/null) and
 * keeps it as point i: [start, end) is its text.
 */
static int take_row(rctx *c, size_t i, const char *bench, char figs[KB_SWEEP_N_FIGS][40],
		    const char *sha, const char *status, const char *error, const char *start,
		    const char *end)
{
	int ok = strcmp(status, "ok") == 0;
	sweep_kept *r;

	if (i == (size_t)-1)
		return kb__err_at(c->err, KB_EPARSE, c->name, (int)c->line, 0,
				  "%s:%zu: this row is not a point of this sweep (bench '%.100s'); "
				  "use another --out file or the same lists", c->name, c->line, bench);
	r = &c->rows[i];
	if (r->present)
		return kb__err_at(c->err, KB_EPARSE, c->name, (int)c->line, 0,
				  "%s:%zu: a second row for the point of bench '%.100s' (an edited "
				  "key value?); remove one of them", c->name, c->line, bench);
	if (!ok && strcmp(status, "error") != 0)
		return bad(c, "status '%.40s' is neither 'ok' nor 'error'", status);
	for (size_t k = 0; k < c->n_figs; k++) {
		if (ok && figs[k][0] && !figure_ok(figs[k]))
			return bad(c, "figure '%.40s' of an ok row is not a finite number", figs[k]);
		if (ok && !figs[k][0] && figure_required(k))
			return bad(c, "an ok row without its %s", kb_sweep_fig_name((int)k));
		if (!ok && figs[k][0])
			return bad(c, "an error row with a figure ('%.40s')", figs[k]);
	}
	if (ok && !sha_ok(sha))
		return bad(c, "oplog_sha256 '%.70s' is not 64 hexadecimal digits", sha);
	if (!ok && *sha)
		return bad(c, "an error row with an oplog_sha256 ('%.70s')", sha);
	if (ok && *error)
		return bad(c, "an ok row with an error message ('%.60s')", error);
	if (!ok && !*error)
		return bad(c, "an error row without its message");
	if (!(r->text = strndup(start, (size_t)(end - start))))
		return kb__err(c->err, KB_ENOMEM, "out of memory");
	r->present = 1;
	r->ok = (unsigned char)ok;
	for (size_t k = 0; k < KB_SWEEP_N_FIGS; k++)
		r->fig[k] = k < c->n_figs && figs[k][0] ? strtod(figs[k], NULL) : NAN;
	return 0;
}

/* ---- CSV ------------------------------------------------------------------ */

typedef struct cells {
	char **v;
	size_t n;
} cells;

static void cells_free(cells *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i]);
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

/*
 * Splits the record at p strictly (RFC 4180: a quote opens a cell or closes
 * it before ',' or the newline, "" inside quotes is a quote, no CR outside
 * quotes). *next: after the record's newline; NULL when the data ends first
 * (a cut last record). Returns 0, or a message for the error.
 */
static const char *csv_record(const char *p, const char *end, cells *f, const char **next)
{
	size_t cap = 16, len = 0, lcap = 64;
	char *cell = malloc(lcap);
	int quoted = 0, at_start = 1, closed = 0;

	*next = NULL;
	f->v = calloc(cap, sizeof(char *));
	if (!cell || !f->v) {
		free(cell);
		return "out of memory";
	}
	for (; p < end; p++) {
		char ch = *p;

		if (ch == '\0') {
			free(cell);
			return "a NUL byte in the row";
		}
		if (len + 2 > lcap) {
			char *nc = realloc(cell, lcap *= 2);

			if (!nc) {
				free(cell);
				return "out of memory";
			}
			cell = nc;
		}
		if (quoted) {
			if (ch == '"' && p + 1 < end && p[1] == '"')
				cell[len++] = *p++;
			else if (ch == '"')
				quoted = 0, closed = 1;
			else
				cell[len++] = ch;
			continue;
		}
		if (ch == '"' && at_start) {
			quoted = 1;
			at_start = 0;
			continue;
		}
		if (ch == ',' || ch == '\n') {
			if (f->n + 1 >= cap) {
				char **nv = realloc(f->v, (cap *= 2) * sizeof(char *));

				if (!nv) {
					free(cell);
					return "out of memory";
				}
				f->v = nv;
			}
			cell[len] = '\0';
			if (!(f->v[f->n] = strdup(cell))) {
				free(cell);
				return "out of memory";
			}
			f->n++;
			len = 0;
			at_start = 1;
			closed = 0;
			if (ch == '\n') {
				*next = p + 1;
				free(cell);
				return NULL;
			}
			continue;
		}
		if (ch == '"' || closed) {
			free(cell);
			return ch == '"' ? "a quote inside an unquoted cell"
					 : "text after the closing quote of a cell";
		}
		if (ch == '\r') {
			free(cell);
			return "a carriage return outside quotes";
		}
		cell[len++] = ch;
		at_start = 0;
	}
	free(cell);
	return NULL;  /* the data ended inside the record: cut */
}

static int csv_rows(rctx *c, const char *data, const char *p, const char *end,
		    size_t *keep_len)
{
	size_t want = 1 + c->s->n_keys + c->n_figs + 3;

	while (p < end) {
		cells f = { NULL, 0 };
		const char *next, *why = csv_record(p, end, &f, &next);
		int rc = 0;

		if (why && strcmp(why, "out of memory") == 0)
			rc = kb__err(c->err, KB_ENOMEM, "out of memory");
		else if (why)
			rc = bad(c, "malformed row: %s", why);
		else if (!next && memchr(p, '\n', (size_t)(end - p)))
			rc = bad(c, "malformed row: a quoted cell is never closed");
		else if (!next)
			;  /* the last line, cut by a kill: left out */
		else if (f.n != want) {
			rc = bad(c, "malformed row (%zu cells, expected %zu)", f.n, want);
		} else {
			char figs[KB_SWEEP_N_FIGS][40];
			size_t i = lookup_find(c, f.v[0], c->s->n_keys, (const char *const *)f.v + 1);

			for (size_t k = 0; k < KB_SWEEP_N_FIGS; k++)
				snprintf(figs[k], sizeof(figs[k]), "%.39s",
					 k < c->n_figs ? f.v[1 + c->s->n_keys + k] : "");
			for (size_t k = 0; k < c->n_figs && !rc; k++)
				if (strlen(f.v[1 + c->s->n_keys + k]) >= 40)
					rc = bad(c, "figure '%.40s...' is too long", f.v[1 + c->s->n_keys + k]);
			if (!rc)
				rc = take_row(c, i, f.v[0], figs, f.v[want - 3], f.v[want - 2],
					      f.v[want - 1], p, next);
		}
		cells_free(&f);
		if (rc)
			return rc;
		if (!next)
			break;
		for (const char *q = p; q < next; q++)
			c->line += *q == '\n';
		p = next;
		*keep_len = (size_t)(p - data);
	}
	return 0;
}

static int csv_file(rctx *c, const char *data, size_t len, size_t *keep_len)
{
	char *header = NULL;
	size_t hlen;
	int rc = kb_sweep_header(&header, c->s, KB_SWEEP_CSV, c->data, c->err);

	if (rc)
		return rc;
	hlen = strlen(header);
	*keep_len = 0;
	if (len < hlen && memcmp(data, header, len) == 0)
		goto done;  /* killed while writing the header: start again */
	if (len < hlen || memcmp(data, header, hlen) != 0) {
		rc = kb__err_at(c->err, KB_EPARSE, c->name, 1, 0,
				"%s: its header does not match this sweep's columns (expected: "
				"%.*s)", c->name, (int)(hlen - 1), header);
		goto done;
	}
	*keep_len = hlen;
	c->line = 2;
	rc = csv_rows(c, data, data + hlen, data + len, keep_len);
done:
	free(header);
	return rc;
}

/* ---- JSON Lines ---------------------------------------------------------- */

/* The members of a row, in the order the writer gives them. */
static int jsonl_members_ok(const rctx *c, const json_t *o)
{
	size_t n = 5 + c->n_figs;  /* bench, keys, figures, oplog_sha256, status, error */

	if (json_object_size(o) != n)
		return 0;
	for (size_t k = 0; k < c->n_figs; k++)
		if (!json_object_get(o, kb_sweep_fig_name((int)k)))
			return 0;
	return json_object_get(o, "bench") && json_object_get(o, "keys") &&
	       json_object_get(o, "oplog_sha256") && json_object_get(o, "status") &&
	       json_object_get(o, "error");
}

static int keys_match(const rctx *c, const json_t *keys)
{
	const char *k;
	json_t *v;
	size_t i = 0;

	if (!json_is_object(keys) || json_object_size(keys) != c->s->n_keys)
		return 0;
	json_object_foreach((json_t *)keys, k, v) {
		if (i >= c->s->n_keys || strcmp(k, c->s->keys[i].name) != 0 ||
		    !(json_is_number(v) || json_is_string(v)))
			return 0;
		i++;
	}
	return 1;
}

static int jsonl_line(rctx *c, const char *p, const char *nl)
{
	json_error_t je;
	json_t *o = NULL;
	char figs[KB_SWEEP_N_FIGS][40], *key = NULL;
	const char *bench, *status, *error, *sha;
	const json_t *jsha;
	size_t i;
	int rc = 0;

	if (memchr(p, '\0', (size_t)(nl - p)))
		return bad(c, "malformed row: a NUL byte in the line");
	o = json_loadb(p, (size_t)(nl - p), JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		rc = bad(c, "malformed row: %s", je.text);
		goto done;
	}
	bench = json_string_value(json_object_get(o, "bench"));
	status = json_string_value(json_object_get(o, "status"));
	error = json_string_value(json_object_get(o, "error"));
	jsha = json_object_get(o, "oplog_sha256");
	if (!json_is_object(o) || !jsonl_members_ok(c, o) || !bench || !status || !error ||
	    !(json_is_string(jsha) || json_is_null(jsha))) {
		rc = bad(c, "malformed row: not a row object of this sweep's members");
		goto done;
	}
	if (!keys_match(c, json_object_get(o, "keys"))) {
		rc = bad(c, "the row's keys do not match this sweep's");
		goto done;
	}
	sha = json_is_string(jsha) ? json_string_value(jsha) : "";
	for (size_t k = 0; k < KB_SWEEP_N_FIGS && !rc; k++) {
		const json_t *v = k < c->n_figs ? json_object_get(o, kb_sweep_fig_name((int)k)) : NULL;

		figs[k][0] = '\0';
		if (!v || json_is_null(v))
			continue;
		if (!json_is_number(v))
			rc = bad(c, "figure %s is not a number", kb_sweep_fig_name((int)k));
		else
			snprintf(figs[k], sizeof(figs[k]), "%.17g", json_number_value(v));
	}
	if (rc)
		goto done;
	if (!(key = canonical(json_object_get(o, "keys")))) {
		rc = kb__err(c->err, KB_ENOMEM, "out of memory");
		goto done;
	}
	i = lookup_find(c, bench, 1, (const char *const *)&key);
	rc = take_row(c, i, bench, figs, sha, status, error, p, nl + 1);
done:
	free(key);
	json_decref(o);
	return rc;
}

static int jsonl_file(rctx *c, const char *data, size_t len, size_t *keep_len)
{
	const char *p = data, *end = data + len, *nl;
	int rc = 0;

	*keep_len = 0;
	c->line = 1;
	for (; rc == 0 && p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		if ((rc = jsonl_line(c, p, nl)))
			break;
		*keep_len = (size_t)(nl + 1 - data);
		c->line++;
	}
	return rc;
}

int kb__sweep_resume_parse(const kb_sweep *s, const char *name, const char *data, size_t len,
			   kb_sweep_format fmt, int data_mode, sweep_kept *rows,
			   size_t *keep_len, kb_error *err)
{
	rctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.s = s;
	c.name = name;
	c.fmt = fmt;
	c.data = data_mode;
	c.n_figs = kb_sweep_n_figs(data_mode);
	c.rows = rows;
	c.err = err;
	*keep_len = 0;
	rc = lookup_build(&c);
	if (!rc)
		rc = fmt == KB_SWEEP_CSV ? csv_file(&c, data, len, keep_len)
					 : jsonl_file(&c, data, len, keep_len);
	lookup_free(&c);
	return rc;
}
