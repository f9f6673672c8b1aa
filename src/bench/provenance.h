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

/* kb_provenance_json's text, written directly (json_text.h); KB_OK with
 * *out NULL where only jansson's path writes it: kb__provenance_dump. */
int kb__provenance_text(const kb_provenance_options *opt, char **out, kb_error *err);
/* The same text through kb__provenance's object and json_dumps. */
int kb__provenance_dump(const kb_provenance_options *opt, char **out, kb_error *err);

#endif
