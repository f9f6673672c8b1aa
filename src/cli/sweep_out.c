/*
 * Sweep rows as text. CSV: RFC 4180 (cells with a comma, quote, CR or LF are
 * quoted, quotes doubled), "\n" line ends. JSON Lines: one object per line
 * with the same fields; key values are typed by the library
 * (kb_sweep_row_to_json), so numbers are numbers, and --resume matches the
 * typed text of the "keys" object.
 */
#include "cli/sweep_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/json.h"

const char *const cli_out_fig_names[CLI_N_FIG] = { "sim_time_ns", "dispatch_per_tile_ns",
						   "commands",    "events",
						   "wall_s",      "max_abs_err",
						   "max_rel_err" };

size_t cli_out_n_figs(int data)
{
	return data ? CLI_N_FIG : CLI_FIG_MAX_ABS_ERR;
}

static void csv_cell(FILE *f, const char *s)
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

char *cli_out_csv_header(size_t n_keys, const char *const *keys, int data)
{
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs("bench", f);
	for (i = 0; i < n_keys; i++) {
		fputc(',', f);
		csv_cell(f, keys[i]);
	}
	for (i = 0; i < cli_out_n_figs(data); i++)
		fprintf(f, ",%s", cli_out_fig_names[i]);
	fputs(",oplog_sha256,status,error\n", f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The figures of a row as text ("" where absent), in column order. */
static void figure_texts(const kb_sweep_row *row, char txt[CLI_N_FIG][40])
{
	const kb_result *r = row->result;
	int i;

	for (i = 0; i < CLI_N_FIG; i++)
		txt[i][0] = '\0';
	if (row->status || !r)
		return;
	cli_ps_to_ns((unsigned long long)r->sim_time_ps, txt[CLI_FIG_SIM_NS], 40);
	if (isfinite(r->dispatch_per_tile_ns))
		snprintf(txt[CLI_FIG_DPT_NS], 40, "%.3f", r->dispatch_per_tile_ns);
	snprintf(txt[CLI_FIG_COMMANDS], 40, "%llu", (unsigned long long)r->commands);
	snprintf(txt[CLI_FIG_EVENTS], 40, "%llu", (unsigned long long)r->events);
	snprintf(txt[CLI_FIG_WALL_S], 40, "%.6f", isfinite(r->wall_s) ? r->wall_s : 0.0);
	if (isfinite(r->max_abs_err))
		snprintf(txt[CLI_FIG_MAX_ABS_ERR], 40, "%.9g", r->max_abs_err);
	if (isfinite(r->max_rel_err))
		snprintf(txt[CLI_FIG_MAX_REL_ERR], 40, "%.9g", r->max_rel_err);
}

void cli_out_row_figures(const kb_sweep_row *row, cli_kept_row *k)
{
	char txt[CLI_N_FIG][40];
	int i;

	figure_texts(row, txt);
	k->present = 1;
	k->ok = row->status == 0;
	/* From the text, so a resumed row and a fresh one give the same numbers. */
	for (i = 0; i < CLI_N_FIG; i++)
		k->fig[i] = txt[i][0] ? strtod(txt[i], NULL) : NAN;
}

static void csv_row(FILE *f, const kb_sweep_row *row, char txt[CLI_N_FIG][40], size_t n_figs)
{
	size_t i;

	csv_cell(f, row->bench);
	for (i = 0; i < row->n_keys; i++) {
		fputc(',', f);
		csv_cell(f, row->values[i]);
	}
	for (i = 0; i < n_figs; i++)
		fprintf(f, ",%s", txt[i]);
	fputc(',', f);
	csv_cell(f, row->status ? "" : row->result->oplog_sha256);
	fputs(row->status ? ",error," : ",ok,", f);
	csv_cell(f, row->status ? row->error : "");
	fputc('\n', f);
}

/* Writes the JSON text [p, end) with each real number in its shortest form
 * that reads back the same (the library writes 17 digits: 0.1 would be
 * 0.10000000000000001); integers and strings unchanged. */
static void short_reals(FILE *f, const char *p, const char *end)
{
	int in_str = 0;

	while (p < end) {
		if (in_str) {
			if (*p == '\\' && p + 1 < end)
				fputc(*p++, f);
			else if (*p == '"')
				in_str = 0;
			fputc(*p++, f);
		} else if (*p == '"') {
			in_str = 1;
			fputc(*p++, f);
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			size_t n = strspn(p, "+-0123456789.eE");
			char tok[64], buf[64];
			double v;
			int prec;

			snprintf(tok, sizeof(tok), "%.*s", (int)(n < 63 ? n : 63), p);
			v = strtod(tok, NULL);
			if (!strpbrk(tok, ".eE") || n >= 63) {
				fwrite(p, 1, n, f);
			} else {
				for (prec = 1; prec < 17; prec++) {
					snprintf(buf, sizeof(buf), "%.*g", prec, v);
					if (strtod(buf, NULL) == v)
						break;
				}
				snprintf(buf, sizeof(buf), "%.*g", prec, v);
				fputs(buf, f);
				if (!strpbrk(buf, ".eEn"))
					fputs(".0", f);  /* a real stays a real */
			}
			p += n;
		} else {
			fputc(*p++, f);
		}
	}
}

char *cli_out_typed_keys(const kb_sweep *s, const kb_sweep_row *row)
{
	char *all = kb_sweep_row_to_json(s, row), *from, *to, *keys = NULL;
	size_t len = 0;

	/* A '"' inside a JSON string is escaped, so these member boundaries
	 * cannot occur inside the bench name or a key's value. */
	from = all ? strstr(all, ",\"keys\":{") : NULL;
	to = from ? strstr(from, "},\"status\":") : NULL;
	if (to) {
		FILE *f = open_memstream(&keys, &len);

		if (f) {
			short_reals(f, from + 8, to + 1);
			if (fclose(f) != 0) {
				free(keys);
				keys = NULL;
			}
		}
	}
	kb_free(all);
	return keys;
}

static int jsonl_row(FILE *f, const kb_sweep *s, const kb_sweep_row *row, char txt[CLI_N_FIG][40],
		     size_t n_figs)
{
	char *keys = cli_out_typed_keys(s, row);
	size_t i;

	if (!keys)
		return -1;
	fputs("{\"bench\":", f);
	cli_json_string(f, row->bench);
	fprintf(f, ",\"keys\":%s", keys);
	free(keys);
	for (i = 0; i < n_figs; i++)
		fprintf(f, ",\"%s\":%s", cli_out_fig_names[i], txt[i][0] ? txt[i] : "null");
	fputs(",\"oplog_sha256\":", f);
	if (row->status)
		fputs("null", f);
	else
		cli_json_string(f, row->result->oplog_sha256);
	fputs(row->status ? ",\"status\":\"error\",\"error\":" : ",\"status\":\"ok\",\"error\":", f);
	cli_json_string(f, row->status ? row->error : "");
	fputs("}\n", f);
	return 0;
}

char *cli_out_format_row(cli_out_format fmt, const kb_sweep *s, const kb_sweep_row *row, int data)
{
	char txt[CLI_N_FIG][40];
	char *buf = NULL;
	size_t len = 0;
	int bad = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	figure_texts(row, txt);
	if (fmt == CLI_OUT_CSV)
		csv_row(f, row, txt, cli_out_n_figs(data));
	else
		bad = jsonl_row(f, s, row, txt, cli_out_n_figs(data));
	if (fclose(f) != 0 || bad) {
		free(buf);
		return NULL;
	}
	return buf;
}
