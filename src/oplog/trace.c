#include "oplog/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/outfile.h"
#include "base/str.h"
#include "oplog/oplog.h"

/*
 * Perfetto draws complete events on one track only when they nest; two that
 * partly overlap are drawn wrong (one hides the other). So each channel of an
 * engine (PE_DMA's read and write, PE_IPCQ's send and receive) has a track of
 * its own, and a record that would still partly overlap one already on its
 * channel's track (waits on PE_SCHEDULER, which several commands can do at
 * once) goes to the channel's next track ("sched 2"), opened when needed.
 */
typedef struct track {
	const char *chan;        /* static string: engine or channel name */
	uint64_t end_ps;         /* latest t1 on the track */
	int tid;
} track;

typedef struct pe_tracks {
	track *t;
	size_t n, cap;
	int named;               /* process_name written */
} pe_tracks;

struct kb_trace {
	kb_outfile out;          /* renamed into place when whole */
	FILE *f;                 /* out.f */
	char *path;
	int first;
	pe_tracks *pes;          /* per PE, grown on demand */
	size_t pes_cap;
	int ended;               /* the closing bracket is written */
	int closed;
	const char *const *tracks;
	int n_tracks;
	kb_trace_channel_fn channel;
	char *metadata;          /* a JSON object written as "metadata" at close; NULL: none */
};

int kb__trace_open(kb_trace **out, const char *path, const char *const *tracks, int n_tracks,
		   kb_trace_channel_fn channel, kb_error *err)
{
	kb_trace *t;

	*out = NULL;
	if (n_tracks < 0 || (n_tracks && !tracks))
		return kb__err(err, KB_EINVAL, "trace: %d engine names at %p", n_tracks,
			       (const void *)tracks);
	t = calloc(1, sizeof(*t));
	if (!t)
		return kb__err(err, KB_ENOMEM, "out of memory opening the trace");
	t->tracks = tracks;
	t->n_tracks = n_tracks;
	t->channel = channel;
	t->path = strdup(path);
	if (t->path && kb__outfile_open(&t->out, path, "w") == 0)
		t->f = t->out.f;
	if (!t->path || !t->f) {
		int rc = kb__outfile_error(err, "opening", "trace", path);

		kb__outfile_close(&t->out, 0);
		free(t->path);
		free(t);
		return rc;
	}
	setvbuf(t->f, NULL, _IOFBF, 1 << 20);
	t->first = 1;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", t->f);
	*out = t;
	return KB_OK;
}

/* The track of a record's engine: by name, an unknown one the last. */
static int eng_index(const kb_trace *t, const char *eng)
{
	for (int i = 0; i < t->n_tracks; i++)
		if (strcmp(t->tracks[i], eng) == 0)
			return i;
	return t->n_tracks ? t->n_tracks - 1 : 0;
}

/* Picoseconds as microseconds with six decimals: exact, no floating point. */
static void print_us(FILE *f, uint64_t ps)
{
	fprintf(f, "%" PRIu64 ".%06" PRIu64, ps / 1000000u, ps % 1000000u);
}

static void sep(kb_trace *t)
{
	if (!t->first)
		fputs(",\n", t->f);
	t->first = 0;
}

/* The channel a record runs on: the model says (kb_oplog_options). */
static const char *channel_of(const kb_trace *t, int eng, const kb_oplog_record *r)
{
	if (t->channel)
		return t->channel(eng, r);
	return t->n_tracks ? t->tracks[eng] : "ops";
}

static pe_tracks *pe_of(kb_trace *t, uint32_t pe)
{
	if (pe >= t->pes_cap) {
		pe_tracks *s = kb__grow_to(t->pes, &t->pes_cap, sizeof(*s), 64, pe);

		if (!s)
			return NULL;
		t->pes = s;
	}
	return &t->pes[pe];
}

static void name_track(kb_trace *t, uint32_t pe, const track *k, int nth)
{
	sep(t);
	fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRIu32
		",\"tid\":%d,\"args\":{\"name\":\"%s", pe, k->tid, k->chan);
	if (nth > 1)
		fprintf(t->f, " %d", nth);
	fputs("\"}}", t->f);
}

/* Records come in t1 order, so a track's events never partly overlap if a
 * record goes to the first track of its channel that ended by its t0. Thread
 * ids are engine * 64 + the track's rank within the engine, so Perfetto
 * lists the tracks in engine order. Returns the tid, or -1 out of memory. */
static int track_of(kb_trace *t, const kb_oplog_record *r)
{
	int eng = eng_index(t, r->eng), rank = 0, nth = 1;
	const char *chan = channel_of(t, eng, r);
	pe_tracks *pt = pe_of(t, r->pe);
	track *k;

	if (!pt)
		return -1;
	if (!pt->named) {
		sep(t);
		fprintf(t->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
			",\"args\":{\"name\":\"pe%" PRIu32 "\"}}", r->pe, r->pe);
		pt->named = 1;
	}
	for (size_t i = 0; i < pt->n; i++) {
		k = &pt->t[i];
		if (k->tid / 64 != eng)
			continue;
		rank++;
		if (strcmp(k->chan, chan) != 0)
			continue;
		if (k->end_ps <= r->t0_ps) {
			k->end_ps = r->t1_ps;
			return k->tid;
		}
		nth++;
	}
	if (pt->n == pt->cap) {
		track *n = kb__grow(pt->t, &pt->cap, sizeof(*n), 8);

		if (!n)
			return -1;
		pt->t = n;
	}
	k = &pt->t[pt->n++];
	k->chan = chan;
	k->end_ps = r->t1_ps;
	k->tid = eng * 64 + rank;
	name_track(t, r->pe, k, nth);
	return k->tid;
}

int kb__trace_record(kb_trace *t, const kb_oplog_record *r)
{
	int tid = track_of(t, r);

	if (tid < 0)
		return -1;
	sep(t);
	fprintf(t->f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":", r->op, r->eng);
	print_us(t->f, r->t0_ps);
	fputs(",\"dur\":", t->f);
	print_us(t->f, r->t1_ps - r->t0_ps);
	fprintf(t->f, ",\"pid\":%" PRIu32 ",\"tid\":%d,\"args\":%.*s}", r->pe, tid,
		(int)r->json_len, r->json);
	return ferror(t->f) ? -1 : 0;
}

int kb__trace_set_metadata(kb_trace *t, const char *json_object)
{
	int failed = 0;

	free(t->metadata);
	t->metadata = kb__strdup_opt(json_object, &failed);
	return failed ? -1 : 0;
}

int kb__trace_end(kb_trace *t)
{
	if (t->closed || t->ended)
		return 0;
	t->ended = 1;
	/* The trace format's own place for facts about the whole trace. */
	if (t->metadata)
		fprintf(t->f, "\n],\"metadata\":%s}\n", t->metadata);
	else
		fputs("\n]}\n", t->f);
	return ferror(t->f) || fflush(t->f) == EOF ? -1 : 0;
}

int kb__trace_close(kb_trace *t, int keep)
{
	if (t->closed)
		return 0;
	t->closed = 1;
	if (keep && kb__trace_end(t)) {
		kb__outfile_close(&t->out, 0);
		return -1;
	}
	return kb__outfile_close(&t->out, keep);
}

const char *kb__trace_path(const kb_trace *t)
{
	return t->path;
}

void kb__trace_free(kb_trace *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->pes_cap; i++)
		free(t->pes[i].t);
	free(t->pes);
	free(t->path);
	free(t->metadata);
	free(t);
}
