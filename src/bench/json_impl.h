/*
 * The JSON entry points' input helpers (json_api.c), shared with the
 * sweep's JSON entry point (src/sweep/json.c).
 */
#ifndef KB_BENCH_JSON_IMPL_H
#define KB_BENCH_JSON_IMPL_H

#include <stddef.h>

#include <jansson.h>

#include "kernbench/topology.h"

/* Run options shared by runs, sweeps and simulations. */
typedef struct json_opts {
	int threads, data, kernel_threads;
	long long pes, jobs;
	const char *op_log, *trace, *dump;
	const char **argv;
	int argc;
} json_opts;

/* Parses text as a JSON object (NULL text: an empty object). */
json_t *kb__json_parse_object(const char *text, const char *what, kb_error *err);
/* A scalar JSON value as the text the ordinary API takes. */
int kb__json_value_text(const json_t *v, const char *key, char *buf, size_t n, kb_error *err);
/* A topology from an object: a whole topology (with "schema") or keys over the default. */
int kb__json_topology_from(kb_topology **out, const json_t *o, kb_error *err);
/* Reads the options named in allowed (space-separated) from o. */
int kb__json_read_opts(const json_t *o, const char *allowed, json_opts *jo, kb_error *err);

#endif
