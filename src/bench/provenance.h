/* The provenance object of a result (kb_provenance_json), for the library's
 * own writers: run results, dump folders, sweep rows. */
#ifndef KB_BENCH_PROVENANCE_H
#define KB_BENCH_PROVENANCE_H

#include <jansson.h>

#include "kernbench/json.h"

/* A new object (json_decref it), or NULL with err set. params, when not
 * NULL, is the parameters object, taken (its reference is the caller's no
 * more) in place of parsing opt->params_json: a run has the object at
 * hand, and parsing its text again cost a run ~25,000 instructions
 * (issue 13). */
json_t *kb__provenance(const kb_provenance_options *opt, json_t *params, kb_error *err);

#endif
