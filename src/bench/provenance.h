/* The provenance object of a result (kb_provenance_json), for the library's
 * own writers: run results, dump folders, sweep rows. */
#ifndef KB_BENCH_PROVENANCE_H
#define KB_BENCH_PROVENANCE_H

#include <jansson.h>

#include "kernbench/json.h"

/* A new object (json_decref it), or NULL with err set. */
json_t *kb__provenance(const kb_provenance_options *opt, kb_error *err);

#endif
