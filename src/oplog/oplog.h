/*
 * The op_log: one JSON Lines record per finished stage or dispatch.
 *
 * Each LP writes its records into its own lane (no sharing across threads).
 * The executor calls kb__oplog_flush(log, bound) whenever every record with
 * t1 < bound is known; the lanes are merged in the fixed total order
 * (t1, lane = LP id, per-lane sequence) and streamed to the sinks: the
 * SHA-256 (always), the file, the Chrome/Perfetto trace and the callback.
 * So the bytes never depend on the executor or thread count, and memory
 * holds only records not yet final.
 */
#ifndef KB_OPLOG_OPLOG_H
#define KB_OPLOG_OPLOG_H

#include <stdatomic.h>
#include <stdio.h>

#include "base/time.h"
#include "kernbench/common.h"
#include "kernbench/oplog.h"

typedef struct kb_oplog kb_oplog;
typedef struct kb_oplog_lane kb_oplog_lane;

typedef struct kb_oplog_options {
	const char *path;         /* op_log file; NULL: none (hash still computed) */
	const char *trace_path;   /* Chrome trace file; NULL: none */
	kb_oplog_cb callback;     /* per record; NULL: none */
	void *payload;            /* passed to callback */
	/* What the trace needs to know of the model above: its engines' names
	 * in track order (a record's "eng" picks one; an unknown name the
	 * last; NULL: one track) and the channel (a static string) a record of
	 * engine index eng runs on, each channel a track of its own (NULL:
	 * the engine's name). */
	const char *const *tracks;
	int n_tracks;
	const char *(*channel)(int eng, const kb_oplog_record *rec);
	/* A JSON object recorded as the trace's "metadata" (provenance: never
	 * in the op_log, which must not depend on host or date); NULL: none. */
	const char *trace_metadata;
} kb_oplog_options;

int kb__oplog_create(kb_oplog **out, const kb_oplog_options *opt, kb_error *err);
/* Lane for one LP; lanes are merged in the order of `order` (the LP id,
 * at most KB_OPLOG_MAX_ORDER; NULL past it or out of memory). */
#define KB_OPLOG_MAX_ORDER (UINT32_MAX >> 1)
kb_oplog_lane *kb__oplog_lane(kb_oplog *log, uint32_t order);
/* From now on every record is written by one thread at a time, each
 * before the next is begun (a sequential executor): records that come in
 * their final order (t1, lane order) go to one buffer shared by the
 * lanes, whose text a flush hashes and writes as it is, with no merge.
 * Bytes as without it. KB_ENOMEM (nothing changes) when out of memory. */
int kb__oplog_serial(kb_oplog *log);
/* Records come from several threads again (a parallel executor after a
 * stretch run by one; between windows, on the thread that flushes): the
 * shared buffer takes no more records and its own stay, merged as any
 * lane's by their keys; its flushed bytes not hashed yet are hashed now.
 * kb__oplog_serial may follow again. Bytes as without either. */
void kb__oplog_parallel(kb_oplog *log);
/* A serial run's flushed bytes that the hash has not taken yet, as the
 * sequential executor's spread work (kb_sim_config.step_n, on_step,
 * step_ctx): *n is nonzero while there are some (read through the
 * pointer; 0 in any other run), and step(ctx) hashes the next piece of
 * them (half a block), on the thread that writes the records, between
 * records. step is the hash's own piece function: no call between. */
void kb__oplog_hash_steps(kb_oplog *log, const size_t **n, void (**step)(void *), void **ctx);
/* A record's members after the fixed ones (issue 20 section 2, "record
 * fields"): typed values that the op_log formats, so that no model code
 * writes JSON. The key is given as a plain JSON key (a string literal) and
 * kept as the member's whole prefix, `,"key":`, so the record copies one
 * short string of known length per member. */
typedef enum kb_field_type { KB_FIELD_U64, KB_FIELD_I64, KB_FIELD_STR } kb_field_type;
typedef struct kb_oplog_field {
	const char *key;          /* ,"key": (a static string) */
	uint32_t key_len;         /* strlen(key), known when compiling */
	kb_field_type type;
	union {
		uint64_t u;
		int64_t i;
		const char *s;
	} v;
} kb_oplog_field;
/* k must be a string literal (",\"" k does not compile otherwise): the
 * prefix and its length are made here, once, rather than per record. */
#define KB_FIELD_KEY(k) (",\"" k "\":"), sizeof(",\"" k "\":") - 1
#define KB_FIELD_U(k, x) ((kb_oplog_field){ KB_FIELD_KEY(k), KB_FIELD_U64, { .u = (x) } })
#define KB_FIELD_I(k, x) ((kb_oplog_field){ KB_FIELD_KEY(k), KB_FIELD_I64, { .i = (x) } })
#define KB_FIELD_S(k, x) ((kb_oplog_field){ KB_FIELD_KEY(k), KB_FIELD_STR, { .s = (x) } })

/* Appends a record to a lane, with n_fields more members after the fixed
 * keys, in that order (fields may be NULL when n_fields is 0). t1 must not
 * decrease within a lane. The record's eng, op and kind are static strings
 * (string literals or tables that live as long as the log): the lane keeps
 * the text they format to by their address. */
int kb__oplog_emit(kb_oplog_lane *lane, const kb_oplog_record *rec, const kb_oplog_field *fields,
		   int n_fields);
/* An engine stage's record (pe/engines.c): the bytes kb__oplog_emit
 * writes with the fields step, n when n >= 0, and operand when it is not
 * NULL, in that order, with no list of fields to walk (issue 13). rec
 * holds what is the same every stage (pe, eng, size; kind NULL, lbytes
 * -1), st by value the rest: the record's times, op, cmd and bytes
 * (rec's are not read), so that they reach the inlined emit in
 * registers, not stored and read back (a stage's record stored five
 * members of rec and three of st on the stack). */
typedef struct kb_oplog_stage {
	uint64_t t0_ps, t1_ps;
	const char *op;
	uint64_t cmd;
	int64_t bytes;
	uint64_t step;
	int64_t n;
	const char *operand;
} kb_oplog_stage;
int kb__oplog_emit_stage(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_stage st);
/* kb__oplog_emit_stage in two, for a caller that inlines the first
 * (pe/engines.c): _fast writes the common record, or returns
 * KB_OPLOG_RARE, and then _rare (out of line) writes it, with st worked
 * out again by the caller there rather than kept live across _fast. */
#define KB_OPLOG_RARE 1
int kb__oplog_emit_stage_fast(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_stage st);
int kb__oplog_emit_stage_rare(kb_oplog_lane *lane, const kb_oplog_record *rec, const kb_oplog_stage *st);
/* PE_CPU's dispatch record the same way: rec holds what is the same
 * every command (pe, eng, op "dispatch", bytes), d the rest (rec's are
 * not read). */
typedef struct kb_oplog_dispatch {
	uint64_t t0_ps, t1_ps, cmd;
	const char *kind;
	int64_t lbytes;
} kb_oplog_dispatch;
int kb__oplog_emit_dispatch_fast(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_dispatch d);
int kb__oplog_emit_dispatch_rare(kb_oplog_lane *lane, const kb_oplog_record *rec, const kb_oplog_dispatch *d);
/* Merges and writes every record with t1 < bound (KB_TIME_INF: all). */
int kb__oplog_flush(kb_oplog *log, kb_time bound, kb_error *err);
/* Parallel executor: when every buffered record is final (a window has
 * closed), seal the lanes: their records move aside, cut into slices by
 * end time, for kb__oplog_flush_sealed, which the coordinating thread runs
 * while the LPs' threads go on writing new records; other threads may
 * merge slices for it meanwhile (kb__oplog_share). Sealed records come
 * before any record written after the seal. Call flush_sealed before
 * sealing again. Seal and flush run while no share runs; KB_ENOMEM when
 * the slices cannot be planned (nothing is lost: flush writes them). */
int kb__oplog_seal(kb_oplog *log);
int kb__oplog_flush_sealed(kb_oplog *log, kb_error *err);
/* The in-order part of flush_sealed as a pipeline stage that may lag
 * behind the windows: sinks sealed slices in order (merging those nobody
 * has taken) until no more than keep wait, or, with busy, as soon as busy
 * reads 0 between pieces of about 32 KB (the other threads are done with
 * the window and wait). The rest stays queued, in order, ahead of any
 * later seal's, and costs memory: callers bound it with keep. A seal
 * first merges what nobody has of the batch before, so it may follow at
 * once; a flush sinks the whole queue first. With a trace or a
 * callback everything is sunk at once (their records point into the
 * lanes). Same thread rules as flush_sealed. */
int kb__oplog_sink(kb_oplog *log, const atomic_uint *busy, size_t keep, kb_error *err);
/* threads merge sealed slices: a seal cuts at least that many slices
 * (of at least 128 records each) where records allow, not only one per
 * ~1024 records, so that a window's merge splits over every thread. */
void kb__oplog_threads(kb_oplog *log, unsigned threads);
/* Slices sealed and not yet sunk. */
size_t kb__oplog_waiting(const kb_oplog *log);
/* Any thread, between a seal and the end of the flush_sealed that follows
 * it: merges sealed slices that nobody has taken yet, and returns when
 * none is left. The bytes never depend on who merged what. */
void kb__oplog_share(kb_oplog *log);
/* Wall ns spent so far in the sinks (hash, file, trace, callback): the
 * part of the op_log that one thread does in order. */
uint64_t kb__oplog_sink_ns(const kb_oplog *log);
/* Records buffered in lanes (not sealed) and not yet flushed. */
size_t kb__oplog_buffered(const kb_oplog *log);
/* Marks the run as failed: finish will keep no op_log or trace file. */
void kb__oplog_discard(kb_oplog *log);
/* Flushes all, closes files; fills sha256 hex and the record count. The
 * op_log and trace are written under temporary names and renamed into
 * place here, when complete and not discarded; otherwise removed (an
 * earlier file at the name stays as it was). */
int kb__oplog_finish(kb_oplog *log, char sha_hex[65], uint64_t *records, kb_error *err);
void kb__oplog_destroy(kb_oplog *log);

#endif
