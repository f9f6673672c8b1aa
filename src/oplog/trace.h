/* Chrome Trace Event Format writer (opens in Perfetto UI and chrome://tracing):
 * one process per PE, one thread (track) per engine channel, and more where
 * records would partly overlap (see trace.c); complete ("X") events with
 * microsecond timestamps printed with picosecond precision. */
#ifndef KB_OPLOG_TRACE_H
#define KB_OPLOG_TRACE_H

#include "kernbench/common.h"
#include "kernbench/oplog.h"

typedef struct kb_trace kb_trace;

/* tracks: engine names by index; channel: the channel (a static string) a
 * record of engine index eng runs on, NULL for the engine's name
 * (kb_oplog_options). */
typedef const char *(*kb_trace_channel_fn)(int eng, const kb_oplog_record *rec);
int kb__trace_open(kb_trace **out, const char *path, const char *const *tracks, int n_tracks,
		   kb_trace_channel_fn channel, kb_error *err);
/* A JSON object written as the trace's "metadata" (provenance) at close;
 * copied. Nonzero when memory runs out. */
int kb__trace_set_metadata(kb_trace *t, const char *json_object);
/* Returns nonzero on a write error (errno set). */
int kb__trace_record(kb_trace *t, const kb_oplog_record *rec);
/* Writes the closing bracket (and metadata) and flushes; nonzero on a
 * write error. */
int kb__trace_end(kb_trace *t);
/* Closes the file: when keep, ends it and renames it into place (it is
 * written under a temporary name); otherwise removes it. Nonzero on a
 * write, close or rename error (errno set). */
int kb__trace_close(kb_trace *t, int keep);
const char *kb__trace_path(const kb_trace *t);
void kb__trace_free(kb_trace *t);

#endif
