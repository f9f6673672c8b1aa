/*
 * The sweep plot as SVG 1.1 written by hand: panels in two columns, each
 * with its axes, tick values, one polyline plus markers per series; a
 * legend and a title. Axes switch to log10 when all values are positive and
 * span 8x or more (x: a swept key often doubles per step) or 100x or more
 * (y: figures), unless --plot-log says otherwise (cli_plot_data.log_x/log_y).
 */
#include "cli/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define PANEL_W 460.0
#define PANEL_H 300.0
#define GAP 30.0
#define MARGIN_L 80.0
#define MARGIN_R 20.0
#define MARGIN_T 30.0
#define MARGIN_B 50.0
#define TITLE_H 50.0
#define LEGEND_ROW 20.0

static const char *const colors[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"
};

typedef struct scale {
	double lo, hi;     /* data range (log10 of it when logarithmic) */
	int log;
	double p0, p1;     /* pixel range */
} scale;

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			/* XML 1.0 forbids most control characters, even escaped. */
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
		}
	}
}

static double to_px(const scale *s, double v)
{
	double t = s->log ? log10(v) : v;

	return s->p0 + (t - s->lo) / (s->hi - s->lo) * (s->p1 - s->p0);
}

/* A scale over the finite values vals[0..n) (positive ones for log), log10
 * when they span log_at times or more. */
static void make_scale(scale *s, const double *vals, size_t n, double p0, double p1, double log_at,
		       int mode)
{
	double lo = INFINITY, hi = -INFINITY;
	size_t i;

	for (i = 0; i < n; i++)
		if (isfinite(vals[i])) {
			lo = fmin(lo, vals[i]);
			hi = fmax(hi, vals[i]);
		}
	if (!isfinite(lo)) {
		lo = 0;
		hi = 1;
	}
	s->log = mode != CLI_PLOT_LOG_OFF && lo > 0 &&
		 (mode == CLI_PLOT_LOG_ON || hi / lo >= log_at);
	if (s->log) {
		lo = floor(log10(lo));
		hi = ceil(log10(hi));
	} else if (lo > 0 && lo < hi * 0.5) {
		lo = 0;  /* show the origin unless it would squash the data */
	}
	if (hi - lo < 1e-12 * fmax(1.0, fabs(hi))) {
		lo -= fmax(1.0, fabs(lo)) * 0.5;
		hi += fmax(1.0, fabs(hi)) * 0.5;
	}
	s->lo = lo;
	s->hi = hi;
	s->p0 = p0;
	s->p1 = p1;
}

static double nice_step(double range)
{
	double raw = range / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;

	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Tick values of a numeric scale into t (at most 32); returns how many. */
static size_t ticks(const scale *s, double *t)
{
	size_t n = 0;
	double v, step;

	if (s->log) {
		for (v = s->lo; v <= s->hi + 1e-9 && n < 32; v += 1)
			t[n++] = pow(10, v);
		return n;
	}
	step = nice_step(s->hi - s->lo);
	for (v = ceil(s->lo / step) * step; v <= s->hi + step * 1e-9 && n < 32; v += step)
		t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
}

typedef struct panel {
	double x0, y0;     /* top-left corner */
	scale xs, ys;
	size_t fig;
} panel;

static void axis_y(FILE *f, const panel *p)
{
	double t[32], x = p->x0 + MARGIN_L;
	size_t n = ticks(&p->ys, t), i;

	for (i = 0; i < n; i++) {
		double y = to_px(&p->ys, t[i]);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			x, y, p->x0 + PANEL_W - MARGIN_R, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%g</text>\n",
			x - 5, y + 4, t[i]);
	}
}

static void axis_x(FILE *f, const panel *p, const cli_plot_data *d, int numeric, const double *xv)
{
	double t[32], y = p->y0 + PANEL_H - MARGIN_B;
	size_t n, i;

	if (!numeric) {
		for (i = 0; i < d->n_x; i++) {
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">",
				to_px(&p->xs, (double)i), y + 16);
			xml_text(f, d->x_text[i]);
			fputs("</text>\n", f);
		}
		return;
	}
	n = ticks(&p->xs, t);
	for (i = 0; i < n; i++)
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">%g</text>\n",
			to_px(&p->xs, t[i]), y + 16, t[i]);
	(void)xv;
}

static double yval(const cli_plot_data *d, size_t s, size_t x, size_t fig)
{
	return d->y[(s * d->n_x + x) * d->n_fig + fig];
}

/* Draws one series: a polyline through its points in x order, and markers. */
static void series(FILE *f, const panel *p, const cli_plot_data *d, size_t s, const double *xv,
		   const size_t *order)
{
	const char *color = colors[s % (sizeof(colors) / sizeof(colors[0]))];
	size_t k;

	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
	for (k = 0; k < d->n_x; k++) {
		double y = yval(d, s, order[k], p->fig);

		if (isfinite(y) && (!p->ys.log || y > 0) && (!p->xs.log || xv[order[k]] > 0))
			fprintf(f, "%s%.1f,%.1f", k ? " " : "", to_px(&p->xs, xv[order[k]]),
				to_px(&p->ys, y));
	}
	fputs("\"/>\n", f);
	for (k = 0; k < d->n_x; k++) {
		double y = yval(d, s, k, p->fig);

		if (isfinite(y) && (!p->ys.log || y > 0) && (!p->xs.log || xv[k] > 0))
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
				to_px(&p->xs, xv[k]), to_px(&p->ys, y), color);
	}
}

/* The x coordinates: numbers when every x text is one, else positions. */
static int x_values(const cli_plot_data *d, double *xv)
{
	size_t i;
	int numeric = d->n_x > 0;

	for (i = 0; i < d->n_x; i++) {
		char *end;

		xv[i] = strtod(d->x_text[i], &end);
		if (*end || end == d->x_text[i] || !isfinite(xv[i]))
			numeric = 0;
	}
	for (i = 0; !numeric && i < d->n_x; i++)
		xv[i] = (double)i;
	return numeric;
}

/* Indices of xv in increasing order (insertion sort: a sweep has few x values). */
static void sort_order(size_t *order, const double *xv, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		size_t v = order[i];

		for (j = i; j > 0 && xv[order[j - 1]] > xv[v]; j--)
			order[j] = order[j - 1];
		order[j] = v;
	}
}

static void draw_panel(FILE *f, panel *p, const cli_plot_data *d, const double *xv, int numeric,
		       const size_t *order, double *buf)
{
	size_t s, x, n = 0;

	for (s = 0; s < d->n_series; s++)
		for (x = 0; x < d->n_x; x++)
			buf[n++] = yval(d, s, x, p->fig);
	make_scale(&p->ys, buf, n, p->y0 + PANEL_H - MARGIN_B, p->y0 + MARGIN_T, 100,
		   d->log_y);
	make_scale(&p->xs, xv, d->n_x, p->x0 + MARGIN_L + 10, p->x0 + PANEL_W - MARGIN_R - 10, 8,
		   d->log_x);
	if (!numeric) {
		p->xs.log = 0;
		p->xs.lo = -0.5;
		p->xs.hi = d->n_x ? (double)d->n_x - 0.5 : 0.5;
	}
	fprintf(f, "<g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"#333\"/>\n", p->x0 + MARGIN_L, p->y0 + MARGIN_T,
		PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">",
		p->x0 + PANEL_W / 2, p->y0 + MARGIN_T - 10);
	xml_text(f, d->fig_names[p->fig]);
	fputs(p->ys.log ? " (log scale)</text>\n" : "</text>\n", f);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">",
		p->x0 + PANEL_W / 2, p->y0 + PANEL_H - 12);
	xml_text(f, d->x_label);
	fputs(p->xs.log ? " (log scale)</text>\n" : "</text>\n", f);
	fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" "
		"font-size=\"12\">", p->x0 + 16, p->y0 + PANEL_H / 2);
	xml_text(f, d->fig_names[p->fig]);
	fputs("</text>\n", f);
	axis_y(f, p);
	axis_x(f, p, d, numeric, xv);
	for (s = 0; s < d->n_series; s++)
		series(f, p, d, s, xv, order);
	fputs("</g>\n", f);
}

static void legend(FILE *f, const cli_plot_data *d, double y0)
{
	size_t s;

	for (s = 0; s < d->n_series; s++) {
		double y = y0 + (double)s * LEGEND_ROW;
		const char *color = colors[s % (sizeof(colors) / sizeof(colors[0]))];

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"2\"/>\n", GAP, y, GAP + 30, y, color);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">", GAP + 40, y + 4);
		xml_text(f, d->series[s]);
		fputs("</text>\n", f);
	}
}

size_t cli_plot_panels(const cli_plot_data *d)
{
	size_t i, n = 0;

	for (i = 0; i < d->n_fig; i++)
		n += d->fig_shown[i] != 0;
	return n;
}

static void write_svg(FILE *f, const cli_plot_data *d, const double *xv, int numeric,
		      const size_t *order, double *buf)
{
	size_t n = cli_plot_panels(d), rows = (n + 1) / 2, i, k = 0;
	double w = 2 * PANEL_W + 3 * GAP;
	double h = TITLE_H + (double)rows * (PANEL_H + GAP) + (double)d->n_series * LEGEND_ROW + GAP;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
		w, h, w, h);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.1f\" y=\"32\" text-anchor=\"middle\" font-size=\"18\">", w / 2);
	xml_text(f, d->title);
	fputs("</text>\n", f);
	for (i = 0; i < d->n_fig; i++) {
		panel p;

		if (!d->fig_shown[i])
			continue;
		p.fig = i;
		p.x0 = GAP + (double)(k % 2) * (PANEL_W + GAP);
		p.y0 = TITLE_H + (double)(k / 2) * (PANEL_H + GAP);
		draw_panel(f, &p, d, xv, numeric, order, buf);
		k++;
	}
	legend(f, d, TITLE_H + (double)rows * (PANEL_H + GAP) + 10);
	fputs("</svg>\n", f);
}

int cli_plot_write_svg(const char *path, const cli_plot_data *d)
{
	double *xv = calloc(d->n_x + 1, sizeof(*xv));
	double *buf = calloc(d->n_x * d->n_series + 1, sizeof(*buf));
	size_t *order = calloc(d->n_x + 1, sizeof(*order)), i;
	FILE *f = NULL;
	int numeric, rc = CLI_OK;

	if (!xv || !buf || !order) {
		rc = cli_error("out of memory");
		goto done;
	}
	numeric = x_values(d, xv);
	for (i = 0; i < d->n_x; i++)
		order[i] = i;
	if (numeric)
		sort_order(order, xv, d->n_x);
	f = fopen(path, "w");
	if (!f) {
		rc = cli_error("%s: %s", path, strerror(errno));
		goto done;
	}
	write_svg(f, d, xv, numeric, order, buf);
	if (ferror(f) | fclose(f))
		rc = cli_error("%s: could not write the plot: %s", path, strerror(errno));
done:
	free(xv);
	free(buf);
	free(order);
	return rc;
}
