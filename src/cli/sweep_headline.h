/*
 * The reporting step after a sweep: the summary lines that know about
 * particular benches. Today one: with both gqa_decode_opt2 and
 * gqa_decode_opt3 swept, the opt3/opt2 per-tile dispatch ratio at each
 * combination of the keys. The sweep itself (library) knows no bench.
 */
#ifndef KB_CLI_SWEEP_HEADLINE_H
#define KB_CLI_SWEEP_HEADLINE_H

#include <stdio.h>

#include "kernbench/sweep.h"

/* Whether the benches make a headline (so figures must be kept). */
int sweep_headline_wanted(const char *const *benches, size_t n_benches);
/*
 * Prints the summary lines to out from figs (one per point). 0, or
 * CLI_FAIL with a message when they cannot be written (a closed pipe, a
 * full disk): a lost summary is a failure.
 */
int sweep_headline(FILE *out, const kb_sweep *s, const char *const *benches, size_t n_benches,
		   const char *const *keys, size_t n_keys, const kb_sweep_figures *figs);

#endif
