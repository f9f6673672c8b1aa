#include "oplog/oplog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/sha256.h"
#include "oplog/trace.h"

/* One buffered record; its JSON text lives in the lane's text buffer. */
typedef struct lane_entry {
	kb_oplog_record rec;   /* json points nowhere until flushed */
	size_t text_off;
	uint32_t text_len;
} lane_entry;

/* Records and their text, appended at the end, consumed from head. */
typedef struct lane_buf {
	lane_entry *ent;
	size_t n, cap, head;
	char *text;
	size_t text_n, text_cap;
} lane_buf;

/* A lane is written by its LP's thread (cur) and read by the sink: either
 * in place up to a time bound (sequential executor), or as a sealed buffer
 * (ready) that the sink merges while the LP goes on writing cur. */
struct kb_oplog_lane {
	uint32_t order;
	/* The trace or the callback reads each record's fields; else only
	 * t1 (the merge order) is kept beside the text. */
	int keep_fields;
	lane_buf cur, ready;
	atomic_int oom;          /* set by the writer, read by the sink */
};

struct kb_oplog {
	kb_oplog_lane **lanes;
	size_t n_lanes, cap_lanes;
	uint32_t *heap;          /* merge heap of lane indices */
	kb_sha256 sha;
	FILE *file;
	char *path;
	kb_trace *trace;
	kb_oplog_cb callback;
	void *payload;
	uint64_t records;
	/* Merged records, newline-terminated, waiting to be hashed and written
	 * in one go: a SHA-256 update and an fwrite per record (and one more
	 * of each for the newline) cost more than the copy. */
	char out[1 << 16];
	size_t out_n;
	int failed;
	int merging_ready;       /* which buffer of each lane merge() reads */
	kb_error error;
};

int kb__oplog_create(kb_oplog **out, const kb_oplog_options *opt, kb_error *err)
{
	kb_oplog *log = calloc(1, sizeof(*log));
	int rc;

	*out = NULL;
	if (!log)
		return kb__err(err, KB_ENOMEM, "out of memory creating the op_log");
	kb__sha256_init(&log->sha);
	if (opt && opt->path) {
		log->path = strdup(opt->path);
		log->file = fopen(opt->path, "w");
		if (!log->path || !log->file) {
			rc = kb__err(err, KB_EIO, "cannot write op_log '%s': %s", opt->path,
				     strerror(errno));
			goto fail;
		}
		setvbuf(log->file, NULL, _IOFBF, 1 << 20);
	}
	if (opt && opt->trace_path) {
		rc = kb__trace_open(&log->trace, opt->trace_path, opt->tracks, opt->n_tracks,
				    opt->channel, err);
		if (!rc && opt->trace_metadata && kb__trace_set_metadata(log->trace, opt->trace_metadata))
			rc = kb__err(err, KB_ENOMEM, "out of memory");
		if (rc)
			goto fail;
	}
	if (opt) {
		log->callback = opt->callback;
		log->payload = opt->payload;
	}
	*out = log;
	return KB_OK;
fail:
	if (log->file) {
		fclose(log->file);
		remove(log->path);
	}
	free(log->path);
	free(log);
	return rc;
}

kb_oplog_lane *kb__oplog_lane(kb_oplog *log, uint32_t order)
{
	kb_oplog_lane *lane;

	if (log->n_lanes == log->cap_lanes) {
		size_t cap = log->cap_lanes ? 2 * log->cap_lanes : 16;
		kb_oplog_lane **l = realloc(log->lanes, cap * sizeof(*l));
		uint32_t *h = realloc(log->heap, cap * sizeof(*h));

		if (l)
			log->lanes = l;
		if (h)
			log->heap = h;
		if (!l || !h)
			return NULL;
		log->cap_lanes = cap;
	}
	lane = calloc(1, sizeof(*lane));
	if (!lane)
		return NULL;
	lane->order = order;
	lane->keep_fields = log->trace || log->callback;
	log->lanes[log->n_lanes++] = lane;
	return lane;
}

static int lane_reserve(lane_buf *lane, size_t text_len)
{
	if (lane->n == lane->cap) {
		size_t cap = lane->cap ? 2 * lane->cap : 64;
		lane_entry *e = realloc(lane->ent, cap * sizeof(*e));

		if (!e)
			return -1;
		lane->ent = e;
		lane->cap = cap;
	}
	if (lane->text_n + text_len + 1 > lane->text_cap) {
		size_t cap = lane->text_cap ? 2 * lane->text_cap : 8192;
		char *t;

		while (cap < lane->text_n + text_len + 1)
			cap *= 2;
		t = realloc(lane->text, cap);
		if (!t)
			return -1;
		lane->text = t;
		lane->text_cap = cap;
	}
	return 0;
}

/* A bounded text builder: formatting records is the hot path of the log,
 * so it avoids printf, and copies whole strings (the keys' lengths are
 * known when compiling) rather than byte by byte. */
typedef struct tbuf {
	char *p, *end;
	int over;
} tbuf;

static inline void put_mem(tbuf *b, const char *s, size_t n)
{
	if ((size_t)(b->end - b->p) < n) {
		b->over = 1;
		return;
	}
	memcpy(b->p, s, n);
	b->p += n;
}

#define PUT_LIT(b, lit) put_mem((b), (lit), sizeof(lit) - 1)

static inline void put_str(tbuf *b, const char *s)
{
	put_mem(b, s, strlen(s));
}

/* Two digits per division: times and ids have 6 to 14 digits. */
static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static const uint64_t pow10_u64[20] = {
	UINT64_C(1), UINT64_C(10), UINT64_C(100), UINT64_C(1000), UINT64_C(10000),
	UINT64_C(100000), UINT64_C(1000000), UINT64_C(10000000), UINT64_C(100000000),
	UINT64_C(1000000000), UINT64_C(10000000000), UINT64_C(100000000000),
	UINT64_C(1000000000000), UINT64_C(10000000000000), UINT64_C(100000000000000),
	UINT64_C(1000000000000000), UINT64_C(10000000000000000),
	UINT64_C(100000000000000000), UINT64_C(1000000000000000000),
	UINT64_C(10000000000000000000),
};

/* Decimal digits of v: log10 from the bit length (1233/4096 ~ log10 2),
 * corrected by one comparison. */
static unsigned n_digits(uint64_t v)
{
	unsigned t = (unsigned)((64 - __builtin_clzll(v | 1)) * 1233) >> 12;

	return t + ((v | 1) >= pow10_u64[t]);   /* t <= 19; 0 has one digit */
}

/* Two digits at a time, back from q. */
static char *put_pairs32(char *q, uint32_t v)
{
	while (v >= 100) {
		unsigned d = (v % 100) * 2;

		v /= 100;
		*--q = digits2[d + 1];
		*--q = digits2[d];
	}
	if (v >= 10) {
		*--q = digits2[v * 2 + 1];
		*--q = digits2[v * 2];
	} else {
		*--q = (char)('0' + v);
	}
	return q;
}

/* Writes the digits in place, from the last one back; the low eight
 * digits at a time in 32-bit arithmetic (times have 10 to 14 digits). */
static void put_u64(tbuf *b, uint64_t v)
{
	unsigned n = n_digits(v);
	char *q;

	if ((size_t)(b->end - b->p) < n) {
		b->over = 1;
		return;
	}
	b->p += n;
	q = b->p;
	while (v >= 100000000) {
		uint32_t lo = (uint32_t)(v % 100000000);

		v /= 100000000;
		for (int i = 0; i < 4; i++) {
			unsigned d = (lo % 100) * 2;

			lo /= 100;
			*--q = digits2[d + 1];
			*--q = digits2[d];
		}
	}
	put_pairs32(q, (uint32_t)v);
}

static void put_i64(tbuf *b, int64_t v)
{
	if (v < 0) {
		PUT_LIT(b, "-");
		put_u64(b, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(b, (uint64_t)v);
	}
}

/* A JSON string's contents: quote, backslash and control characters escaped. */
static void put_json_str(tbuf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			put_str(b, c == '"' ? "\\\"" : "\\\\");
		} else if (c < 0x20) {
			char u[7] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4],
				      "0123456789abcdef"[c & 15], 0 };

			put_str(b, u);
		} else if (b->p < b->end) {
			*b->p++ = (char)c;
		} else {
			b->over = 1;
		}
	}
}

static void put_fields(tbuf *b, const kb_oplog_field *f, int n)
{
	for (int i = 0; i < n; i++) {
		PUT_LIT(b, ",\"");
		put_str(b, f[i].key);
		PUT_LIT(b, "\":");
		switch (f[i].type) {
		case KB_FIELD_U64:
			put_u64(b, f[i].v.u);
			break;
		case KB_FIELD_I64:
			put_i64(b, f[i].v.i);
			break;
		case KB_FIELD_STR:
			PUT_LIT(b, "\"");
			put_json_str(b, f[i].v.s ? f[i].v.s : "");
			PUT_LIT(b, "\"");
			break;
		}
	}
}

/* Formats the fixed keys in their contract order, then the optional ones. */
static int format_record(char *buf, size_t len, const kb_oplog_record *r,
			 const kb_oplog_field *fields, int n_fields)
{
	tbuf b = { buf, buf + len, 0 };

	PUT_LIT(&b, "{\"t0\":");
	put_u64(&b, r->t0_ps);
	PUT_LIT(&b, ",\"t1\":");
	put_u64(&b, r->t1_ps);
	PUT_LIT(&b, ",\"pe\":");
	put_u64(&b, r->pe);
	PUT_LIT(&b, ",\"eng\":\"");
	put_str(&b, r->eng);
	PUT_LIT(&b, "\",\"op\":\"");
	put_str(&b, r->op);
	PUT_LIT(&b, "\",\"cmd\":");
	put_u64(&b, r->cmd);
	if (r->kind) {
		PUT_LIT(&b, ",\"kind\":\"");
		put_str(&b, r->kind);
		PUT_LIT(&b, "\",\"lbytes\":");
		put_i64(&b, r->lbytes);
	}
	if (r->bytes >= 0) {
		PUT_LIT(&b, ",\"bytes\":");
		put_i64(&b, r->bytes);
	}
	put_fields(&b, fields, n_fields);
	PUT_LIT(&b, "}");
	return b.over ? -1 : (int)(b.p - buf);
}

/* The longest record: formatting stops (an error) past it. */
#define MAX_RECORD 1024

int kb__oplog_emit(kb_oplog_lane *lane, const kb_oplog_record *rec, const kb_oplog_field *fields,
		   int n_fields)
{
	lane_buf *b = &lane->cur;
	lane_entry *e;
	int n;

	/* Room for the longest record, then it is formatted in place. */
	if (lane_reserve(b, MAX_RECORD) ||
	    (n = format_record(b->text + b->text_n, MAX_RECORD, rec, fields, n_fields)) < 0) {
		atomic_store_explicit(&lane->oom, 1, memory_order_relaxed);
		return KB_ENOMEM;
	}
	e = &b->ent[b->n++];
	if (lane->keep_fields) {
		e->rec = *rec;
		e->rec.json = NULL;
	} else {
		e->rec.t1_ps = rec->t1_ps;
	}
	e->text_off = b->text_n;
	e->text_len = (uint32_t)n;
	b->text_n += (size_t)n;
	return KB_OK;
}

/* The buffer a merge reads: cur (in place, up to a bound) or ready (sealed). */
static lane_buf *merge_buf(const kb_oplog *log, uint32_t i)
{
	return log->merging_ready ? &log->lanes[i]->ready : &log->lanes[i]->cur;
}

/* Merge order: (t1 of the lane's head, lane order). */
static int lane_less(const kb_oplog *log, uint32_t a, uint32_t b)
{
	const lane_buf *la = merge_buf(log, a), *lb = merge_buf(log, b);
	kb_time ta = la->ent[la->head].rec.t1_ps, tb = lb->ent[lb->head].rec.t1_ps;

	return ta < tb || (ta == tb && log->lanes[a]->order < log->lanes[b]->order);
}

static void heap_down(kb_oplog *log, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		uint32_t t;

		if (l < n && lane_less(log, log->heap[l], log->heap[m]))
			m = l;
		if (l + 1 < n && lane_less(log, log->heap[l + 1], log->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		t = log->heap[i];
		log->heap[i] = log->heap[m];
		log->heap[m] = t;
		i = m;
	}
}

static void write_error(kb_oplog *log, const char *what, const char *path)
{
	if (log->failed)
		return;
	log->failed = 1;
	kb__err(&log->error, KB_EIO, "cannot write %s '%s': %s", what, path,
		strerror(errno ? errno : EIO));
}

/* Hashes and writes what the merge has gathered. */
static void drain_out(kb_oplog *log)
{
	if (!log->out_n)
		return;
	kb__sha256_update(&log->sha, log->out, log->out_n);
	if (log->file && !log->failed && fwrite(log->out, 1, log->out_n, log->file) != log->out_n)
		write_error(log, "op_log", log->path);
	log->out_n = 0;
}

static int sink_record(kb_oplog *log, kb_oplog_record *rec, const char *text, size_t len)
{
	rec->json = text;
	rec->json_len = len;
	if (log->out_n + len + 1 > sizeof(log->out))
		drain_out(log);
	if (len + 1 > sizeof(log->out)) {
		kb__sha256_update(&log->sha, text, len);
		kb__sha256_update(&log->sha, "\n", 1);
		if (log->file && !log->failed &&
		    (fwrite(text, 1, len, log->file) != len || fputc('\n', log->file) == EOF))
			write_error(log, "op_log", log->path);
	} else {
		memcpy(log->out + log->out_n, text, len);
		log->out[log->out_n + len] = '\n';
		log->out_n += len + 1;
	}
	log->records++;
	if (log->trace && !log->failed && kb__trace_record(log->trace, rec))
		write_error(log, "trace", kb__trace_path(log->trace));
	if (log->callback && !log->failed) {
		if (log->callback(rec, log->payload)) {
			log->failed = 1;
			kb__err(&log->error, KB_EINVAL, "the op_log callback stopped the run");
		}
	}
	return log->failed ? log->error.code : KB_OK;
}

static void buf_compact(lane_buf *lane)
{
	size_t keep = lane->n - lane->head, off;

	if (lane->head == 0)
		return;
	if (keep == 0) {
		lane->n = lane->head = lane->text_n = 0;
		return;
	}
	off = lane->ent[lane->head].text_off;
	memmove(lane->ent, lane->ent + lane->head, keep * sizeof(*lane->ent));
	memmove(lane->text, lane->text + off, lane->text_n - off);
	for (size_t i = 0; i < keep; i++)
		lane->ent[i].text_off -= off;
	lane->text_n -= off;
	lane->n = keep;
	lane->head = 0;
}

/* k-way merge of every lane's buffer (cur or ready) up to bound. */
static int merge(kb_oplog *log, int ready, kb_time bound, kb_error *err)
{
	size_t hn = 0;

	log->merging_ready = ready;
	for (size_t i = 0; i < log->n_lanes; i++) {
		lane_buf *b = merge_buf(log, (uint32_t)i);

		if (atomic_load_explicit(&log->lanes[i]->oom, memory_order_relaxed))
			return kb__err(err, KB_ENOMEM, "out of memory buffering op_log records");
		if (b->head < b->n && b->ent[b->head].rec.t1_ps < bound)
			log->heap[hn++] = (uint32_t)i;
	}
	for (size_t i = hn / 2; i-- > 0;)
		heap_down(log, hn, i);
	while (hn > 0) {
		lane_buf *b = merge_buf(log, log->heap[0]);
		lane_entry *e = &b->ent[b->head++];

		if (sink_record(log, &e->rec, b->text + e->text_off, e->text_len))
			break;
		if (b->head == b->n || b->ent[b->head].rec.t1_ps >= bound)
			log->heap[0] = log->heap[--hn];
		heap_down(log, hn, 0);
	}
	drain_out(log);
	for (size_t i = 0; i < log->n_lanes; i++)
		buf_compact(merge_buf(log, (uint32_t)i));
	if (log->file && !log->failed && fflush(log->file) == EOF)
		write_error(log, "op_log", log->path);
	if (log->failed) {
		kb__err_copy(err, &log->error);
		return log->error.code;
	}
	return KB_OK;
}

int kb__oplog_flush(kb_oplog *log, kb_time bound, kb_error *err)
{
	int rc;

	if (!log)
		return KB_OK;
	rc = merge(log, 1, KB_TIME_INF, err);   /* sealed records come first */
	return rc ? rc : merge(log, 0, bound, err);
}

void kb__oplog_seal(kb_oplog *log)
{
	for (size_t i = 0; log && i < log->n_lanes; i++) {
		kb_oplog_lane *l = log->lanes[i];

		if (l->cur.n > l->cur.head) {
			lane_buf t = l->ready;

			l->ready = l->cur;
			l->cur = t;
		}
	}
}

int kb__oplog_flush_sealed(kb_oplog *log, kb_error *err)
{
	return log ? merge(log, 1, KB_TIME_INF, err) : KB_OK;
}

size_t kb__oplog_buffered(const kb_oplog *log)
{
	size_t n = 0;

	for (size_t i = 0; log && i < log->n_lanes; i++)
		n += log->lanes[i]->cur.n - log->lanes[i]->cur.head;
	return n;
}

int kb__oplog_finish(kb_oplog *log, char sha_hex[65], uint64_t *records, kb_error *err)
{
	int rc = kb__oplog_flush(log, KB_TIME_INF, err);

	if (log->file) {
		if (fclose(log->file) == EOF)
			write_error(log, "op_log", log->path);
		log->file = NULL;
	}
	if (log->trace) {
		if (kb__trace_close(log->trace))
			write_error(log, "trace", kb__trace_path(log->trace));
		kb__trace_free(log->trace);
		log->trace = NULL;
	}
	kb__sha256_hex(&log->sha, sha_hex);
	if (records)
		*records = log->records;
	if (!rc && log->failed) {
		kb__err_copy(err, &log->error);
		rc = log->error.code;
	}
	return rc;
}

void kb__oplog_destroy(kb_oplog *log)
{
	if (!log)
		return;
	if (log->file)
		fclose(log->file);
	if (log->trace) {
		kb__trace_close(log->trace);
		kb__trace_free(log->trace);
	}
	for (size_t i = 0; i < log->n_lanes; i++) {
		free(log->lanes[i]->cur.ent);
		free(log->lanes[i]->cur.text);
		free(log->lanes[i]->ready.ent);
		free(log->lanes[i]->ready.text);
		free(log->lanes[i]);
	}
	free(log->lanes);
	free(log->heap);
	free(log->path);
	free(log);
}
