/*
 * kb_result_to_json: the result as compact JSON text, written directly.
 *
 * The text is what jansson writes for kb__result_json's object
 * (json_dumps, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)),
 * byte for byte. Building that object meant parsing the stored params and
 * provenance texts back and formatting everything through jansson: a fifth
 * of a short run (issue 13). Here the members are written in the object's
 * order, and the stored texts are copied, their reals rewritten at the
 * result's precision, as jansson's parse and dump would give them. Whatever
 * this writer does not reproduce exactly (a string that is not plain
 * ASCII, or an escape other than \" \\ \b \f \n \r \t; whitespace,
 * duplicate names, deep nesting or a number out of range in the stored
 * texts; a busy engine named twice for a PE) falls back to jansson:
 * check_registry.c compares both on such results.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/bench_impl.h"
#include "bench/json_text.h"
#include "runtime/result.h"

/* A real member, or nothing when it is not finite (json_real refuses it,
 * and the object is left without the member). */
static void real_member(kb__jtext *b, const char *name, double v)
{
	if (isfinite(v)) {
		kb__jt_key(b, name, false);
		kb__jt_real(b, v, 12);
	}
}

static void real_or_null(kb__jtext *b, const char *name, double v)
{
	kb__jt_key(b, name, false);
	if (isfinite(v))
		kb__jt_real(b, v, 12);
	else
		kb__jt_put(b, "null", 4);
}

static void int_member(kb__jtext *b, const char *name, long long v)
{
	kb__jt_key(b, name, false);
	kb__jt_int(b, v);
}

/* busy_json's list: per PE, its engines' busy picoseconds or fractions. */
static void busy_list(kb__jtext *b, const kb_result *r, int util)
{
	kb__jt_put(b, "[", 1);
	for (uint32_t p = 0; p < r->pes && !b->bad; p++) {
		const char *seen[16];
		size_t n_seen = 0;

		kb__jt_put(b, p ? ",{" : "{", p ? 2 : 1);
		kb__jt_key(b, "pe", true);
		kb__jt_int(b, p);
		for (size_t i = 0; i < r->n_busy && !b->bad; i++) {
			const kb_engine_busy *e = &r->busy[i];

			if (e->pe != p)
				continue;
			/* A name twice (or "pe"): jansson keeps one member. */
			if (!e->eng || strcmp(e->eng, "pe") == 0 || n_seen == 16) {
				b->bad = true;
				break;
			}
			for (size_t k = 0; k < n_seen; k++)
				if (strcmp(seen[k], e->eng) == 0)
					b->bad = true;
			seen[n_seen++] = e->eng;
			kb__jt_key(b, e->eng, false);
			if (util)
				kb__jt_real(b, r->sim_time_ps ? (double)e->busy_ps / (double)r->sim_time_ps
							   : 0.0, 12);
			else
				kb__jt_int(b, (json_int_t)e->busy_ps);
		}
		kb__jt_put(b, "}", 1);
	}
	kb__jt_put(b, "]", 1);
}

/* The text, or NULL (then the caller asks jansson). */
static char *result_text(const kb_result *r, kb__jtext *b)
{
	kb__jt_put(b, "{", 1);
	kb__jt_key(b, "bench", true);
	kb__jt_string(b, r->bench);
	kb__jt_key(b, "params", false);
	if (r->params_json)
		kb__jt_copy(b, r->params_json, 12);
	else
		kb__jt_put(b, "{}", 2);
	kb__jt_key(b, "threads", false);
	if (r->threads == KB_THREADS_AUTO)
		kb__jt_string(b, "auto");
	else
		kb__jt_int(b, r->threads);
	int_member(b, "workers", r->workers);
	kb__jt_key(b, "data", false);
	kb__jt_put(b, r->data ? "true" : "false", r->data ? 4 : 5);
	int_member(b, "pes", r->pes);
	int_member(b, "sim_time_ps", (json_int_t)r->sim_time_ps);
	int_member(b, "events", (json_int_t)r->events);
	int_member(b, "records", (json_int_t)r->records);
	int_member(b, "commands", (json_int_t)r->commands);
	int_member(b, "dispatch_ps", (json_int_t)r->dispatch_ps);
	if (r->tiles) {
		int_member(b, "tiles", (json_int_t)r->tiles);
		real_or_null(b, "dispatch_per_tile_ns", r->dispatch_per_tile_ns);
		real_or_null(b, "dispatch_kernel_per_tile_ns", r->dispatch_kernel_per_tile_ns);
	}
	int_member(b, "windows", (json_int_t)r->windows);
	int_member(b, "parallel_windows", (json_int_t)r->parallel_windows);
	if (r->windows) {
		kb__jt_key(b, "executor", false);
		kb__jt_put(b, "{", 1);
		kb__jt_key(b, "threads", true);
		kb__jt_int(b, r->exec.threads);
		int_member(b, "window_ps", (json_int_t)r->exec.window_ps);
		int_member(b, "ns_events", (json_int_t)r->exec.ns_events);
		int_member(b, "ns_barrier", (json_int_t)r->exec.ns_barrier);
		int_member(b, "ns_next", (json_int_t)r->exec.ns_next);
		int_member(b, "ns_drain", (json_int_t)r->exec.ns_drain);
		int_member(b, "ns_oplog", (json_int_t)r->exec.ns_oplog);
		int_member(b, "ns_wall", (json_int_t)r->exec.ns_wall);
		int_member(b, "ns_oplog_serial", (json_int_t)r->exec.ns_oplog_serial);
		int_member(b, "gathered", r->exec.gathered);
		if (KB__RESULT_HAS(r, exec_switches)) {
			int_member(b, "alone_events", (json_int_t)r->alone_events);
			int_member(b, "switches", (json_int_t)r->exec_switches);
		}
		kb__jt_put(b, "}", 1);
	}
	real_member(b, "wall_s", r->wall_s);
	real_member(b, "events_per_s", r->events_per_s);
	kb__jt_key(b, "oplog_sha256", false);
	kb__jt_string(b, r->oplog_sha256);
	if (r->data) {
		real_or_null(b, "max_abs_err", r->max_abs_err);
		real_or_null(b, "max_rel_err", r->max_rel_err);
	}
	if (r->n_busy) {
		kb__jt_key(b, "busy_ps", false);
		busy_list(b, r, 0);
		kb__jt_key(b, "utilization", false);
		busy_list(b, r, 1);
	}
	if (r->meta_json) {
		kb__jt_key(b, "meta", false);
		kb__jt_copy(b, r->meta_json, 12);
	}
	kb__jt_put(b, "}", 1);
	return kb__jt_finish(b);
}

/* The same text through jansson: the object, then its dump. */
char *kb__result_to_json_jansson(const kb_result *r)
{
	json_t *o = kb__result_json(r);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12))
		    : NULL;

	json_decref(o);
	return s;
}

char *kb__result_text(const kb_result *r)
{
	kb__jtext b = KB__JTEXT_INIT;
	char *s;

	if (!r || r->size < KB_RESULT_SIZE_V1)
		return NULL;
	s = result_text(r, &b);
	return s;
}

KB_API char *kb_result_to_json(const kb_result *r)
{
	char *s = kb__result_text(r);

	return s ? s : kb__result_to_json_jansson(r);
}
