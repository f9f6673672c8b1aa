/*
 * Internal layout of a kb_sweep, shared by the builder (sweep.c) and the
 * runner (sweep_run.c).
 */
#ifndef KB_BENCH_SWEEP_IMPL_H
#define KB_BENCH_SWEEP_IMPL_H

#include <stdatomic.h>
#include <stddef.h>

#include "kernbench/registry.h"
#include "kernbench/sweep.h"

typedef struct sweep_key {
	char *name;
	int is_set;          /* topology key (--set) rather than a bench parameter */
	char **values;
	size_t n_values;
} sweep_key;

struct kb_sweep {
	kb_sweep_options opt;
	char **benches;
	size_t n_benches;
	sweep_key *keys;
	size_t n_keys;
	const char **key_names;  /* keys[i].name, as rows expose them */
	const char **scratch;    /* kb_sweep_point's answer (n_keys entries) */
	kb_topology *topo;       /* base topology; NULL: the embedded default */
	unsigned char *skip;     /* one byte per point once kb_sweep_skip was called */
	atomic_int cancel;
	int running;             /* kb_sweep_run in progress (same thread only) */
};

/*
 * Decodes a point index into its bench and one value per key (values has
 * n_keys entries): the odometer with the last key varying fastest.
 */
const char *kb__sweep_decode(const kb_sweep *s, size_t index, const char **values);
/* The registry of the sweep's benches: its option, else the built-ins. */
const kb_registry *kb__sweep_registry(const kb_sweep *s);

#endif
