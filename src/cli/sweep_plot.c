/* From sweep rows to cli_plot_data: series, x values, the figure array. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plot.h"
#include "kernbench/sweep.h"

typedef struct plot_build {
	cli_plot_data d;
	char **x_text;
	char **series;
	double *y;
	int shown[KB_SWEEP_N_FIGS];
	char title[512];
} plot_build;

static void build_free(plot_build *b)
{
	size_t i;

	for (i = 0; b->x_text && i < b->d.n_x; i++)
		free(b->x_text[i]);
	for (i = 0; b->series && i < b->d.n_series; i++)
		free(b->series[i]);
	free(b->x_text);
	free(b->series);
	free(b->y);
}

/* "bench k=v k=v" for the keys after the first (the x axis). */
static char *series_label(const char *bench, size_t n_keys, const char *const *keys,
			  const char *const *values)
{
	char *buf = NULL;
	size_t len = 0, k;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fputs(bench, f);
	for (k = 1; k < n_keys; k++)
		fprintf(f, " %s=%s", keys[k], values[k]);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Fills labels and x texts from the points (x slowest within a bench). */
static int labels(plot_build *b, const kb_sweep *s, const char *const *benches,
		  size_t n_keys, const char *const *keys, size_t inner)
{
	size_t per = b->d.n_x * inner, i;

	for (i = 0; i < b->d.n_series; i++) {
		size_t bench = i / inner, p = bench * per + i % inner;
		const char *const *values;

		if (kb_sweep_point(s, p, NULL, &values, NULL) ||
		    !(b->series[i] = series_label(benches[bench], n_keys, keys, values)))
			return -1;
	}
	for (i = 0; i < b->d.n_x; i++) {
		const char *const *values;

		if (kb_sweep_point(s, i * inner, NULL, &values, NULL))
			return -1;
		b->x_text[i] = strdup(n_keys ? values[0] : "0");
		if (!b->x_text[i])
			return -1;
	}
	return 0;
}

/* The figure column names, as the library names them. */
static const char *const *fig_names(void)
{
	static const char *names[KB_SWEEP_N_FIGS];

	for (int f = 0; f < KB_SWEEP_N_FIGS; f++)
		names[f] = kb_sweep_fig_name(f);
	return names;
}

/* Index of a figure name of len bytes in fig_names(), or -1. */
static int fig_index(const char *name, size_t len)
{
	for (int f = 0; f < KB_SWEEP_N_FIGS; f++)
		if (strlen(fig_names()[f]) == len &&
		    strncmp(fig_names()[f], name, len) == 0)
			return f;
	return -1;
}

int cli_plot_log_axes(const char *text, int *x, int *y)
{
	static const char *const names[] = { "auto", "none", "x", "y", "xy" };
	char hint[96] = "";

	*x = *y = CLI_PLOT_LOG_AUTO;
	if (!text || strcmp(text, "auto") == 0)
		return 0;
	if (strcmp(text, "none") == 0 || strcmp(text, "x") == 0 || strcmp(text, "y") == 0 ||
	    strcmp(text, "xy") == 0) {
		*x = strchr(text, 'x') ? CLI_PLOT_LOG_ON : CLI_PLOT_LOG_OFF;
		*y = strchr(text, 'y') ? CLI_PLOT_LOG_ON : CLI_PLOT_LOG_OFF;
		return 0;
	}
	cli_hint(text, names, sizeof(names) / sizeof(names[0]), hint, sizeof(hint));
	cli_usage("sweep", "--plot-log '%s': expected x, y, xy, none or auto%s", text, hint);
	return CLI_USAGE;
}

int cli_plot_check_figures(const char *figures)
{
	for (const char *p = figures;; p++) {
		size_t len = strcspn(p, ",");

		if (fig_index(p, len) < 0) {
			char *bad = strndup(p, len), hint[96] = "";

			if (bad)
				cli_hint(bad, fig_names(), KB_SWEEP_N_FIGS, hint, sizeof(hint));
			cli_usage("sweep", "--plot-figures: unknown figure '%s'%s", bad ? bad : "", hint);
			free(bad);
			return CLI_USAGE;
		}
		p += len;
		if (!*p)
			return 0;
	}
}

/* Which figures to draw: the list, or every one but wall_s. */
static void wanted(const char *figures, int want[KB_SWEEP_N_FIGS])
{
	for (int f = 0; f < KB_SWEEP_N_FIGS; f++)
		want[f] = !figures && f != KB_SWEEP_FIG_WALL_S;
	for (const char *p = figures; p && *p;) {
		size_t len = strcspn(p, ",");
		int f = fig_index(p, len);

		if (f >= 0)
			want[f] = 1;
		p += len + (p[len] == ',');
	}
}

static void figures(plot_build *b, const kb_sweep_figures *rows, size_t inner,
		    const int want[KB_SWEEP_N_FIGS])
{
	size_t per = b->d.n_x * inner, s, x, f;

	for (s = 0; s < b->d.n_series; s++)
		for (x = 0; x < b->d.n_x; x++) {
			const kb_sweep_figures *r = &rows[(s / inner) * per + x * inner + s % inner];

			for (f = 0; f < KB_SWEEP_N_FIGS; f++) {
				double v = r->present && r->ok ? r->fig[f] : NAN;

				b->y[(s * b->d.n_x + x) * KB_SWEEP_N_FIGS + f] = v;
				/* dispatch per tile only when some bench has tiles,
				 * the error figures only in data mode */
				if (want[f] && ((f != KB_SWEEP_FIG_DISPATCH_PER_TILE_NS &&
						 f < KB_SWEEP_FIG_MAX_ABS_ERR) ||
						isfinite(v)))
					b->shown[f] = 1;
			}
		}
}

int cli_plot_sweep(const char *path, const kb_sweep *s, size_t n_benches,
		   const char *const *benches, size_t n_keys, const char *const *keys,
		   const size_t *n_values, const kb_sweep_figures *rows, const char *fig_list,
		   const char *log_axes)
{
	int want[KB_SWEEP_N_FIGS];
	plot_build b;
	size_t total = kb_sweep_points(s), inner, i;
	int rc;

	memset(&b, 0, sizeof(b));
	b.d.n_x = n_keys ? n_values[0] : 1;
	inner = total / n_benches / b.d.n_x;
	b.d.n_series = n_benches * inner;
	b.x_text = calloc(b.d.n_x, sizeof(char *));
	b.series = calloc(b.d.n_series, sizeof(char *));
	b.y = calloc(b.d.n_series * b.d.n_x * KB_SWEEP_N_FIGS, sizeof(double));
	if (!b.x_text || !b.series || !b.y || labels(&b, s, benches, n_keys, keys, inner)) {
		build_free(&b);
		return cli_error("out of memory");
	}
	wanted(fig_list, want);
	figures(&b, rows, inner, want);
	snprintf(b.title, sizeof(b.title), "kernbench sweep:");
	for (i = 0; i < n_benches; i++)
		snprintf(b.title + strlen(b.title), sizeof(b.title) - strlen(b.title), "%s%s",
			 i ? ", " : " ", benches[i]);
	b.d.title = b.title;
	b.d.x_label = n_keys ? keys[0] : "(no swept key)";
	b.d.x_text = (const char *const *)b.x_text;
	b.d.series = (const char *const *)b.series;
	b.d.n_fig = KB_SWEEP_N_FIGS;
	b.d.fig_names = fig_names();
	b.d.fig_shown = b.shown;
	b.d.y = b.y;
	(void)cli_plot_log_axes(log_axes, &b.d.log_x, &b.d.log_y); /* checked up front */
	rc = cli_plot_write_svg(path, &b.d);
	build_free(&b);
	return rc;
}
