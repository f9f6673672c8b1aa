/* kernbench list: the built-in benches and their parameters, as text or JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/bench.h"

static const char *type_name(kb_param_type t)
{
	switch (t) {
	case KB_PARAM_INT: return "int";
	case KB_PARAM_REAL: return "real";
	case KB_PARAM_STRING: return "string";
	}
	return "?";
}

/* "choices a|b", "range [lo, hi]", or "" (free-form string). Integer
 * bounds in full (9000000000000000000, not 9e+18); real ones with 15
 * significant digits (1000000, not 1e+06). */
static void domain_text(const kb_param_info *p, char *buf, size_t n)
{
	if (p->type == KB_PARAM_STRING)
		snprintf(buf, n, "%s%s", p->choices ? "choices " : "", p->choices ? p->choices : "");
	else if (p->type == KB_PARAM_INT)
		snprintf(buf, n, "range [%.0f, %.0f]", p->min, p->max);
	else
		snprintf(buf, n, "range [%.15g, %.15g]", p->min, p->max);
}

static void list_text(void)
{
	size_t i, j;

	for (i = 0; i < cli_bench_count(); i++) {
		const kb_bench_info *b = cli_bench_get(i);

		printf("%s%s\n  %s\n", i ? "\n" : "", b->name, b->help ? b->help : "");
		for (j = 0; j < b->n_params; j++) {
			const kb_param_info *p = &b->params[j];
			char dom[256];

			domain_text(p, dom, sizeof(dom));
			printf("    %-14s %-6s default %-10s %s%s%s\n", p->name, type_name(p->type),
			       p->default_value ? p->default_value : "-", dom,
			       p->help && *p->help ? "  " : "", p->help ? p->help : "");
		}
	}
}

/* A bound as a JSON number: integers in full (9000000000000000000, not
 * 9e+18), null when not finite (JSON has no inf/NaN). */
static void json_bound(const kb_param_info *p, double v)
{
	if (!isfinite(v))
		fputs("null", stdout);
	else if (p->type == KB_PARAM_INT)
		printf("%.0f", v);
	else
		printf("%.17g", v);
}

/* The default as a value of the parameter's type: a number for int and real
 * (its text is a number literal of the bench's table), a string otherwise. */
static void json_default(const kb_param_info *p)
{
	const char *v = p->default_value;
	char *end;

	if (!v) {
		fputs("null", stdout);
		return;
	}
	if (p->type != KB_PARAM_STRING && *v && (strtod(v, &end), *end == '\0'))
		fputs(v, stdout);
	else
		cli_json_string(stdout, v);
}

/* "a|b|c" as ["a","b","c"]. */
static void json_choices(const char *choices)
{
	fputc('[', stdout);
	for (const char *c = choices; *c;) {
		size_t n = strcspn(c, "|");
		char *one = strndup(c, n);

		if (c != choices)
			fputc(',', stdout);
		cli_json_string(stdout, one ? one : "");
		free(one);
		c += n;
		if (*c == '|')
			c++;
	}
	fputc(']', stdout);
}

static void param_json(const kb_param_info *p)
{
	fputs("{\"name\":", stdout);
	cli_json_string(stdout, p->name);
	printf(",\"type\":\"%s\",\"default\":", type_name(p->type));
	json_default(p);
	fputs(",\"help\":", stdout);
	cli_json_string(stdout, p->help ? p->help : "");
	if (p->type == KB_PARAM_STRING) {
		fputs(",\"choices\":", stdout);
		if (p->choices)
			json_choices(p->choices);
		else
			fputs("null", stdout);
	} else {
		fputs(",\"min\":", stdout);
		json_bound(p, p->min);
		fputs(",\"max\":", stdout);
		json_bound(p, p->max);
	}
	fputc('}', stdout);
}

static void list_json(void)
{
	size_t i, j;

	fputc('[', stdout);
	for (i = 0; i < cli_bench_count(); i++) {
		const kb_bench_info *b = cli_bench_get(i);

		fputs(i ? ",{\"name\":" : "{\"name\":", stdout);
		cli_json_string(stdout, b->name);
		fputs(",\"help\":", stdout);
		cli_json_string(stdout, b->help ? b->help : "");
		fputs(",\"params\":[", stdout);
		for (j = 0; j < b->n_params; j++) {
			if (j)
				fputc(',', stdout);
			param_json(&b->params[j]);
		}
		fputs("]}", stdout);
	}
	fputs("]\n", stdout);
}

enum { O_JSON, O_HELP, N_OPTS };

static const cli_opt opts[N_OPTS] = {
	[O_JSON] = { "json", 0, CLI_FLAG },
	[O_HELP] = { "help", 'h', CLI_FLAG },
};

int cli_cmd_list(int argc, char **argv)
{
	cli_args a;
	int rc = cli_parse("list", opts, N_OPTS, argc, argv, &a);

	if (rc)
		goto done;
	if (a.vals[O_HELP].seen) {
		rc = cli_print_help("list");
		goto done;
	}
	if (a.n_pos) {
		rc = cli_usage("list", "unexpected argument '%s'", a.pos[0]);
		goto done;
	}
	if (a.vals[O_JSON].seen)
		list_json();
	else
		list_text();
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = cli_error("could not write the list to standard output");
done:
	cli_args_free(&a);
	return rc;
}
