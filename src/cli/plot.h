/*
 * --plot: a hand-written SVG (no dependency) of each figure of a sweep
 * against its first swept key, one line per series (a bench and a
 * combination of the other keys).
 */
#ifndef KB_CLI_PLOT_H
#define KB_CLI_PLOT_H

#include <stddef.h>

typedef struct cli_plot_data {
	const char *title;
	const char *x_label;          /* the first swept key ("point" when none) */
	size_t n_x;
	const char *const *x_text;    /* value of the first key at each x */
	size_t n_series;
	const char *const *series;    /* legend label of each series */
	size_t n_fig;
	const char *const *fig_names; /* one panel per figure */
	const int *fig_shown;         /* nonzero: draw this figure's panel */
	const double *y;              /* [series][x][fig], NaN: no value */
	int log_x, log_y;             /* CLI_PLOT_LOG_AUTO, _ON or _OFF (--plot-log) */
} cli_plot_data;

/* An axis is log10 automatically (its positive values span 8x or more for x,
 * 100x for y), always (when its values are positive) or never. */
enum { CLI_PLOT_LOG_AUTO = 0, CLI_PLOT_LOG_ON, CLI_PLOT_LOG_OFF };

/* Number of panels cli_plot_write_svg draws. */
size_t cli_plot_panels(const cli_plot_data *d);
/* Writes the SVG to path; returns 0, or prints an error and returns 1. */
int cli_plot_write_svg(const char *path, const cli_plot_data *d);

/*
 * Plots the rows of a sweep (rows[i]: the figures of point i): x is the
 * first key's value, one series per bench and combination of the other
 * keys. figures: comma-separated figure names to draw (NULL: every one but
 * wall_s, which is host noise). Returns 0, or prints an error and returns 1.
 */
struct kb_sweep;
struct kb_sweep_figures;
int cli_plot_sweep(const char *path, const struct kb_sweep *s, size_t n_benches,
		   const char *const *benches, size_t n_keys, const char *const *keys,
		   const size_t *n_values, const struct kb_sweep_figures *rows, const char *figures,
		   const char *log_axes);
/* Checks a --plot-figures list: 0, or a usage error (2) naming the bad figure. */
int cli_plot_check_figures(const char *figures);
/*
 * --plot-log: "x", "y", "xy" (those axes log, the others linear), "none"
 * (both linear) or "auto" (the default rule); NULL is "auto". Sets *x, *y;
 * returns 0, or a usage error (2).
 */
int cli_plot_log_axes(const char *text, int *x, int *y);

#endif
