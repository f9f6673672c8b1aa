/* The opt3/opt2 headline of a sweep (sweep_headline.h). */
#include "cli/sweep_headline.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "cli/cli.h"

static int bench_index(const char *const *benches, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(benches[i], name) == 0)
			return (int)i;
	return -1;
}

int sweep_headline_wanted(const char *const *benches, size_t n_benches)
{
	return bench_index(benches, n_benches, "gqa_decode_opt2") >= 0 &&
	       bench_index(benches, n_benches, "gqa_decode_opt3") >= 0;
}

/* "k=v, k=v" of point i, into buf. */
static void point_label(const kb_sweep *s, size_t i, const char *const *keys, size_t n_keys,
			char *buf, size_t n)
{
	const char *const *values;
	size_t len = 0;

	buf[0] = '\0';
	if (kb_sweep_point(s, i, NULL, &values, NULL))
		return;
	for (size_t k = 0; k < n_keys && len < n; k++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", k ? ", " : "", keys[k],
					values[k]);
}

int sweep_headline(FILE *out, const kb_sweep *s, const char *const *benches, size_t n_benches,
		   const char *const *keys, size_t n_keys, const kb_sweep_figures *figs)
{
	int b2 = bench_index(benches, n_benches, "gqa_decode_opt2");
	int b3 = bench_index(benches, n_benches, "gqa_decode_opt3");
	const int f = KB_SWEEP_FIG_DISPATCH_PER_TILE_NS;
	size_t per;

	if (b2 < 0 || b3 < 0 || !figs)
		return 0;
	per = kb_sweep_points(s) / n_benches;
	for (size_t r = 0; r < per; r++) {
		const kb_sweep_figures *k2 = &figs[(size_t)b2 * per + r];
		const kb_sweep_figures *k3 = &figs[(size_t)b3 * per + r];
		char label[512];

		if (!k2->present || !k2->ok || !k3->present || !k3->ok || !isfinite(k2->fig[f]) ||
		    !isfinite(k3->fig[f]) || k2->fig[f] == 0)
			continue;
		point_label(s, (size_t)b3 * per + r, keys, n_keys, label, sizeof(label));
		fprintf(out, "%s%sopt3/opt2 per-tile dispatch ratio = %.2f\n", label,
			*label ? ": " : "", k3->fig[f] / k2->fig[f]);
	}
	errno = 0;
	if (fflush(out) != 0 || ferror(out))
		return cli_error("could not write the sweep's summary to %s: %s",
				 out == stdout ? "standard output" : "standard error",
				 strerror(errno ? errno : EIO));
	return 0;
}
