/*
 * Argument parsing and messages shared by the subcommands. A small parser of
 * our own rather than getopt_long: it needs repeatable options kept in
 * order, duplicate detection for single-valued ones, and messages in the
 * command's own words.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernbench/bench.h"

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("kernbench: usage: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd)
		fprintf(stderr, "\nTry 'kernbench %s --help' for more information.\n", cmd);
	else
		fputs("\nTry 'kernbench --help' for more information.\n", stderr);
	return CLI_USAGE;
}

int cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("kernbench: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_FAIL;
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	fputs("kernbench: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_kb_error(const kb_error *err, int code)
{
	const char *m = err && err->message[0] ? err->message : kb_strerror(code);

	return cli_error("%s", m);
}

const char *cli_hint(const char *name, const char *const *cands, size_t n, char *buf, size_t len)
{
	const char *best = kb_suggest(name, cands, n);

	if (best)
		snprintf(buf, len, " (did you mean '%s'?)", best);
	else
		buf[0] = '\0';
	return buf;
}

const char *cli_hint_bench(const char *name, char *buf, size_t len)
{
	size_t n = cli_bench_count();
	const char **names = calloc(n + 1, sizeof(*names));

	buf[0] = '\0';
	if (!names)
		return buf;
	for (size_t i = 0; i < n; i++)
		names[i] = cli_bench_get(i)->name;
	cli_hint(name, names, n, buf, len);
	free(names);
	return buf;
}

const char *cli_hint_param(const kb_bench_info *b, const char *name, char *buf, size_t len)
{
	const char **names = calloc(b->n_params + 1, sizeof(*names));

	buf[0] = '\0';
	if (!names)
		return buf;
	for (size_t i = 0; i < b->n_params; i++)
		names[i] = b->params[i].name;
	cli_hint(name, names, b->n_params, buf, len);
	free(names);
	return buf;
}

/* The --option closest to a mistyped one, as a hint. */
static const char *option_hint(const cli_opt *opts, size_t n, const char *name, size_t len,
			       char *buf, size_t buflen)
{
	const char **names = calloc(n + 1, sizeof(*names));
	char *typed = strndup(name, len);
	const char *best = NULL;

	if (names && typed) {
		for (size_t i = 0; i < n; i++)
			names[i] = opts[i].name;
		best = kb_suggest(typed, names, n);
	}
	if (best)
		snprintf(buf, buflen, " (did you mean '--%s'?)", best);
	else
		buf[0] = '\0';
	free(names);
	free(typed);
	return buf;
}

static const cli_opt *find_long(const cli_opt *opts, size_t n, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
			return &opts[i];
	return NULL;
}

static const cli_opt *find_short(const cli_opt *opts, size_t n, char c)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (opts[i].short_name && opts[i].short_name == c)
			return &opts[i];
	return NULL;
}

/* Records one occurrence of option o with value v (NULL for flags). */
static int take(const char *cmd, const cli_opt *o, cli_optval *val, const char *v,
		const char *spelled)
{
	if (o->kind == CLI_FLAG && v)
		return cli_usage(cmd, "option '%s' takes no value", spelled);
	if (o->kind == CLI_VALUE && val->seen)
		return cli_usage(cmd, "option '%s' given more than once", spelled);
	val->seen++;
	if (o->kind == CLI_VALUE)
		val->value = v;
	else if (o->kind == CLI_LIST)
		val->list[val->n_list++] = v;
	return 0;
}

typedef struct parse_state {
	const char *cmd;
	const cli_opt *opts;
	size_t n_opts;
	int argc, i;
	char **argv;
	cli_args *out;
} parse_state;

/* Value of an option: attached text, or the next argument. */
static int need_value(parse_state *ps, const cli_opt *o, const char *attached,
		      const char *spelled, const char **v)
{
	*v = attached;
	if (o->kind == CLI_FLAG || attached)
		return 0;
	if (ps->i + 1 >= ps->argc)
		return cli_usage(ps->cmd, "option '%s' needs a value", spelled);
	*v = ps->argv[++ps->i];
	return 0;
}

static int parse_long_opt(parse_state *ps, const char *arg)
{
	const char *name = arg + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	const cli_opt *o = find_long(ps->opts, ps->n_opts, name, len);
	const char *v;
	char spelled[64], hint[96];
	int rc;

	snprintf(spelled, sizeof(spelled), "--%.*s", (int)(len < 40 ? len : 40), name);
	if (!o)
		return cli_usage(ps->cmd, "unknown option '%s'%s", spelled,
				 option_hint(ps->opts, ps->n_opts, name, len, hint, sizeof(hint)));
	if ((rc = need_value(ps, o, eq ? eq + 1 : NULL, spelled, &v)))
		return rc;
	return take(ps->cmd, o, &ps->out->vals[o - ps->opts], v, spelled);
}

static int parse_short_opt(parse_state *ps, const char *arg)
{
	const cli_opt *o = find_short(ps->opts, ps->n_opts, arg[1]);
	const char *v;
	char spelled[3] = { '-', arg[1], '\0' };
	int rc;

	if (!o)
		return cli_usage(ps->cmd, "unknown option '%s'", spelled);
	if (o->kind == CLI_FLAG && arg[2])
		return cli_usage(ps->cmd, "unknown option '%s'", arg);
	if ((rc = need_value(ps, o, arg[2] ? arg + 2 : NULL, spelled, &v)))
		return rc;
	return take(ps->cmd, o, &ps->out->vals[o - ps->opts], v, spelled);
}

int cli_parse(const char *cmd, const cli_opt *opts, size_t n_opts, int argc, char **argv,
	      cli_args *out)
{
	parse_state ps = { cmd, opts, n_opts, argc, 0, argv, out };
	int rc = 0, rest = 0;
	size_t k;

	memset(out, 0, sizeof(*out));
	out->vals = calloc(n_opts + 1, sizeof(*out->vals));
	out->pos = calloc((size_t)argc + 1, sizeof(*out->pos));
	for (k = 0; out->vals && k < n_opts; k++)
		if (!(out->vals[k].list = calloc((size_t)argc + 1, sizeof(char *))))
			break;
	if (!out->vals || !out->pos || k < n_opts)
		return cli_error("out of memory");
	for (ps.i = 0; rc == 0 && ps.i < argc; ps.i++) {
		const char *a = argv[ps.i];

		if (rest || a[0] != '-' || a[1] == '\0')
			out->pos[out->n_pos++] = a;
		else if (strcmp(a, "--") == 0)
			rest = 1;
		else if (a[1] == '-')
			rc = parse_long_opt(&ps, a);
		else
			rc = parse_short_opt(&ps, a);
	}
	return rc;
}

int cli_take_plugins(int argc, char **argv, char **rest, int *n_rest, const char **plugins,
		     size_t *n_plugins)
{
	int i, done = 0;

	*n_rest = 0;
	*n_plugins = 0;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (done || strncmp(a, "--plugin", 8) != 0 || (a[8] != '\0' && a[8] != '=')) {
			/* "--" ends the options of the command line, --plugin too. */
			done |= strcmp(a, "--") == 0;
			rest[(*n_rest)++] = argv[i];
		} else if (a[8] == '=' && a[9]) {
			plugins[(*n_plugins)++] = a + 9;
		} else if (a[8] == '\0' && i + 1 < argc && argv[i + 1][0]) {
			plugins[(*n_plugins)++] = argv[++i];
		} else {
			return cli_usage(NULL, "--plugin needs a file");
		}
	}
	rest[*n_rest] = NULL;
	return 0;
}

void cli_args_free(cli_args *a)
{
	size_t k;

	if (!a || !a->vals)
		return;
	for (k = 0; a->vals[k].list; k++)
		free((void *)a->vals[k].list);
	free(a->vals);
	free((void *)a->pos);
	memset(a, 0, sizeof(*a));
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || *s == ' ' || *s == '+')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_split_assignment(const char *s, char **key, const char **value)
{
	const char *eq = strchr(s, '=');
	size_t n;

	if (!eq || eq == s || !eq[1])
		return -1;
	/* Spaces and tabs around the name go, as around the value (trimmed by
	 * the library) and as in topology keys. */
	while (s < eq && (*s == ' ' || *s == '\t'))
		s++;
	n = (size_t)(eq - s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (!n)
		return -1;
	*key = malloc(n + 1);
	if (!*key)
		return cli_error("out of memory");
	memcpy(*key, s, n);
	(*key)[n] = '\0';
	*value = eq + 1;
	return 0;
}

int cli_ends_with(const char *name, const char *suffix)
{
	size_t n = strlen(name), m = strlen(suffix);

	return n > m && strcmp(name + n - m, suffix) == 0;
}

void cli_json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, int wanted)
{
	p->on = wanted && isatty(STDERR_FILENO);
	p->shown = 0;
	p->t0 = p->last = cli_now();
}

int cli_progress_due(cli_progress *p)
{
	double now;

	if (!p->on)
		return 0;
	now = cli_now();
	if (now - p->last < 0.25)
		return 0;
	p->last = now;
	return 1;
}

void cli_progress_show(cli_progress *p, const char *fmt, ...)
{
	va_list ap;

	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	p->shown = 1;
}

void cli_progress_clear(cli_progress *p)
{
	if (!p->shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	p->shown = 0;
}
