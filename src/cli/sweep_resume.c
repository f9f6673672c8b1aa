/*
 * --resume: read the rows an earlier (maybe interrupted) sweep left in its
 * output file, so that their points are skipped and their text is kept.
 *
 * A sweep killed mid-write leaves at most one incomplete row at the end (no
 * final newline, or for CSV an open quoted cell): it is ignored, and
 * *keep_len tells the caller where the valid part ends so the new rows can
 * be appended after it. Every complete row must be a point of the current
 * sweep: anything else (another sweep's file, a hand-edited row) is an error
 * rather than being silently dropped when the file is rewritten.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/sweep_out.h"

/* ---- point lookup ------------------------------------------------------ */

/* "bench\x1fvalue\x1fvalue..." of every point, sorted, for bsearch. */
typedef struct point_key {
	char *key;
	size_t index;
} point_key;

typedef struct lookup {
	point_key *v;
	size_t n;
	int typed;  /* JSONL: one value per point, the typed "keys" object text */
} lookup;

static char *join_key(const char *bench, size_t n, const char *const *values)
{
	size_t len = strlen(bench) + 1, i;
	char *k, *p;

	for (i = 0; i < n; i++)
		len += strlen(values[i]) + 1;
	k = malloc(len);
	if (!k)
		return NULL;
	p = stpcpy(k, bench);
	for (i = 0; i < n; i++) {
		*p++ = '\x1f';
		p = stpcpy(p, values[i]);
	}
	return k;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const point_key *)a)->key, ((const point_key *)b)->key);
}

static void lookup_free(lookup *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i].key);
	free(l->v);
}

static int lookup_build(lookup *l, const kb_sweep *s, size_t n_keys, const char *const *keys)
{
	size_t total = kb_sweep_points(s), i;

	l->n = 0;
	l->v = calloc(total + 1, sizeof(*l->v));
	if (!l->v)
		return -1;
	for (i = 0; i < total; i++) {
		const char *bench;
		const char *const *values;

		if (kb_sweep_point(s, i, &bench, &values, NULL))
			return -1;
		if (l->typed) {
			kb_sweep_row row = { i, total, bench, n_keys, keys, values, 0, "", NULL };
			char *typed = cli_out_typed_keys(s, &row);

			l->v[i].key = typed ? join_key(bench, 1, (const char *const *)&typed) : NULL;
			free(typed);
		} else {
			l->v[i].key = join_key(bench, n_keys, values);
		}
		l->v[i].index = i;
		if (!l->v[i].key)
			return -1;
		l->n++;
	}
	qsort(l->v, l->n, sizeof(*l->v), cmp_key);
	return 0;
}

/* Point index of (bench, values), or (size_t)-1. */
static size_t lookup_find(const lookup *l, const char *bench, size_t n, const char *const *values)
{
	point_key probe = { join_key(bench, l->typed ? 1 : n, values), 0 };
	const point_key *hit = probe.key ? bsearch(&probe, l->v, l->n, sizeof(*l->v), cmp_key) : NULL;

	free(probe.key);
	return hit ? hit->index : (size_t)-1;
}

/* ---- CSV records ------------------------------------------------------- */

typedef struct fields {
	char **v;
	size_t n;
} fields;

static void fields_free(fields *f)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		free(f->v[i]);
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

/* End of the CSV record at p (after its newline), or NULL when incomplete. */
static const char *csv_record_end(const char *p, const char *end)
{
	int quoted = 0;

	for (; p < end; p++) {
		if (*p == '"')
			quoted = !quoted;  /* a doubled quote toggles twice */
		else if (*p == '\n' && !quoted)
			return p + 1;
	}
	return NULL;
}

/* Splits the complete record [p, end) (newline included) into unquoted cells. */
static int csv_cells(const char *p, const char *end, fields *f)
{
	char *cell = malloc((size_t)(end - p) + 1);
	size_t len = 0;
	int quoted = 0;

	f->v = calloc((size_t)(end - p) + 2, sizeof(char *));
	if (!cell || !f->v)
		goto fail;
	for (; p < end; p++) {
		if (quoted && *p == '"' && p + 1 < end && p[1] == '"')
			cell[len++] = *p++;
		else if (*p == '"')
			quoted = !quoted;
		else if (!quoted && (*p == ',' || *p == '\n')) {
			cell[len] = '\0';
			if (!(f->v[f->n] = strdup(cell)))
				goto fail;
			f->n++;
			len = 0;
		} else
			cell[len++] = *p;
	}
	free(cell);
	return 0;
fail:
	free(cell);
	fields_free(f);
	return -1;
}

/* ---- the file ---------------------------------------------------------- */

/* Like --topology's 64 MiB, a bound on what --resume reads, so a file that
 * is not a sweep's (a link to /dev/zero, a huge log) fails with the figure
 * instead of exhausting memory. 256 MiB is a million rows and more. */
#define MAX_RESUME_BYTES ((size_t)256 << 20)

static int read_all(const char *path, char **data, size_t *len, int *exists)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	struct stat st;

	*exists = f != NULL;
	if (!f)
		return errno == ENOENT ? 0 : cli_error("%s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uintmax_t)st.st_size > MAX_RESUME_BYTES) {
		fclose(f);
		return cli_error("%s: %jd bytes, more than %zu, the most --resume reads; not a "
				 "sweep's output?", path, (intmax_t)st.st_size, MAX_RESUME_BYTES);
	}
	do {
		if (n + 65536 > cap) {
			char *nb = realloc(buf, cap = cap * 2 + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				return cli_error("out of memory");
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (n > MAX_RESUME_BYTES) {
			free(buf);
			fclose(f);
			return cli_error("%s: more than %zu bytes, the most --resume reads; not a "
					 "sweep's output?", path, MAX_RESUME_BYTES);
		}
	} while (got > 0);
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return cli_error("%s: %s", path, strerror(errno));
	}
	fclose(f);
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

typedef struct resume_ctx {
	const char *path;
	cli_out_format fmt;
	int data;  /* --data: the error figures are columns too */
	size_t n_keys;
	const char *const *keys;
	lookup points;
	cli_kept_row *rows;
	size_t line;
} resume_ctx;

static double fig_value(const char *s)
{
	return s && *s ? strtod(s, NULL) : NAN;
}

/* Records a parsed row of the old file (its text is [start, end)). */
static int take_row(resume_ctx *c, const char *bench, const char *const *values,
		    const char *const *figs, const char *status, const char *start,
		    const char *end)
{
	size_t i = lookup_find(&c->points, bench, c->n_keys, values), k;
	cli_kept_row *r;

	if (i == (size_t)-1)
		return cli_error("%s:%zu: this row is not a point of this sweep (bench '%s'); "
				 "use another --out file or the same lists", c->path, c->line, bench);
	r = &c->rows[i];
	/* Rows are verified, never silently kept, dropped or recomputed
	 * (issue 18 §4): a second row for one point (an edited key value), a
	 * status other than ok/error, or a figure of an ok row that is not a
	 * finite number is a named error with the line. */
	if (r->present)
		return cli_error("%s:%zu: a second row for the point of bench '%s' (an edited "
				 "key value?); remove one of them", c->path, c->line, bench);
	if (strcmp(status, "ok") != 0 && strcmp(status, "error") != 0)
		return cli_error("%s:%zu: status '%.40s' is neither 'ok' nor 'error'", c->path,
				 c->line, status);
	for (k = 0; k < cli_out_n_figs(c->data) && strcmp(status, "ok") == 0; k++) {
		char *e = NULL;
		double v = figs[k] && *figs[k] ? strtod(figs[k], &e) : 0;

		if (figs[k] && *figs[k] && (*e || !isfinite(v)))
			return cli_error("%s:%zu: figure '%.40s' of an ok row is not a finite number",
					 c->path, c->line, figs[k]);
	}
	r->text = strndup(start, (size_t)(end - start));
	if (!r->text)
		return cli_error("out of memory");
	r->present = 1;
	r->ok = strcmp(status, "ok") == 0;
	for (k = 0; k < CLI_N_FIG; k++)
		r->fig[k] = k < cli_out_n_figs(c->data) ? fig_value(figs[k]) : NAN;
	return 0;
}

static int csv_rows(resume_ctx *c, const char *data, size_t len, size_t *keep_len)
{
	const char *p = data + *keep_len, *end = data + len, *next;
	size_t want = 1 + c->n_keys + cli_out_n_figs(c->data) + 3;
	fields f = { NULL, 0 };
	int rc = 0;

	for (; rc == 0 && p < end && (next = csv_record_end(p, end)); p = next) {
		c->line++;
		if (csv_cells(p, next, &f))
			rc = cli_error("out of memory");
		else if (f.n != want)
			rc = cli_error("%s:%zu: malformed row (%zu cells, expected %zu)", c->path,
				       c->line, f.n, want);
		else
			rc = take_row(c, f.v[0], (const char *const *)f.v + 1,
				      (const char *const *)f.v + 1 + c->n_keys,
				      f.v[want - 2], p, next);
		fields_free(&f);
		if (rc == 0)
			*keep_len = (size_t)(next - data);
	}
	return rc;
}

static int csv_file(resume_ctx *c, const char *data, size_t len, size_t *keep_len)
{
	char *header = cli_out_csv_header(c->n_keys, c->keys, c->data);
	size_t hlen;
	int rc = 0;

	if (!header)
		return cli_error("out of memory");
	hlen = strlen(header);
	*keep_len = 0;
	if (len < hlen && memcmp(data, header, len) == 0)
		goto done;  /* killed while writing the header: start again */
	if (len < hlen || memcmp(data, header, hlen) != 0) {
		rc = cli_error("%s: its header does not match this sweep's columns "
			       "(expected: %.*s)", c->path, (int)(hlen - 1), header);
		goto done;
	}
	*keep_len = hlen;
	c->line = 1;
	rc = csv_rows(c, data, len, keep_len);
done:
	free(header);
	return rc;
}

/* ---- JSON Lines -------------------------------------------------------- */

static void json_skip_ws(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
		(*p)++;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char ch = s[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			v |= (unsigned)(ch - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Appends code point u (BMP) as UTF-8. */
static char *put_utf8(char *o, unsigned u)
{
	if (u < 0x80) {
		*o++ = (char)u;
	} else if (u < 0x800) {
		*o++ = (char)(0xc0 | (u >> 6));
		*o++ = (char)(0x80 | (u & 0x3f));
	} else {
		*o++ = (char)(0xe0 | (u >> 12));
		*o++ = (char)(0x80 | ((u >> 6) & 0x3f));
		*o++ = (char)(0x80 | (u & 0x3f));
	}
	return o;
}

/*
 * A JSON string at *p (on its opening quote), unescaped; advances *p past
 * the closing quote. NULL when malformed. Surrogate pairs are not joined:
 * the command only ever escapes control characters.
 */
static char *json_parse_string(const char **p)
{
	const char *s = *p;
	char *out, *o;

	if (*s++ != '"')
		return NULL;
	out = o = malloc(strlen(s) * 3 + 1);
	for (; out && *s && *s != '"'; s++) {
		unsigned u;

		if (*s != '\\') {
			*o++ = *s;
			continue;
		}
		s++;
		switch (*s) {
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'u':
			if (hex4(s + 1, &u) || u == 0)
				goto bad;
			o = put_utf8(o, u);
			s += 4;
			break;
		case '"': case '\\': case '/': *o++ = *s; break;
		default: goto bad;
		}
	}
	if (!out || *s != '"')
		goto bad;
	*o = '\0';
	*p = s + 1;
	return out;
bad:
	free(out);
	return NULL;
}

/* The members of one row object that resume needs. */
typedef struct jrow {
	char *bench, *status;
	char **keys, **values;
	size_t n;
	char *figs[CLI_N_FIG];
	char *typed_keys; /* the "keys" object's text, as cli_out_typed_keys gives it */
} jrow;

static void jrow_free(jrow *r)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		free(r->keys[i]);
		free(r->values[i]);
	}
	free(r->keys);
	free(r->values);
	for (i = 0; i < CLI_N_FIG; i++)
		free(r->figs[i]);
	free(r->bench);
	free(r->status);
	free(r->typed_keys);
	memset(r, 0, sizeof(*r));
}

/* A number or null (as NULL text) at *p. */
static int json_scalar(const char **p, char **out)
{
	const char *s = *p;

	if (strncmp(s, "null", 4) == 0) {
		*p = s + 4;
		*out = NULL;
		return 0;
	}
	while (*s && strchr("+-0123456789.eE", *s))
		s++;
	if (s == *p)
		return -1;
	*out = strndup(*p, (size_t)(s - *p));
	*p = s;
	return *out ? 0 : -1;
}

static int json_keys_members(const char **p, jrow *r, size_t cap);

/* The keys object: its members, and its text for the point lookup. */
static int json_keys(const char **p, jrow *r, size_t cap)
{
	const char *start;

	json_skip_ws(p);
	start = *p;
	if (json_keys_members(p, r, cap))
		return -1;
	free(r->typed_keys);
	r->typed_keys = strndup(start, (size_t)(*p - start));
	return r->typed_keys ? 0 : -1;
}

static int json_keys_members(const char **p, jrow *r, size_t cap)
{
	if (*(*p)++ != '{')
		return -1;
	json_skip_ws(p);
	if (**p == '}')
		return (*p)++, 0;
	for (;;) {
		if (r->n >= cap)
			return -1;
		json_skip_ws(p);
		if (!(r->keys[r->n] = json_parse_string(p)))
			return -1;
		json_skip_ws(p);
		if (*(*p)++ != ':')
			return -1;
		json_skip_ws(p);
		if (**p == '"')
			r->values[r->n] = json_parse_string(p);
		else if (json_scalar(p, &r->values[r->n]) || !r->values[r->n])
			return -1;
		if (!r->values[r->n++])
			return -1;
		json_skip_ws(p);
		if (**p == '}')
			return (*p)++, 0;
		if (*(*p)++ != ',')
			return -1;
	}
}

/* One member "name": value of a row object. */
static int json_member(const char **p, jrow *r, size_t cap)
{
	char *name;
	size_t k;
	int rc = -1;

	json_skip_ws(p);
	if (!(name = json_parse_string(p)))
		return -1;
	json_skip_ws(p);
	if (*(*p)++ != ':')
		goto done;
	json_skip_ws(p);
	for (k = 0; k < CLI_N_FIG && strcmp(name, cli_out_fig_names[k]); k++)
		;
	if (k < CLI_N_FIG)
		rc = json_scalar(p, &r->figs[k]);
	else if (strcmp(name, "keys") == 0)
		rc = json_keys(p, r, cap);
	else if (**p != '"') {
		char *ignored = NULL;

		rc = json_scalar(p, &ignored);
		free(ignored);
	} else {
		char *v = json_parse_string(p);

		rc = v ? 0 : -1;
		if (strcmp(name, "bench") == 0 && !r->bench)
			r->bench = v;
		else if (strcmp(name, "status") == 0 && !r->status)
			r->status = v;
		else
			free(v);
	}
done:
	free(name);
	return rc;
}

static int json_row(const char *p, jrow *r, size_t cap)
{
	r->keys = calloc(cap + 1, sizeof(char *));
	r->values = calloc(cap + 1, sizeof(char *));
	if (!r->keys || !r->values)
		return -1;
	json_skip_ws(&p);
	if (*p++ != '{')
		return -1;
	for (;;) {
		if (json_member(&p, r, cap))
			return -1;
		json_skip_ws(&p);
		if (*p == '}')
			break;
		if (*p++ != ',')
			return -1;
	}
	return r->bench && r->status ? 0 : -1;
}

static int keys_match(const resume_ctx *c, const jrow *r)
{
	size_t i;

	if (r->n != c->n_keys)
		return 0;
	for (i = 0; i < r->n; i++)
		if (strcmp(r->keys[i], c->keys[i]) != 0)
			return 0;
	return 1;
}

static int jsonl_line(resume_ctx *c, char *line, const char *start, const char *end)
{
	jrow r;
	int rc;

	memset(&r, 0, sizeof(r));
	if (json_row(line, &r, c->n_keys + 8))
		rc = cli_error("%s:%zu: malformed row", c->path, c->line);
	else if (!keys_match(c, &r))
		rc = cli_error("%s:%zu: the row's keys do not match this sweep's", c->path,
			       c->line);
	else
		rc = take_row(c, r.bench, (const char *const *)&r.typed_keys,
			      (const char *const *)r.figs, r.status, start, end);
	jrow_free(&r);
	return rc;
}

static int jsonl_file(resume_ctx *c, const char *data, size_t len, size_t *keep_len)
{
	const char *p = data, *end = data + len, *nl;
	int rc = 0;

	*keep_len = 0;
	for (; rc == 0 && p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		char *line = strndup(p, (size_t)(nl - p));

		c->line++;
		rc = line ? jsonl_line(c, line, p, nl + 1) : cli_error("out of memory");
		free(line);
		if (rc == 0)
			*keep_len = (size_t)(nl + 1 - data);
	}
	return rc;
}

int cli_out_read_resume(const char *path, cli_out_format fmt, const kb_sweep *s, size_t n_keys,
			const char *const *keys, int data_mode, cli_kept_row *rows,
			size_t *keep_len, int *exists)
{
	resume_ctx c = { path, fmt, data_mode, n_keys, keys, { NULL, 0, fmt == CLI_OUT_JSONL },
			 rows, 0 };
	char *data = NULL;
	size_t len = 0;
	int rc;

	*keep_len = 0;
	rc = read_all(path, &data, &len, exists);
	if (rc || !*exists)
		return rc;
	if (lookup_build(&c.points, s, n_keys, keys))
		rc = cli_error("out of memory");
	else if (fmt == CLI_OUT_CSV)
		rc = csv_file(&c, data, len, keep_len);
	else
		rc = jsonl_file(&c, data, len, keep_len);
	lookup_free(&c.points);
	free(data);
	return rc;
}
