/*
 * The row encoding: one jansson object per row (bench, typed key values,
 * status, error, result), and the texts made from it, CSV and JSON Lines.
 *
 * Key values are typed once, here: a key that is a parameter of the row's
 * bench has the parameter's type; another key is an integer when every value
 * of it in the sweep is one, a number when every value is, else a string.
 * The JSON Lines text writes a real key value in its shortest form that
 * reads back the same (0.1, not 0.10000000000000001) and keeps a real a real
 * (2.0); the figures have fixed formats (kernbench/sweep.h), the same in
 * both formats, so a row read back gives the same numbers as a fresh one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "bench/bench_impl.h"
#include "bench/params.h"
#include "kernbench/json.h"
#include "sweep/sweep_impl.h"

static const char *const fig_names[KB_SWEEP_N_FIGS] = {
	"sim_time_ns", "dispatch_per_tile_ns", "commands", "events", "wall_s",
	"max_abs_err", "max_rel_err"
};

KB_API const char *kb_sweep_fig_name(int fig)
{
	return fig >= 0 && fig < KB_SWEEP_N_FIGS ? fig_names[fig] : NULL;
}

KB_API size_t kb_sweep_n_figs(int data)
{
	return data ? KB_SWEEP_N_FIGS : KB_SWEEP_FIG_MAX_ABS_ERR;
}

/* ---- typed key values -------------------------------------------------- */

static int all_values(const sweep_key *k, int want_int)
{
	for (size_t i = 0; i < k->n_values; i++) {
		char *end;
		const char *v = k->values[i];

		if (want_int)
			(void)strtoll(v, &end, 10);
		else
			(void)strtod(v, &end);
		if (!*v || *end)
			return 0;
	}
	return 1;
}

static json_t *typed_value(const kb_sweep *s, size_t key, const char *bench, const char *v)
{
	const kb_bench_def *d = NULL;
	const kb_bench_info *b;
	const sweep_key *k = &s->keys[key];
	json_t *j = NULL;

	(void)kb_registry_lookup(kb__sweep_registry(s), bench, &d, NULL);
	b = d ? &d->info : NULL;
	for (size_t i = 0; !k->is_set && b && i < b->n_params; i++) {
		if (strcmp(b->params[i].name, k->name) == 0)
			return kb__param_json(b->params[i].type, v);
	}
	if (all_values(k, 1))
		j = json_integer(strtoll(v, NULL, 10));
	else if (all_values(k, 0) && isfinite(strtod(v, NULL)))
		j = json_real(strtod(v, NULL));
	return j ? j : json_string(v);
}

json_t *kb__sweep_keys_json(const kb_sweep *s, const char *bench, const char *const *values)
{
	json_t *keys = json_object();

	for (size_t i = 0; keys && i < s->n_keys; i++)
		if (json_object_set_new(keys, s->keys[i].name, typed_value(s, i, bench, values[i]))) {
			json_decref(keys);
			return NULL;
		}
	return keys;
}

/* ---- the encoding ------------------------------------------------------ */

int kb__sweep_row_check(const kb_sweep_row *row, const char *fn, kb_error *err)
{
	if (!row)
		return kb__err(err, KB_EINVAL, "%s: row is NULL", fn);
	if (row->size < KB_SWEEP_ROW_SIZE_V1)
		return kb__err(err, KB_EINVAL,
			       "%s: row->size is %zu, under the %zu bytes of the first kb_sweep_row "
			       "layout: initialise a row of your own with KB_SWEEP_ROW_INIT",
			       fn, row->size, (size_t)KB_SWEEP_ROW_SIZE_V1);
	if (!row->status && row->result && row->result->size < KB_RESULT_SIZE_V1)
		return kb__err(err, KB_EINVAL,
			       "%s: row->result->size is %zu, under the %zu bytes of the first "
			       "kb_result layout (KB_RESULT_INIT)",
			       fn, row->result->size, (size_t)KB_RESULT_SIZE_V1);
	return KB_OK;
}

json_t *kb__sweep_row_json(const kb_sweep *s, const kb_sweep_row *row)
{
	json_t *o = json_object(), *keys = kb__sweep_keys_json(s, row->bench, row->values);
	json_t *res = row->result && !row->status ? kb__result_json(row->result) : json_null();
	int bad = !o || !keys || !res;

	bad |= json_object_set_new(o, "index", json_integer((json_int_t)row->index));
	bad |= json_object_set_new(o, "total", json_integer((json_int_t)row->total));
	bad |= json_object_set_new(o, "bench", json_string(row->bench));
	bad |= json_object_set(o, "keys", keys);
	bad |= json_object_set_new(o, "status", json_integer(row->status));
	bad |= json_object_set_new(o, "error", json_string(row->error ? row->error : ""));
	bad |= json_object_set(o, "result", res);
	json_decref(keys);
	json_decref(res);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Lossless: reals with 17 digits, so a row that travels is the same row. */
char *kb__sweep_json_text(const json_t *o)
{
	return json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY |
			     JSON_REAL_PRECISION(17));
}

KB_API char *kb_sweep_row_to_json(const kb_sweep *s, const kb_sweep_row *row)
{
	json_t *o = s && !kb__sweep_row_check(row, "kb_sweep_row_to_json", NULL)
			    ? kb__sweep_row_json(s, row) : NULL;
	char *text = o ? kb__sweep_json_text(o) : NULL;

	json_decref(o);
	return text;
}

int kb__sweep_row_decode(const char *text, size_t index, int *status, char **error,
			 kb_result **res, kb_error *err)
{
	json_error_t je;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	const json_t *st = json_object_get(o, "status"), *idx = json_object_get(o, "index");
	const char *e = json_string_value(json_object_get(o, "error"));
	int rc = 0;

	*res = NULL;
	*error = NULL;
	if (!json_is_object(o) || !json_is_integer(st) || !e || !json_is_integer(idx) ||
	    (size_t)json_integer_value(idx) != index) {
		rc = kb__err(err, KB_EPARSE, "row of point %zu: not the row encoding of that point%s%s",
			     index, o ? "" : ": ", o ? "" : je.text);
		goto done;
	}
	*status = (int)json_integer_value(st);
	if (*status) {
		if (!(*error = strdup(*e ? e : kb_strerror(*status))))
			rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto done;
	}
	if (!(*res = malloc(sizeof(**res))))
		rc = kb__err(err, KB_ENOMEM, "out of memory");
	else if ((rc = kb__result_from_json(json_object_get(o, "result"), *res, err))) {
		free(*res);
		*res = NULL;
	}
done:
	json_decref(o);
	return rc;
}

/* ---- text -------------------------------------------------------------- */

void kb__sweep_figure_texts(const kb_sweep_row *row, char txt[KB_SWEEP_N_FIGS][40])
{
	const kb_result *r = row->result;

	for (int i = 0; i < KB_SWEEP_N_FIGS; i++)
		txt[i][0] = '\0';
	if (row->status || !r)
		return;
	snprintf(txt[KB_SWEEP_FIG_SIM_NS], 40, "%llu.%03llu",
		 (unsigned long long)r->sim_time_ps / 1000, (unsigned long long)r->sim_time_ps % 1000);
	if (isfinite(r->dispatch_per_tile_ns))
		snprintf(txt[KB_SWEEP_FIG_DISPATCH_PER_TILE_NS], 40, "%.3f", r->dispatch_per_tile_ns);
	snprintf(txt[KB_SWEEP_FIG_COMMANDS], 40, "%llu", (unsigned long long)r->commands);
	snprintf(txt[KB_SWEEP_FIG_EVENTS], 40, "%llu", (unsigned long long)r->events);
	snprintf(txt[KB_SWEEP_FIG_WALL_S], 40, "%.6f", isfinite(r->wall_s) ? r->wall_s : 0.0);
	if (isfinite(r->max_abs_err))
		snprintf(txt[KB_SWEEP_FIG_MAX_ABS_ERR], 40, "%.9g", r->max_abs_err);
	if (isfinite(r->max_rel_err))
		snprintf(txt[KB_SWEEP_FIG_MAX_REL_ERR], 40, "%.9g", r->max_rel_err);
}

void kb__sweep_csv_cell(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* A JSON string through jansson; bytes that are not UTF-8 (a message
 * quoting a mistyped value) as \u00XX, so the line stays JSON. */
static void json_str(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	json_decref(j);
	if (t) {
		fputs(t, f);
		free(t);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04X", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A real in its shortest form that reads back the same, still a real. */
static void short_real(FILE *f, double v)
{
	char buf[64];
	int prec;

	for (prec = 1; prec < 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	snprintf(buf, sizeof(buf), "%.*g", prec, v);
	fputs(buf, f);
	if (!strpbrk(buf, ".eEn"))
		fputs(".0", f);
}

void kb__sweep_keys_text(FILE *f, const json_t *keys)
{
	const char *k;
	json_t *v;
	int first = 1;

	fputc('{', f);
	json_object_foreach((json_t *)keys, k, v) {
		if (!first)
			fputc(',', f);
		first = 0;
		json_str(f, k);
		fputc(':', f);
		if (json_is_integer(v))
			fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else if (json_is_real(v))
			short_real(f, json_real_value(v));
		else
			json_str(f, json_is_string(v) ? json_string_value(v) : "");
	}
	fputc('}', f);
}

static void csv_row(FILE *f, const kb_sweep_row *row, char txt[KB_SWEEP_N_FIGS][40],
		    size_t n_figs)
{
	kb__sweep_csv_cell(f, row->bench);
	for (size_t i = 0; i < row->n_keys; i++) {
		fputc(',', f);
		kb__sweep_csv_cell(f, row->values[i]);
	}
	for (size_t i = 0; i < n_figs; i++)
		fprintf(f, ",%s", txt[i]);
	fputc(',', f);
	kb__sweep_csv_cell(f, row->status ? "" : row->result->oplog_sha256);
	fputs(row->status ? ",error," : ",ok,", f);
	kb__sweep_csv_cell(f, row->status ? row->error : "");
	fputc('\n', f);
}

static int jsonl_row(FILE *f, const kb_sweep *s, const kb_sweep_row *row,
		     char txt[KB_SWEEP_N_FIGS][40], size_t n_figs)
{
	json_t *keys = kb__sweep_keys_json(s, row->bench, row->values);

	if (!keys)
		return -1;
	fputs("{\"bench\":", f);
	json_str(f, row->bench);
	fputs(",\"keys\":", f);
	kb__sweep_keys_text(f, keys);
	json_decref(keys);
	for (size_t i = 0; i < n_figs; i++)
		fprintf(f, ",\"%s\":%s", fig_names[i], txt[i][0] ? txt[i] : "null");
	fputs(",\"oplog_sha256\":", f);
	if (row->status)
		fputs("null", f);
	else
		json_str(f, row->result->oplog_sha256);
	fputs(row->status ? ",\"status\":\"error\",\"error\":" : ",\"status\":\"ok\",\"error\":", f);
	json_str(f, row->status ? row->error : "");
	fputs("}\n", f);
	return 0;
}

/* Closes a memstream; the text, or NULL (freed) when it failed. */
static char *close_text(FILE *f, char **buf, int bad)
{
	if (fclose(f) != 0 || bad) {
		free(*buf);
		return NULL;
	}
	return *buf;  /* set by fclose */
}

/* Whether a swept key is named depth times "result." then name. */
static int key_taken(const kb_sweep *s, const char *name, size_t depth)
{
	static const char prefix[] = "result.";

	for (size_t i = 0; i < s->n_keys; i++) {
		const char *k = s->keys[i].name;
		size_t d = 0;

		while (d < depth && strncmp(k, prefix, sizeof(prefix) - 1) == 0) {
			k += sizeof(prefix) - 1;
			d++;
		}
		if (d == depth && strcmp(k, name) == 0)
			return 1;
	}
	return 0;
}

/*
 * A CSV column that every sweep has (bench, a figure, oplog_sha256, status,
 * error), after sep. The swept keys keep their names, as in JSON Lines'
 * "keys" and the Python package's rows; a fixed column that a key's name
 * takes (synthetic's `events` is also a figure) is written result.NAME,
 * prefixed again while that is taken too, so a header names each column
 * once and a reader finds a key under the name it was swept by.
 */
static void fixed_column(FILE *f, const kb_sweep *s, const char *name, const char *sep)
{
	size_t depth = 0;

	while (key_taken(s, name, depth))
		depth++;
	fputs(sep, f);
	while (depth--)
		fputs("result.", f);
	fputs(name, f);
}

KB_API int kb_sweep_header(char **out, const kb_sweep *s, kb_sweep_format fmt, int data,
			   kb_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	kb_error_clear(err);
	if (!out || !s)
		return kb__err(err, KB_EINVAL, "kb_sweep_header: NULL argument");
	if (!(f = open_memstream(&buf, &len)))
		return kb__err(err, KB_ENOMEM, "out of memory");
	if (fmt == KB_SWEEP_CSV) {
		fixed_column(f, s, "bench", "");
		for (size_t i = 0; i < s->n_keys; i++) {
			fputc(',', f);
			kb__sweep_csv_cell(f, s->keys[i].name);
		}
		for (size_t i = 0; i < kb_sweep_n_figs(data); i++)
			fixed_column(f, s, fig_names[i], ",");
		fixed_column(f, s, "oplog_sha256", ",");
		fixed_column(f, s, "status", ",");
		fixed_column(f, s, "error", ",");
		fputc('\n', f);
	}
	*out = close_text(f, &buf, 0);
	return *out ? 0 : kb__err(err, KB_ENOMEM, "out of memory");
}

KB_API int kb_sweep_format_row(char **out, const kb_sweep *s, const kb_sweep_row *row,
			       kb_sweep_format fmt, int data, kb_error *err)
{
	char txt[KB_SWEEP_N_FIGS][40];
	char *buf = NULL;
	size_t len = 0;
	int bad = 0;
	FILE *f;

	kb_error_clear(err);
	if (row && (bad = kb__sweep_row_check(row, "kb_sweep_format_row", err)))
		return bad;
	if (!out || !s || !row || (!row->status && !row->result) || row->n_keys != s->n_keys)
		return kb__err(err, KB_EINVAL, "kb_sweep_format_row: NULL argument or a row "
			       "of another sweep");
	if (!(f = open_memstream(&buf, &len)))
		return kb__err(err, KB_ENOMEM, "out of memory");
	kb__sweep_figure_texts(row, txt);
	if (fmt == KB_SWEEP_CSV)
		csv_row(f, row, txt, kb_sweep_n_figs(data));
	else
		bad = jsonl_row(f, s, row, txt, kb_sweep_n_figs(data));
	*out = close_text(f, &buf, bad);
	return *out ? 0 : kb__err(err, KB_ENOMEM, "out of memory");
}

void kb__sweep_figures_from_texts(char txt[KB_SWEEP_N_FIGS][40], int ok,
				  kb_sweep_figures *out)
{
	kb_sweep_figures f;
	size_t n = out->size < sizeof(f) ? out->size : sizeof(f);

	f.size = out->size;
	f.present = 1;
	f.ok = ok;
	for (int i = 0; i < KB_SWEEP_N_FIGS; i++)
		f.fig[i] = txt[i][0] ? strtod(txt[i], NULL) : NAN;
	memcpy(out, &f, n);
}

KB_API int kb_sweep_row_figures(const kb_sweep_row *row, kb_sweep_figures *out, kb_error *err)
{
	char txt[KB_SWEEP_N_FIGS][40];
	int rc;

	kb_error_clear(err);
	if (!row || !out || out->size < offsetof(kb_sweep_figures, fig))
		return kb__err(err, KB_EINVAL, "kb_sweep_row_figures: NULL argument or size not set");
	if ((rc = kb__sweep_row_check(row, "kb_sweep_row_figures", err)))
		return rc;
	kb__sweep_figure_texts(row, txt);
	kb__sweep_figures_from_texts(txt, row->status == 0, out);
	return 0;
}
