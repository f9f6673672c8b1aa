/*
 * The provenance of a sweep, written once per sweep beside its output as
 * OUT.meta.json (the rows stay as they are): version, git revision, the
 * SHA-256 of the base topology, the sweep's definition (benches, --param
 * and --set lists, -j, --threads, --data), the command line, host and UTC
 * date. --resume refuses to continue an output whose record names another
 * topology hash or another version, unless --force.
 */
#ifndef KB_CLI_SWEEP_META_H
#define KB_CLI_SWEEP_META_H

#include <stddef.h>

#include "kernbench/json.h"

typedef struct cli_sweep_def {
	const char *const *benches;
	size_t n_benches;
	const char *const *params;   /* "NAME=V1,V2" as given */
	size_t n_params;
	const char *const *sets;     /* "KEY=V1,V2" as given */
	size_t n_sets;
	unsigned jobs;
	int threads, data;
} cli_sweep_def;

/* Writes OUT.meta.json; 0, or 1 after printing the error. */
int cli_sweep_meta_write(const char *out, const kb_topology *base, const cli_sweep_def *d);
/*
 * With --resume, before the old output is touched: 0 when OUT.meta.json is
 * absent or records the same topology hash and version; otherwise prints
 * what differs and returns 1, or with force warns and returns 0.
 */
int cli_sweep_meta_check(const char *out, const kb_topology *base, int force);

#endif
