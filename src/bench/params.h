/*
 * Internal view of a kb_params list, for the bench runner and the sweep:
 * read the assignments in the order they were first made.
 *
 * Thread rules: a kb_params may be read by several threads at once; it must
 * not be modified while another thread reads it.
 */
#ifndef KB_BENCH_PARAMS_H
#define KB_BENCH_PARAMS_H

#include <stddef.h>

#include "kernbench/bench.h"

/* Number of assignments (0 for NULL). */
size_t kb__params_count(const kb_params *p);
/* Name and value of the i-th assignment; NULL past the end. */
const char *kb__params_name(const kb_params *p, size_t i);
const char *kb__params_value(const kb_params *p, size_t i);
/* Value assigned to name, or NULL when it has none (or p is NULL). */
const char *kb__params_get(const kb_params *p, const char *name);

/* A parameter's value text as a typed JSON value (integer, real, string):
 * what results, rows and the catalogue record. */
struct json_t;
struct json_t *kb__param_json(kb_param_type type, const char *text);

#endif
