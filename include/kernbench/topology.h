/*
 * Device topology: the JSON document that describes clusters, PEs, engine
 * latency models, links and memory sizes (`kernbench topology` prints every
 * key with its value).
 *
 * A kb_topology holds one effective, validated document. Loading starts from
 * the embedded default and overlays every key present in the input, so a
 * partial file is fine. Every change is validated (types, ranges, cross-key
 * rules); a call that fails leaves the topology unchanged.
 *
 * Thread rules: every function may be called from any thread. Distinct
 * kb_topology objects are independent. One kb_topology may be read (get,
 * dump, clone) by several threads at once, but must not be modified (set,
 * destroy) while another thread uses it without the caller's own locking.
 */
#ifndef KERNBENCH_TOPOLOGY_H
#define KERNBENCH_TOPOLOGY_H

#include "kernbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The schema identifier every topology document must carry in "schema". */
#define KB_TOPOLOGY_SCHEMA "kernbench-topology/1"

typedef struct kb_topology kb_topology;

/*
 * Creates a topology holding the embedded default. On success stores it in
 * *out (free with kb_topology_destroy) and returns 0. Errors: KB_EINVAL (out
 * is NULL), KB_ENOMEM. Any thread.
 */
KB_API int kb_topology_default(kb_topology **out, kb_error *err);

/*
 * Reads the JSON file at path and overlays it on the default. Errors: KB_EIO
 * (file unreadable; names the path and the system error), KB_EPARSE
 * (malformed JSON; err->source is the path, err->line and err->column the
 * position, the message "FILE:LINE:COL: TEXT"), KB_EKEY (unknown key, or the
 * required "schema" key missing), KB_EINVAL (unsupported schema, NULL
 * argument), KB_ETYPE, KB_ERANGE (names key, value and valid range),
 * KB_ENOMEM. *out is untouched on error. Any thread.
 */
KB_API int kb_topology_load_file(kb_topology **out, const char *path, kb_error *err);

/*
 * Like kb_topology_load_file for a NUL-terminated JSON text; err->source is
 * "<string>" for parse errors. Any thread.
 */
KB_API int kb_topology_load_string(kb_topology **out, const char *json_text, kb_error *err);

/*
 * An independent copy of t into *out. Errors: KB_EINVAL (out or t NULL),
 * KB_ENOMEM. *out is untouched on error. Any thread; t may be read
 * concurrently by others.
 */
KB_API int kb_topology_clone(kb_topology **out, const kb_topology *t, kb_error *err);

/*
 * Sets the number at dotted_key (e.g. "pe.dma.setup_cycles") from its text.
 * The text must be a whole number for integer keys and a decimal or
 * exponent form for real keys, without surrounding spaces. Errors: KB_EKEY
 * (unknown key), KB_EPARSE (not a number), KB_ETYPE (a fraction for an
 * integer key, or a key naming an object), KB_ERANGE (out of range or a
 * cross-key rule broken), KB_EINVAL ("schema" or a NULL argument). t is
 * unchanged on error. Any thread; no other thread may use t meanwhile.
 */
KB_API int kb_topology_set(kb_topology *t, const char *dotted_key, const char *value,
			   kb_error *err);

/*
 * Like kb_topology_set for one "dotted.key=value" text (spaces around '='
 * are ignored), as given to the CLI's --set. Errors: as kb_topology_set, and
 * KB_EPARSE when there is no '=' or no key. Any thread; no other thread may
 * use t meanwhile.
 */
KB_API int kb_topology_set_assignment(kb_topology *t, const char *key_eq_value, kb_error *err);

/*
 * Stores the value at dotted_key in *out (integers are exact up to 2^53).
 * Errors: KB_EKEY (unknown key), KB_ETYPE (key is "schema" or an object),
 * KB_EINVAL (NULL argument). Any thread; t may be read concurrently.
 */
KB_API int kb_topology_get_number(const kb_topology *t, const char *dotted_key, double *out,
				  kb_error *err);

/*
 * Returns the effective topology as pretty JSON (indent 2, keys in schema
 * order, ending in a newline) that kb_topology_load_string reads back to
 * the same values. Free with kb_free. NULL when t is NULL or memory runs
 * out. Any thread; t may be read concurrently.
 */
KB_API char *kb_topology_dump(const kb_topology *t);

/*
 * Stores in hex[65] the SHA-256 of the effective topology: of the exact
 * bytes kb_topology_dump returns (and `kernbench topology` prints), as 64
 * lowercase hex digits and a NUL. Two topologies with the same effective
 * values have the same hash, however they were written. This is the hash
 * that results, sweeps and resume record. Errors: KB_EINVAL (NULL
 * argument), KB_ENOMEM. Any thread; t may be read concurrently.
 */
KB_API int kb_topology_sha256(const kb_topology *t, char hex[65], kb_error *err);

/* Frees a topology. Accepts NULL. Any thread; no other thread may use t. */
KB_API void kb_topology_destroy(kb_topology *t);

/* Frees a string returned by the library. Accepts NULL. Any thread. */
KB_API void kb_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
