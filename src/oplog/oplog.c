#include "oplog/oplog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/err.h"
#include "base/outfile.h"
#include "base/sha256.h"
#include "oplog/trace.h"

/* One buffered record: what the merge reads. Its JSON text, with the
 * newline that ends it in the op_log, lives in the lane's text buffer, so
 * consecutive records of a lane are one run of bytes, and a record ends
 * where the next one starts (ent_end). 16 bytes, where the whole record
 * (112 with it) was written and read per record even when no sink wants
 * its fields, and then 24 with its length and a 64-bit offset (issue
 * 13: a lane's text stays under 4 GiB, lane_grow). */
typedef struct lane_entry {
	kb_time t1;
	uint32_t text_off;
	/* The merge's second key after t1: the record's lane order, times
	 * two, plus one in its own lane's buffer (0 in the shared one: of one
	 * lane's records, those in the shared buffer were written first). */
	uint32_t key;
} lane_entry;

/* Records and their text, appended at the end, consumed from head; rec
 * (the fields, for the trace and the callback) only when the lane keeps
 * them, index for index with ent. */
typedef struct lane_buf {
	lane_entry *ent;
	kb_oplog_record *rec;    /* json points nowhere until flushed */
	/* One past the last record's entry (ent + their count, buf_n): a
	 * record's entry is end's, with no index to scale (issue 13). */
	lane_entry *end;
	size_t cap, head;
	char *text;
	/* emit has room for a record while text_n < text_lim (kept with
	 * text_cap by buf_text_cap): one compare with a field in cur's
	 * first line, not a sum tested against text_cap (issue 13). */
	size_t text_n, text_lim, text_cap;
} lane_buf;

/* The longest record (without its newline): formatting stops (an error)
 * past it. */
#define MAX_RECORD 1024

/* b's text has text_cap bytes: emit may write a record (MAX_RECORD and
 * its newline) at text_n while text_n < text_lim, and, as the entries
 * match the text (MIN_RECORD), one more entry. */
static inline void buf_text_cap(lane_buf *b, size_t text_cap)
{
	b->text_cap = text_cap;
	b->text_lim = text_cap > MAX_RECORD + 1 ? text_cap - (MAX_RECORD + 1) : 0;
}

/* A record's form: its text around the cmd's digits, the middle
 * `,"pe":P,"eng":"E","op":"O","cmd":` before them and the tail after
 * them (`,"kind":"K","lbytes":L`, `,"bytes":B`, an engine stage's
 * members, `}` and the newline), kept per lane by what it is a function
 * of: eng and op (static strings, oplog.h: their addresses name them),
 * pe and a tail key (form_key). A run meets few forms (opt3 at 262,144
 * tokens: 33 for 143,367 records), so a record mostly copies its middle
 * and tail whole after one lookup, where the middle had a lookup of its
 * own and the tail was formatted field by field (issue 13). A form whose
 * tail is not kept (fields, a long operand: tail_len 0) still gives the
 * middle.
 *
 * Two cache lines, where the forms' reads missed L1 about twice a record
 * with three (issue 13): the text first, the middle and right after it
 * the tail, then the key. The middle is copied as its first FORM_MID
 * bytes (the first line) and the tail as FORM_TAIL bytes from its start
 * (within both lines: what the copies take past the text is scratch that
 * the record overwrites), and the lookup reads the key in the second.
 * The eng and pe of a lane's forms are the lane's (form_eng, form_pe:
 * those of the record that made its first forms; a lane's records all
 * have them in the model), so that the text has room for decode's
 * longest pair, 81 bytes (a DMA read with its operand). */
#define FORM_MID 64      /* the longest middle kept */
#define FORM_TAIL 48     /* the longest tail kept */
#define FORM_TEXT 92     /* the middle and the tail together */
typedef struct rec_form {
	char text[FORM_TEXT];
	uint8_t mid_len, tail_len;
	uint8_t step_end;        /* a long step's form: where its digits end in the tail; else 0 */
	const char *op;          /* NULL: empty; without a tail, op_untailed */
	uint64_t key[3];         /* form_key */
} __attribute__((aligned(64))) rec_form;

/* A lane's forms for each kind of record, whose keys mean different
 * things: kb__oplog_emit's without fields, with fields, and
 * kb__oplog_emit_stage's (FORM_KINDS), allocated at the lane's first
 * records of that kind (a lane mostly writes one kind). The forms lie in
 * FORM_SLOTS slots by open addressing (at most half full): a form once
 * kept stays until FORM_MAX are (then the lane starts again), where sets
 * of two by a hash of op's address evicted forms that met a third in
 * their set, so that ~4 in 10 decode runs (by where the loader put the
 * library) formatted 10% of their records whole (issue 13). A record
 * looks at its slot and the two after it (a free one has op NULL);
 * further on, the slow path looks. The two slots after the last are two
 * more (FORM_ROOM in all, which probes wrap past), so that the next is
 * always the one after in memory (the common path found it by a second
 * multiply). 32 slots, not 64: a decode lane keeps 1 to 12 forms, and a
 * table is then 4.4 KB, not 8.3, two pages a lane of fresh memory where
 * it was three (a 64-PE run makes ~390 tables, issue 13); the third
 * look, made only when the first two miss, keeps the odds of a form
 * beyond the common path's reach where 64 slots and two looks had them
 * (decode opt3 at 65,536 tokens, its op strings moved over 316 places:
 * 4 and 2 layouts with a form out of reach; 32 slots and two looks: 26).
 * An optimisation: without memory for them, every record is formatted
 * whole. */
enum { FORM_PLAIN, FORM_FIELDS, FORM_STAGE, FORM_KINDS };
#define FORM_MAX 16
#define FORM_SLOTS 32
#define FORM_ROOM (FORM_SLOTS + 2)
typedef struct form_tab {
	rec_form f[FORM_ROOM];
	uint32_t n;                 /* forms kept */
	void *mem;                  /* what free takes (alloc_line) */
} form_tab;

_Static_assert(sizeof(rec_form) == 128, "a form is two cache lines");

/* An entry of a serial run's shared forms (form_shared). */
struct form_share {
	const char *eng;
	form_tab *tab;
	uint32_t pe, kind;
};

/* A lane's fast forms while it has none (kb_oplog_lane.fast): every
 * slot free, no record's form. Only read. */
static form_tab no_forms;
_Static_assert(FORM_MID + FORM_TAIL <= sizeof(rec_form), "a form's copies stay inside it");

/* A lane's records formatted whole before its forms are made: a lane
 * of a few records never pays for them (4 KB a lane and kind: page
 * faults). Whole, a record costs ~450 instructions, ~125 from a form:
 * with 32 here, a 32-PE run's 192 tables cost 1.6 M instructions more,
 * and a 64-token decode run saves ~5 page faults of ~110 (issue 13). */
#define FORM_CACHE_AFTER 8

/* A serial run's flushed bytes that the hash has not taken yet (issue
 * 13): they stay in the text buffer they were formatted in while the
 * shared lane writes on into another, and each record that the shared
 * lane takes, and each event of the sequential executor, hashes a piece
 * of them (half a block: kb_sha256_spread says why). Whatever is
 * left is hashed first when bytes are next sunk, and before the digest. */
typedef kb_sha256_spread oplog_pend;

/* A lane is written by its LP's thread (cur) and read by the sink: either
 * in place up to a time bound (sequential executor), or as a sealed buffer
 * (ready) that the sink merges while the LP goes on writing cur. */
/* Laid out by what a record reads (issue 13: the lanes' fields missed L1
 * ~13,000 times in opt3 at 65,536 tokens, 4 to 5 lines a lane): the
 * first two lines hold what emit reads of the record's own lane, the
 * third its cur (whose end and head say whether it holds records); of the
 * shared lane, a record reads last_t1 and last_key, cur and the pend
 * after the lane (serial_lane). */
struct kb_oplog_lane {
	/* The merge key of the lane's records in the shared lane: its order
	 * times two (lane_entry; one more in its own buffer). */
	uint32_t key;
	/* The pe and eng of the lane's forms (NULL eng: none yet): a record
	 * with others is formatted whole. */
	uint32_t form_pe;
	/* The log's shared lane once every record comes from one thread in
	 * order (kb__oplog_serial) while cur holds none of the lane's
	 * records, else never_takes (not NULL: emit tests only whether it
	 * takes the record, not whether cur is empty too). A record that
	 * goes to cur sets never_takes, and cur's emptying (consume, seal)
	 * the shared lane again: of one lane's records, those in the shared
	 * lane come first. */
	kb_oplog_lane *shared;
	/* The lane's forms (below) where emit's common path may use them:
	 * no_forms (never NULL: emit tests nothing but the form) until the
	 * lane has them, and while it keeps each record's fields
	 * (keep_fields), whose records all take emit_slow, so that the
	 * common path never tests for it. */
	form_tab *fast[FORM_KINDS];
	const char *form_eng;
	/* The time prefix of the lane's last record (put_times): its value
	 * times 10^8 (PRE_NONE: none yet), its one to four digits, and the
	 * record's text before each chunk of eight digits, `{"t0":` and
	 * `,"t1":` each with the prefix after it, to be stored 16 bytes at
	 * a time (the bytes after the prefix are scratch that the digits
	 * overwrite). */
	uint64_t pre_base;
	uint32_t pre_len;
	/* The hundred of this lane's last record's cmd (put_cmd): its
	 * first number (the cmd less its last two digits; E8, in no
	 * hundred under 10^8: none yet), and the digits of the cmd that
	 * set it, cmd_n of them in cmd_dig, the first in its lowest byte
	 * (a cmd in the hundred stores its own last two over the last
	 * two). */
	uint32_t cmd_n;
	char pre_t0[16], pre_t1[16];
	uint64_t cmd_base;
	/* The key of cur's last record (when it holds any), beside end and
	 * head: the shared lane's test reads it there, not through ent. */
	kb_time last_t1;
	uint64_t cmd_dig;
	uint32_t last_key;
	/* The trace or the callback reads each record's fields; else only
	 * t1 (the merge order) is kept beside the text. */
	int keep_fields;
	lane_buf cur, ready;
	form_tab *forms[FORM_KINDS]; /* or NULL */
	uint32_t uncached;       /* records formatted before the forms (FORM_CACHE_AFTER) */
	uint8_t share_ix[FORM_KINDS];   /* form_shared's entry of the lane's eng, plus 1; 0: none yet */
	/* The log's oom: the writer sets it when a record fails, the sink
	 * reads it once a flush, not a line of every lane (a 32-PE run has
	 * 193 lanes, and flushes every window: issue 13). */
	atomic_int *oom;
	void *mem;               /* what free takes (alloc_line) */
} __attribute__((aligned(64)));

_Static_assert(offsetof(kb_oplog_lane, pre_t0) == 64 && offsetof(kb_oplog_lane, cur) == 128,
	       "a lane's record fields fill its first two lines, cur the third");

/* The log's shared lane (kb__oplog_serial) and the serial run's pending
 * hash, one allocation made with the log: a record that the shared lane
 * takes tests pend.left at a fixed distance from the lane's cur, where
 * it loaded a pointer to the log's pend first (issue 13). The lane is
 * the block's start: freed as a lane once it is one. */
typedef struct serial_lane {
	kb_oplog_lane lane;
	oplog_pend pend;
	/* The serial run's shared forms (form_shared), by eng and kind of
	 * form: the PE of the first lane met, and the table once a lane of
	 * another PE is. */
	struct form_share share[8];
	unsigned n_share;
} serial_lane;

#define E8 UINT64_C(100000000)
/* A lane's pre_base while it has no time prefix (times_in): a record's
 * times are simulation times, at most KB_TIME_MAX (2^63 - 1), and t -
 * PRE_NONE wraps to t + 10^8 for every t under 2^64 - 10^8. */
#define PRE_NONE (UINT64_MAX - E8 + 1)
_Static_assert(KB_TIME_MAX < PRE_NONE, "times stay under PRE_NONE");

/* The shared lane of a lane while there is none: its last record sorts
 * after every record (shared_takes), so it takes none, is never written
 * and is only read. */
static kb_oplog_lane never_takes = { .last_t1 = KB_TIME_INF, .last_key = UINT32_MAX };

typedef struct oplog_slice oplog_slice;

/*
 * A sink takes the merged op_log in order (issue 20 section 2): the JSONL
 * text of each slice (bytes), each record with its typed fields (record),
 * and the run's end: flush after each flush of the op_log, end (complete
 * the output) only when the run succeeded, close (keep: rename into place;
 * else remove), release. Every call is optional and returns nonzero on a
 * failure, with errno set for a write error; a sink with a stop message
 * fails the run with it instead (KB_EINVAL). The hash is not a sink: it is
 * the op_log's identity and always runs, first.
 */
typedef struct oplog_sink {
	const char *what; /* named in errors: "op_log", "trace" */
	const char *stop; /* the error when record fails; NULL: a write error */
	void *self;
	const char *(*path)(void *self);
	int (*bytes)(void *self, const char *text, size_t n);
	int (*record)(void *self, const kb_oplog_record *rec);
	int (*flush)(void *self);
	int (*end)(void *self);
	int (*close)(void *self, int keep);
	void (*release)(void *self);
} oplog_sink;

struct kb_oplog {
	kb_oplog_lane **lanes;
	size_t n_lanes, cap_lanes;
	/* kb__oplog_serial: one more lane (in lanes too) that takes each
	 * record that sorts after every record already in it and whose own
	 * lane holds none, so that a sequential run's records, which come in
	 * their final order, lie there as the op_log's bytes with nothing to
	 * merge (issue 13). */
	kb_oplog_lane *shared;
	/* The shared lane, a lane among the others from the first
	 * kb__oplog_serial on (serial_made) and kept while records come from
	 * several threads again (kb__oplog_parallel), for a later
	 * kb__oplog_serial; with it the shared lane's flushed bytes not
	 * hashed yet (serial->pend), and the buffer it writes into next (the
	 * one that held them before, once hashed). */
	serial_lane *serial;
	void *serial_mem;        /* what free takes (alloc_line) */
	int serial_made;
	char *spare_text;
	size_t spare_cap;
	/* The lanes a planned merge reads (those with records in it). */
	uint32_t *active;
	size_t n_active;
	/* The slices planned and not yet sunk, in order: q[q_head .. n_q).
	 * The newest batch (the one being merged) is q[q_batch ..
	 * q_batch + n_slices); claim hands its slices out in a window. q,
	 * n_q, q_batch and n_slices change only between windows; q_head and
	 * sink_off (bytes of q[q_head] already sunk) only on the thread that
	 * sinks. Sunk slices wait in spare for reuse, the last sunk first. */
	oplog_slice **q, **spare;
	size_t n_q, cap_q, q_head, q_batch, sink_off, n_spare, cap_spare;
	unsigned n_slices;
	unsigned min_slices;     /* of a sealed batch, where records allow: the threads merging */
	atomic_uint claim;
	int sealed;              /* a batch planned over the sealed buffers, not yet all merged */
	int want_recs;           /* a trace or a callback takes records one by one */
	kb_sha256 sha;
	kb_outfile outfile;      /* the op_log file, renamed into place when whole */
	FILE *file;              /* outfile.f, or NULL: no op_log file */
	char *path;
	kb_trace *trace;
	kb_oplog_cb callback;
	void *payload;
	oplog_sink sinks[3];     /* file, trace, callback: those there are, in that order */
	int n_sinks;
	uint64_t records;
	uint64_t sink_ns;        /* wall ns in the sinks (the serial part) */
	int failed;
	int discard;             /* the run failed: keep no output */
	atomic_int oom;          /* a lane's record failed (kb_oplog_lane.oom) */
	kb_error error;
};

/* The op_log file (JSON Lines): the slices' text as it is. */
static const char *file_path(void *self)
{
	return ((kb_oplog *)self)->path;
}

static int file_bytes(void *self, const char *text, size_t n)
{
	return fwrite(text, 1, n, ((kb_oplog *)self)->file) != n;
}

static int file_flush(void *self)
{
	return fflush(((kb_oplog *)self)->file) == EOF;
}

static int file_close(void *self, int keep)
{
	kb_oplog *log = self;

	log->file = NULL;
	return kb__outfile_close(&log->outfile, keep);
}

/* The Chrome/Perfetto trace: a complete event per record. */
static const char *trace_path(void *self)
{
	return kb__trace_path(self);
}

static int trace_record(void *self, const kb_oplog_record *rec)
{
	return kb__trace_record(self, rec);
}

static int trace_end(void *self)
{
	return kb__trace_end(self);
}

static int trace_close(void *self, int keep)
{
	return kb__trace_close(self, keep);
}

static void trace_release(void *self)
{
	kb__trace_free(self);
}

/* The embedder's callback: a nonzero answer stops the run. */
static int callback_record(void *self, const kb_oplog_record *rec)
{
	kb_oplog *log = self;

	return log->callback(rec, log->payload);
}

static void add_sinks(kb_oplog *log)
{
	if (log->file)
		log->sinks[log->n_sinks++] = (oplog_sink){ .what = "op_log", .self = log,
							   .path = file_path, .bytes = file_bytes,
							   .flush = file_flush, .close = file_close };
	if (log->trace)
		log->sinks[log->n_sinks++] = (oplog_sink){
			.what = "trace", .self = log->trace, .path = trace_path,
			.record = trace_record, .end = trace_end, .close = trace_close,
			.release = trace_release
		};
	if (log->callback)
		log->sinks[log->n_sinks++] = (oplog_sink){ .what = "callback",
							   .stop = "the op_log callback stopped the run",
							   .self = log, .record = callback_record };
	for (int k = 0; k < log->n_sinks; k++)
		log->want_recs |= log->sinks[k].record != NULL;
}

/* size bytes on a cache line's start (a lane, a table of forms), and in
 * *mem what free takes (NULL: no memory): malloc, aligned here, where
 * glibc's aligned_alloc took ~1,000 instructions a call, making a chunk
 * larger and freeing its ends (opt3 H_kv=8 P=4 C=4 makes 224 lanes and
 * 207 tables: issue 13). */
static void *alloc_line(size_t size, void **mem)
{
	char *m = malloc(size + 63);

	*mem = m;
	return m ? m + (-(uintptr_t)m & 63) : NULL;
}

int kb__oplog_create(kb_oplog **out, const kb_oplog_options *opt, kb_error *err)
{
	kb_oplog *log = calloc(1, sizeof(*log));
	int rc;

	*out = NULL;
	_Static_assert(_Alignof(serial_lane) == 64 && _Alignof(form_tab) == 64, "alloc_line's alignment");
	if (log && (log->serial = alloc_line(sizeof(serial_lane), &log->serial_mem)))
		memset(log->serial, 0, sizeof(*log->serial));
	if (!log || !log->serial) {
		free(log);
		return kb__err(err, KB_ENOMEM, "out of memory creating the op_log");
	}
	kb__sha256_init(&log->sha);
	if (opt && opt->path) {
		log->path = strdup(opt->path);
		if (log->path && kb__outfile_open(&log->outfile, opt->path, "w") == 0)
			log->file = log->outfile.f;
		if (!log->path || !log->file) {
			rc = kb__outfile_error(err, "opening", "op_log", opt->path);
			goto fail;
		}
		setvbuf(log->file, NULL, _IOFBF, 1 << 20);
	}
	if (opt && opt->trace_path) {
		rc = kb__trace_open(&log->trace, opt->trace_path, opt->tracks, opt->n_tracks,
				    opt->channel, err);
		if (!rc && opt->trace_metadata && kb__trace_set_metadata(log->trace, opt->trace_metadata))
			rc = kb__err(err, KB_ENOMEM, "out of memory for the trace's metadata");
		if (rc)
			goto fail;
	}
	if (opt) {
		log->callback = opt->callback;
		log->payload = opt->payload;
	}
	add_sinks(log);
	atomic_init(&log->claim, 0);
	atomic_init(&log->oom, 0);
	*out = log;
	return KB_OK;
fail:
	if (log->trace) {   /* opened, then its metadata found no memory */
		kb__trace_close(log->trace, 0);
		kb__trace_free(log->trace);
	}
	kb__outfile_close(&log->outfile, 0);
	free(log->path);
	free(log->serial_mem);
	free(log);
	return rc;
}

/* kb__oplog_lane in lane's memory when it is not NULL (mem: what free
 * takes; left to the caller on a failure), else in its own. */
static kb_oplog_lane *lane_add(kb_oplog *log, uint32_t order, kb_oplog_lane *lane, void *mem)
{
	if (order > KB_OPLOG_MAX_ORDER)
		return NULL;   /* the merge key holds order * 2 + 1 in 32 bits */
	if (log->n_lanes == log->cap_lanes) {
		size_t cap = log->cap_lanes ? 2 * log->cap_lanes : 16;
		kb_oplog_lane **l = realloc(log->lanes, cap * sizeof(*l));
		uint32_t *h = realloc(log->active, cap * sizeof(*h));

		if (l)
			log->lanes = l;
		if (h)
			log->active = h;
		if (!l || !h)
			return NULL;
		log->cap_lanes = cap;
	}
	if (!lane && !(lane = alloc_line(sizeof(*lane), &mem)))
		return NULL;
	memset(lane, 0, sizeof(*lane));
	lane->mem = mem;
	lane->key = order << 1;
	lane->pre_base = PRE_NONE;
	lane->cmd_base = E8;   /* no cmd yet (put_cmd) */
	lane->oom = &log->oom;
	lane->keep_fields = log->want_recs;
	for (unsigned k = 0; k < FORM_KINDS; k++)
		lane->fast[k] = &no_forms;
	lane->shared = log->shared ? log->shared : &never_takes;
	log->lanes[log->n_lanes++] = lane;
	return lane;
}

kb_oplog_lane *kb__oplog_lane(kb_oplog *log, uint32_t order)
{
	return lane_add(log, order, NULL, NULL);
}

/* The records b holds (consumed ones too, before head). */
static inline size_t buf_n(const lane_buf *b)
{
	return b->ent ? (size_t)(b->end - b->ent) : 0;
}

/* Where b's record i ends (with its newline): where the next starts. */
static inline size_t ent_end(const lane_buf *b, size_t i)
{
	return i + 1 < buf_n(b) ? b->ent[i + 1].text_off : b->text_n;
}

/* The shortest record, `{"t0":0,"t1":0,"pe":0,"eng":"","op":"","cmd":0}`
 * and its newline: a buffer's n records hold at least n times as many
 * bytes of its text, so entries for text_cap / MIN_RECORD + 1 of them
 * (lane_grow keeps that many) never run out while the text has room, and
 * emit's common path tests only the text's room. */
#define MIN_RECORD 48

/* lane_reserve's growth, out of line: a lane grows a few dozen times a
 * run, and inlined into emit its reallocs cost every record saved
 * registers (issue 13). */
static __attribute__((noinline, cold)) int lane_grow(lane_buf *lane, size_t text_len, int keep_fields)
{
	size_t text_cap = lane->text_cap;

	if (lane->text_n + text_len + 1 > text_cap) {
		text_cap = text_cap ? 2 * text_cap : 8192;
		while (text_cap < lane->text_n + text_len + 1)
			text_cap *= 2;
		if (text_cap > (size_t)UINT32_MAX + 1)
			return -1;   /* a lane_entry's text_off */
	}
	/* The entries first, for the text's new size: should the text's
	 * realloc then fail, the entries are only larger than they need be,
	 * where the other order would leave text room that emit's common
	 * path trusts without entries to match it. */
	if (buf_n(lane) == lane->cap || lane->cap <= text_cap / MIN_RECORD) {
		size_t cap = lane->cap ? 2 * lane->cap : 64, n = buf_n(lane);
		lane_entry *e;
		kb_oplog_record *r;

		if (cap <= text_cap / MIN_RECORD)
			cap = text_cap / MIN_RECORD + 1;
		if (!(e = realloc(lane->ent, cap * sizeof(*e))))
			return -1;
		lane->ent = e;
		lane->end = e + n;
		if (keep_fields) {
			if (!(r = realloc(lane->rec, cap * sizeof(*r))))
				return -1;
			lane->rec = r;
		}
		lane->cap = cap;
	}
	if (text_cap != lane->text_cap) {
		char *t = realloc(lane->text, text_cap);

		if (!t)
			return -1;
		lane->text = t;
		buf_text_cap(lane, text_cap);
	}
	return 0;
}

static inline __attribute__((always_inline)) int lane_reserve(lane_buf *lane, size_t text_len, int keep_fields)
{
	if (__builtin_expect(buf_n(lane) == lane->cap || lane->text_n + text_len + 1 > lane->text_cap, 0))
		return lane_grow(lane, text_len, keep_fields);
	return 0;
}

/* The shared lane's text buffer at the start (and so the spare's, which
 * takes its size): a sequential run writes 40-50 KB of records between
 * two flushes (decode; SEQ_BUDGET events), and twice that when a window
 * is not flushed, so the buffer is made that size at once, not grown
 * through 8, 16, 32, 64 and 128 KiB with a copy each time (issue 13).
 * Under malloc's mmap threshold (128 KiB), so neither buffer is mapped
 * and unmapped per run. Untouched pages cost a short run nothing. */
#define SHARED_TEXT (120u << 10)

static inline void shared_empty(kb_oplog_lane *l);
static void pend_drain(kb_oplog *log);

int kb__oplog_serial(kb_oplog *log)
{
	kb_oplog_lane *sh;

	if (!log || log->shared)
		return KB_OK;
	sh = &log->serial->lane;
	if (log->serial_made) {
		if (buf_n(&sh->cur) == sh->cur.head)
			shared_empty(sh);   /* its last record's key is gone */
	} else {
		if (!lane_add(log, KB_OPLOG_MAX_ORDER, sh, log->serial_mem))   /* its order is never read */
			return KB_ENOMEM;
		/* The entries for it too (MIN_RECORD); without memory,
		 * lane_grow's sizes as in any lane. */
		if ((sh->cur.text = malloc(SHARED_TEXT))) {
			buf_text_cap(&sh->cur, SHARED_TEXT);
			if (lane_grow(&sh->cur, 0, sh->keep_fields)) {
				free(sh->cur.text);
				sh->cur.text = NULL;
				buf_text_cap(&sh->cur, 0);
			}
		}
		log->serial_made = 1;
	}
	for (size_t i = 0; i < log->n_lanes; i++) {
		kb_oplog_lane *l = log->lanes[i];

		l->shared = l == sh || buf_n(&l->cur) > l->cur.head ? &never_takes : sh;
	}
	log->shared = sh;
	return KB_OK;
}

void kb__oplog_parallel(kb_oplog *log)
{
	if (!log || !log->shared)
		return;
	pend_drain(log);
	for (size_t i = 0; i < log->n_lanes; i++)
		log->lanes[i]->shared = &never_takes;
	log->shared = NULL;
}

/* The record builder: formatting records is the hot path of the log, so
 * it avoids printf, and copies whole strings (the keys' lengths are known
 * when compiling) rather than byte by byte. Each step takes the write
 * position and returns the next one, or NULL once the record would pass
 * end (and passes NULL on), so the position lives in a register through
 * the record (a {p, end, over} builder passed by address was loaded and
 * stored around every step: issue 13). */
static inline char *put_mem(char *p, const char *end, const char *s, size_t n)
{
	if (!p || (size_t)(end - p) < n)
		return NULL;
	memcpy(p, s, n);
	return p + n;
}

/* The same for a short string of unknown length (a field's key, 5 to 12
 * bytes): two overlapping loads and stores of 4 or 8 bytes, inside s,
 * rather than a call to memcpy. */
static inline char *put_short(char *p, const char *end, const char *s, size_t n)
{
	uint64_t a, b;
	uint32_t c, d;

	if (!p || (size_t)(end - p) < n)
		return NULL;
	if (n > 16 || n < 4) {
		memcpy(p, s, n);
	} else if (n >= 8) {
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(p, &a, 8);
		memcpy(p + n - 8, &b, 8);
	} else {
		memcpy(&c, s, 4);
		memcpy(&d, s + n - 4, 4);
		memcpy(p, &c, 4);
		memcpy(p + n - 4, &d, 4);
	}
	return p + n;
}

#define PUT_LIT(p, end, lit) put_mem((p), (end), (lit), sizeof(lit) - 1)

static inline char *put_str(char *p, const char *end, const char *s)
{
	return put_mem(p, end, s, strlen(s));
}

/* Eight decimal digits of v < 10^8 as values 0-9, the first in the lowest
 * byte: four digits to each 32-bit half, two to each 16-bit quarter, one
 * to each byte, every split a multiply and shift (by 10486 / 2^20 for
 * /100, by 103 / 2^10 for /10), exact in its range (checked for every
 * v < 10^8) and done for all lanes at once: no division per digit, no
 * table (issue 13: put_u64 was 6% of a decode run). */
static inline uint64_t digits8(uint32_t v)
{
	uint64_t hi = v / 10000, x = hi | (uint64_t)(v - (uint32_t)hi * 10000) << 32;
	uint64_t q = (x * 10486 >> 20) & UINT64_C(0x0000007f0000007f);

	x = q | (x - q * 100) << 16;
	q = (x * 103 >> 10) & UINT64_C(0x000f000f000f000f);
	return q | (x - q * 10) << 8;
}

#define ASCII_ZEROS UINT64_C(0x3030303030303030)

/* x's bytes from the lowest up, whatever the host's byte order (the
 * compiler makes one store of it on a little-endian machine). */
static inline void store8(char *p, uint64_t x)
{
	p[0] = (char)x;
	p[1] = (char)(x >> 8);
	p[2] = (char)(x >> 16);
	p[3] = (char)(x >> 24);
	p[4] = (char)(x >> 32);
	p[5] = (char)(x >> 40);
	p[6] = (char)(x >> 48);
	p[7] = (char)(x >> 56);
}

/* Four digits of v < 10^4 the same way, in 32 bits (v * 5243 >> 19 is
 * v / 100 there). */
static inline uint32_t digits4(uint32_t v)
{
	uint32_t hi = v * 5243 >> 19, x = hi | (v - hi * 100) << 16;
	uint32_t q = (x * 103 >> 10) & 0x000f000fu;

	return q | (x - q * 10) << 8;
}

/* "00" to "99": a number under 100 (steps, counts) is one lookup. */
static const char digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static inline char *put_small(char *p, uint32_t v)
{
	if (v < 10) {
		*p = (char)('0' + v);
		return p + 1;
	}
	memcpy(p, digits2 + 2 * v, 2);
	return p + 2;
}

/* v < 10^8 without leading zeros (the lowest zero bytes of its digits):
 * stores 8 bytes, returns the end of the digits. */
static inline char *put_lead8(char *p, uint32_t v)
{
	uint64_t z = digits8(v);
	unsigned lead = z ? (unsigned)__builtin_ctzll(z) >> 3 : 7;   /* 0 is "0" */

	store8(p, (z + ASCII_ZEROS) >> (8 * lead));
	return p + 8 - lead;
}

/* The decimal digits of v at p; needs FMT_U64_ROOM bytes at p, of which
 * those after the returned end are scratch. By size, as the op_log's
 * numbers come: under 100 (steps, counts) a lookup, under 10^4 (command
 * ids, byte counts) four digits in 32 bits, else chunks of eight, a
 * time in ps under 10^10 being a lookup and one chunk. Each path ends
 * the number by its leading zeros, not by a digit count (which the next
 * number's position would wait on). */
#define FMT_U64_ROOM 24
static inline char *fmt_u64(char *p, uint64_t v)
{
	uint64_t hi;

	if (v < 100)
		return put_small(p, (uint32_t)v);
	if (v < 10000) {
		uint32_t z = digits4((uint32_t)v);
		unsigned lead = (unsigned)__builtin_ctz(z) >> 3;   /* z != 0: v >= 100 */

		z = (z + 0x30303030u) >> (8 * lead);
		p[0] = (char)z;
		p[1] = (char)(z >> 8);
		p[2] = (char)(z >> 16);
		p[3] = (char)(z >> 24);
		return p + 4 - lead;
	}
	if (v < E8)
		return put_lead8(p, (uint32_t)v);
	hi = v / E8;
	if (hi < 100) {
		p = put_small(p, (uint32_t)hi);
	} else if (hi < E8) {
		p = put_lead8(p, (uint32_t)hi);
	} else {
		p = put_lead8(p, (uint32_t)(hi / E8));
		store8(p, digits8((uint32_t)(hi % E8)) + ASCII_ZEROS);
		p += 8;
	}
	store8(p, digits8((uint32_t)(v % E8)) + ASCII_ZEROS);
	return p + 8;
}

static inline char *put_u64(char *p, const char *end, uint64_t v)
{
	char t[FMT_U64_ROOM];

	if (p && (size_t)(end - p) >= FMT_U64_ROOM)
		return fmt_u64(p, v);
	return put_mem(p, end, t, (size_t)(fmt_u64(t, v) - t));
}

static inline char *put_i64(char *p, const char *end, int64_t v)
{
	if (v < 0)
		return put_u64(PUT_LIT(p, end, "-"), end, (uint64_t)0 - (uint64_t)v);
	return put_u64(p, end, (uint64_t)v);
}

/* A JSON string's contents: quote, backslash and control characters escaped. */
static char *put_json_str(char *p, const char *end, const char *s)
{
	for (; *s && p; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			p = put_mem(p, end, c == '"' ? "\\\"" : "\\\\", 2);
		} else if (c < 0x20) {
			char u[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4],
				      "0123456789abcdef"[c & 15] };

			p = put_mem(p, end, u, sizeof(u));
		} else if (p < end) {
			*p++ = (char)c;
		} else {
			p = NULL;
		}
	}
	return p;
}

static inline char *put_fields(char *p, const char *end, const kb_oplog_field *f, int n)
{
	for (int i = 0; i < n && p; i++) {
		p = put_short(p, end, f[i].key, f[i].key_len);   /* ,"key": */
		switch (f[i].type) {
		case KB_FIELD_U64:
			p = put_u64(p, end, f[i].v.u);
			break;
		case KB_FIELD_I64:
			p = put_i64(p, end, f[i].v.i);
			break;
		case KB_FIELD_STR:
			p = PUT_LIT(p, end, "\"");
			p = put_json_str(p, end, f[i].v.s ? f[i].v.s : "");
			p = PUT_LIT(p, end, "\"");
			break;
		}
	}
	return p;
}

#ifdef __SSE2__
/* The eight digits of a < 10^8 and of b < 10^8 in ASCII, a's in the low
 * eight bytes, both at once (every x86-64 has SSE2): each split in two
 * halves under 10^4 (a 32-bit multiply by 2^45 / 10^4), each half in
 * two under 100 (x * 5243 >> 19, a 16-bit multiply-high), each of those
 * in two digits (y * 6554 >> 16), the high part in the low lane each
 * time, so that the first digit lands in the lowest byte (exact in
 * their ranges: checked for every a and b < 10^8). The multiplies by
 * 100 and 2559 are pmullw: the empty asm hides their constants, which
 * the compiler otherwise turns into 9 shifts and adds. A pair y = 10 t
 * + u becomes its two ASCII digits in one sum, y * 256 - 2559 t +
 * 0x3030 = t + '0' + 256 (u + '0') (no carry: t, u < 10), where its
 * units, their shift, an or and the ASCII add were four steps. 26
 * instructions, where W. Mula's conversion (four multiply-highs per
 * number by 1000, 100, 10, 1) took 38: the times were a quarter of a
 * record (issue 13). */
static inline __m128i digits8x2(uint32_t a, uint32_t b)
{
	__m128i c100 = _mm_set1_epi16(100), c2559 = _mm_set1_epi16(2559);
	__m128i v = _mm_set_epi64x((long long)b, (long long)a);
	__m128i hi = _mm_srli_epi64(_mm_mul_epu32(v, _mm_set1_epi32((int)0xd1b71759)), 45);
	__m128i lo = _mm_sub_epi32(v, _mm_mul_epu32(hi, _mm_set1_epi32(10000)));
	__m128i x = _mm_or_si128(hi, _mm_slli_epi64(lo, 32));   /* four 32-bit halves */
	__m128i h = _mm_srli_epi16(_mm_mulhi_epu16(x, _mm_set1_epi16(5243)), 3);

	__asm__("" : "+x"(c100), "+x"(c2559));
	x = _mm_or_si128(h, _mm_slli_epi32(_mm_sub_epi16(x, _mm_mullo_epi16(h, c100)), 16));
	h = _mm_mulhi_epu16(x, _mm_set1_epi16(6554));   /* eight 16-bit pairs: their tens */
	return _mm_add_epi16(_mm_sub_epi16(_mm_slli_epi16(x, 8), _mm_mullo_epi16(h, c2559)),
			     _mm_set1_epi16(0x3030));
}
#endif

/* A time's key (`{"t0":`, `,"t1":`: six bytes) at p as one store of
 * an 8-byte constant, not a 4- and a 2-byte one: its last two bytes are
 * scratch, which the digits stored right after it overwrite (issue 13). */
#define PUT_KEY8(p, key) memcpy((p), key "\0", 8)

/* `T0,"t1":T1` of two times under 10^8 (a run's first 100 us simulated:
 * all of a short run's, and the synthetic bench's), both chunks at once,
 * each without its leading zeros: two fmt_u64 were ~100 instructions a
 * record (issue 13). Stores 22 bytes at p. */
static inline char *put_times8(char *p, uint32_t t0, uint32_t t1)
{
#ifdef __SSE2__
	__m128i d = digits8x2(t0, t1);
	unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_set1_epi8('0')));
	/* leading zeros: 0 to 7 (0 is "0") */
	unsigned l0 = (unsigned)__builtin_ctz(~z | 0x80), l1 = (unsigned)__builtin_ctz(~z >> 8 | 0x80);
	uint64_t a, b;

	_mm_storel_epi64((__m128i *)(void *)&a, d);
	_mm_storel_epi64((__m128i *)(void *)&b, _mm_srli_si128(d, 8));
	store8(p, a >> (8 * l0));
	p += 8 - l0;
	PUT_KEY8(p, ",\"t1\":");
	store8(p + 6, b >> (8 * l1));
	return p + 14 - l1;
#else
	p = put_lead8(p, t0);
	PUT_KEY8(p, ",\"t1\":");
	return put_lead8(p + 6, t1);
#endif
}

/* `T0,"t1":T1` at p, which has HEAD_ROOM bytes before end (the
 * caller's test). Most records' times have 9 to 12 digits, and t0 the
 * same first one to four as t1 (the same multiple of 10^8): then both are
 * that prefix and eight digits each, the two chunks independent of each
 * other (issue 13). Else each number by itself. The prefix reaches four
 * digits past 10^10 ps (10 ms simulated): a decode run of 1,048,576
 * tokens writes most of its records there, and each number by itself
 * made its records ~25% dearer than a shorter run's (the issue's
 * linear-cost goal). A lane's t1 does not decrease, so its records mostly
 * share their prefix with its last one: the lane keeps that prefix's
 * digits (pre_*), and a record in it pays two subtractions for it, not a
 * division and the prefix's digits (issue 13). */
static inline __attribute__((always_inline)) char *put_times_in(char *p, const kb_oplog_lane *lane,
							       uint64_t lo0, uint64_t lo1);

/* Whether t0 and t1 are in the lane's prefix (lo1 < 10^8, and t0 from
 * the same multiple up to t1: lo0 wraps past lo1 below it), where one
 * was set (else pre_base is PRE_NONE, below which t1 wraps to t1 +
 * 10^8: no test of its own); their chunks below it in *lo0 and *lo1. */
static inline int times_in(const kb_oplog_lane *lane, uint64_t t0, uint64_t t1, uint64_t *lo0, uint64_t *lo1)
{
	*lo1 = t1 - lane->pre_base;
	*lo0 = t0 - lane->pre_base;
	return *lo1 < E8 && *lo0 <= *lo1;
}

static inline __attribute__((always_inline)) char *put_times(char *p, const char *end, kb_oplog_lane *lane,
							    uint64_t t0, uint64_t t1)
{
	uint64_t lo1, lo0;
	uint32_t pre;
	size_t h;

	if (!times_in(lane, t0, t1, &lo0, &lo1)) {
		uint64_t hi = t1 / E8;

		if (hi < 1 && t0 <= t1)
			return put_times8(p, (uint32_t)t0, (uint32_t)t1);
		if (hi < 1 || hi >= 10000 || t0 > t1 || t0 < hi * E8) {
			p = put_u64(p, end, t0);
			p = PUT_LIT(p, end, ",\"t1\":");
			return put_u64(p, end, t1);
		}
		/* The prefix's one to four digits, kept as a register's
		 * bytes (those past its length are scratch, which the digits
		 * after it overwrite): reading them back from p after a store
		 * stalled on store forwarding. */
		if (hi < 10) {
			h = 1;
			pre = (uint32_t)('0' + hi);
		} else if (hi < 100) {
			h = 2;
			pre = (uint8_t)digits2[2 * hi] | (uint32_t)(uint8_t)digits2[2 * hi + 1] << 8;
		} else {
			uint32_t z = digits4((uint32_t)hi);
			unsigned lead = (unsigned)__builtin_ctz(z) >> 3;   /* z != 0: hi >= 100 */

			h = 4 - lead;
			pre = (z + 0x30303030u) >> (8 * lead);
		}
		lane->pre_base = hi * E8;
		lane->pre_len = (uint32_t)h;
		memcpy(lane->pre_t0, "{\"t0\":", 6);
		memcpy(lane->pre_t1, ",\"t1\":", 6);
		for (unsigned i = 0; i < 4; i++)
			lane->pre_t0[6 + i] = lane->pre_t1[6 + i] = (char)(pre >> 8 * i);
		lo1 = t1 - lane->pre_base;
		lo0 = t0 - lane->pre_base;
	}
	return put_times_in(p, lane, lo0, lo1);
}

/* The times in the lane's prefix (times_in), `{"t0":` (at p - 6) on:
 * the lane's text before each chunk (pre_t0, pre_t1) stored whole,
 * each chunk's eight digits over its scratch: four stores, where the
 * keys and the prefix were stored apart (issue 13). */
static inline __attribute__((always_inline)) char *put_times_in(char *p, const kb_oplog_lane *lane,
							       uint64_t lo0, uint64_t lo1)
{
	size_t h = lane->pre_len;
	char *q = p + h;

	memcpy(p - 6, lane->pre_t0, 16);
	memcpy(q + 8, lane->pre_t1, 16);
#ifdef __SSE2__
	{
		__m128i d = digits8x2((uint32_t)lo0, (uint32_t)lo1);

		_mm_storel_epi64((__m128i *)(void *)q, d);
		_mm_storel_epi64((__m128i *)(void *)(q + 14 + h), _mm_srli_si128(d, 8));
	}
#else
	store8(q, digits8((uint32_t)lo0) + ASCII_ZEROS);
	store8(q + 14 + h, digits8((uint32_t)lo1) + ASCII_ZEROS);
#endif
	return q + 22 + h;
}

/* `,"pe":P,"eng":"E","op":"O","cmd":` of r, formatted (a form's middle). */
static inline char *put_middle(char *p, const char *end, const kb_oplog_record *r)
{
	p = PUT_LIT(p, end, ",\"pe\":");
	p = put_u64(p, end, r->pe);
	p = PUT_LIT(p, end, ",\"eng\":\"");
	p = put_str(p, end, r->eng);
	p = PUT_LIT(p, end, "\",\"op\":\"");
	p = put_str(p, end, r->op);
	return PUT_LIT(p, end, "\",\"cmd\":");
}

/* A record's cmd from the digits of its lane's last one. An LP logs its
 * commands in order, so a record's cmd is mostly near its lane's last: the
 * same (a command's stages), one more (the next command), or a few either
 * way (an engine's channels finish stages of neighbouring commands in
 * turn: opt2's records are 41% d 0, 23% d 1, 18% d -1, 18% d 2 or 3).
 * Within the last one's hundred the digits are those of the cmd that
 * set it with the last two looked up (digits2) for cmd's offset in it,
 * and the lane's fields stay as they are; else the eight digits once, and that
 * hundred kept (45% of opt2's stage records took that path when only d
 * 0 and 1 did not; the last cmd and its digits, rather than its
 * decade's, were stored again on every record; with a decade kept, 23%
 * of opt3's records still crossed into another: issue 13). A cmd under
 * 100, whose digits are not two and more, keeps no hundred. */
static inline __attribute__((always_inline)) char *put_cmd(char *p, const char *end, kb_oplog_lane *lane,
							  uint64_t cmd, int room)
{
	uint64_t d = cmd - lane->cmd_base;   /* wraps below the hundred */

	/* room (a constant): the caller knows p has FMT_U64_ROOM bytes */
	if ((!room && (!p || end - p < 8)) || cmd >= E8)
		return put_u64(p, end, cmd);
	if (__builtin_expect(d > 99, 0)) {   /* another hundred (none yet: cmd_base E8) */
		uint64_t z = digits8((uint32_t)cmd);
		unsigned lead = z ? (unsigned)__builtin_ctzll(z) >> 3 : 7;   /* 0 is "0" */

		if (cmd < 100) {
			store8(p, (z + ASCII_ZEROS) >> (8 * lead));
			return p + 8 - lead;
		}
		d = cmd % 100;
		lane->cmd_n = 8 - lead;
		lane->cmd_base = cmd - d;
		lane->cmd_dig = (z + ASCII_ZEROS) >> (8 * lead);
	}
	/* two stores, the second over the first's last two digits: no
	 * shift to place the pair (issue 13) */
	store8(p, lane->cmd_dig);
	p += lane->cmd_n;
	memcpy(p - 2, digits2 + 2 * d, 2);
	return p;
}

/* An engine stage's members (kb_oplog_stage): those that the same record
 * with the fields step, n (n >= 0) and operand (when there is one) gets,
 * with the keys as literals; where the step's digits end in *step_end
 * (a form's step_end). */
static inline char *put_stage(char *p, const char *end, const kb_oplog_stage *st, char **step_end)
{
	p = PUT_LIT(p, end, ",\"step\":");
	/* a step is a stage's place in its command: under 100, inline */
	if (st->step < 100 && p && end - p >= 2)
		p = put_small(p, (uint32_t)st->step);
	else
		p = put_u64(p, end, st->step);
	*step_end = p;
	if (st->n >= 0) {
		p = PUT_LIT(p, end, ",\"n\":");
		p = put_u64(p, end, (uint64_t)st->n);
	}
	if (st->operand) {
		p = PUT_LIT(p, end, ",\"operand\":\"");
		p = put_json_str(p, end, st->operand);
		p = PUT_LIT(p, end, "\"");
	}
	return p;
}

/* A record's tail after its cmd's digits, formatted (a form's tail): the
 * kind and lbytes of a dispatch, bytes, the fields or an engine stage's
 * members (st: where its step's digits end in *step_end), the end and
 * the newline. */
static __attribute__((noinline)) char *put_tail(char *p, const char *end, const kb_oplog_record *r,
						const kb_oplog_field *fields, int n_fields,
						const kb_oplog_stage *st, char **step_end)
{
	if (!st && r->kind) {   /* an engine stage's record has none */
		p = PUT_LIT(p, end, ",\"kind\":\"");
		p = put_str(p, end, r->kind);
		p = PUT_LIT(p, end, "\",\"lbytes\":");
		p = put_i64(p, end, r->lbytes);
	}
	if (r->bytes >= 0) {
		p = PUT_LIT(p, end, ",\"bytes\":");
		p = put_i64(p, end, r->bytes);
	}
	if (st)
		p = put_stage(p, end, st, step_end);
	else if (n_fields)
		p = put_fields(p, end, fields, n_fields);
	return PUT_LIT(p, end, "}\n");
}

/* An engine stage's step in its form. A step under STEP_LONG keys a
 * form of its own, its digit in the form's text: decode's steps are 0 to
 * 7, and writing theirs per record too cost decode 3 to 10 instructions
 * a stage record (0.2-1.3% of a run, by how it was done: issue 13). A
 * longer one keys its form by its digit count (long_step_key), and each
 * record stores its own digits over the form's once the tail is copied
 * (put_step), as a cmd's are written per record: keyed by the step
 * itself, every record of a command with many stages (a GEMM's, step 0
 * to 1,151 at M=1024 N=512) had a form of its own, missed, and was
 * formatted whole. Its digits (under 10^8: eight at most) and the bytes
 * before them, of `,"step":` as they stand in every such tail, are one
 * store of the eight bytes that end where the digits do (step_end). */
#define STEP_KEY                                                                                       \
	((uint64_t)',' | (uint64_t)'"' << 8 | (uint64_t)'s' << 16 | (uint64_t)'t' << 24 |              \
	 (uint64_t)'e' << 32 | (uint64_t)'p' << 40 | (uint64_t)'"' << 48 | (uint64_t)':' << 56)
#define STEP_LONG 10   /* the first step written per record */

/* The third word of a stage's form key (form_key) of a step from
 * STEP_LONG on, with its operand's part o: 8 plus the step's digit count
 * (10 to 16) under 10^8, where a shorter step's is the step itself; 0
 * past that, and without o (no form). The count from the step's bit
 * length (log10 2 ~ 1233 / 4096), one more where it reaches the next
 * power of ten: put_step's digits are worked out once, there. */
static inline uint64_t long_step_key(uint64_t step, uint64_t o)
{
	static const uint32_t pow10[9] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
					   100000000 };
	unsigned len;

	if (step >= E8 || !o)
		return 0;
	len = (unsigned)(63 - __builtin_clzll(step)) * 1233 >> 12;   /* step >= 10: 1 to 7 */
	len += 1 + (step >= pow10[len + 1]);
	return (8 + len) | o << 16;
}

/* A long step's digits over those of the tail copied at tail from its
 * form f, whose step has as many (long_step_key). */
static inline void put_step(char *tail, const rec_form *f, uint64_t step)
{
	uint64_t z;
	unsigned lead;

	z = digits8((uint32_t)step);
	lead = (unsigned)__builtin_ctzll(z) >> 3;   /* 0 to 6 */
	/* the digits, and before them the last lead bytes of the key (its
	 * shift by 64 - 8 lead in two, defined at lead 0) */
	store8(tail + f->step_end - 8,
	       ((z + ASCII_ZEROS) & ~UINT64_C(0) << 8 * lead) | STEP_KEY >> 1 >> (63 - 8 * lead));
}

/* A record's tail key: three words that its tail is a function of, of
 * which the third is 0 when the tail is not kept (but for
 * kb__oplog_emit's without fields, which always is: form_keeps). An
 * engine stage's: bytes, n, and its step under STEP_LONG (else, where
 * full, long_step_key; 0 where not: emit's common path leaves long
 * steps to kb__oplog_emit_stage_rare) beside its operand, none (1) or of
 * up to five bytes (2, then the bytes from bit 8: no byte is 0, so each
 * string has its own). kb__oplog_emit's without fields: bytes, lbytes
 * and the kind's address (NULL: none, and lbytes kept though not
 * printed, which spares the common path a test); with one
 * number field (no kind), whose text is its value's digits: bytes, the
 * value and the key's address (a static string: its text). */
static inline void form_key(uint64_t k[3], int64_t bytes, const kb_oplog_record *r,
			    const kb_oplog_field *fields, int n_fields, const kb_oplog_stage *st, int kind,
			    int full)
{
	k[0] = (uint64_t)bytes;
	if (kind == FORM_STAGE) {
		uint64_t o = 2;

		k[1] = (uint64_t)st->n;
		if (__builtin_expect(st->operand != NULL, 0)) {
			for (unsigned i = 0; st->operand[i] && o; i++)
				o = i < 5 ? o | (uint64_t)(unsigned char)st->operand[i] << (8 + 8 * i) : 0;
		} else {
			o = 1;
		}
		if (st->step < STEP_LONG && o)
			k[2] = st->step | o << 16;
		else
			k[2] = full ? long_step_key(st->step, o) : 0;
	} else if (kind == FORM_FIELDS) {
		const kb_oplog_field *f = &fields[0];

		k[1] = f->v.u;
		k[2] = n_fields == 1 && !r->kind &&
			       (f->type == KB_FIELD_U64 || (f->type == KB_FIELD_I64 && f->v.i >= 0))
			       ? (uint64_t)(uintptr_t)f->key
			       : 0;
	} else {
		k[1] = (uint64_t)r->lbytes;   /* not read without a kind: a form more, not a wrong one */
		k[2] = (uint64_t)(uintptr_t)r->kind;
	}
}

/* Whether the tail of a record of key k (form_key) is kept in its form. */
static inline int form_keeps(const uint64_t k[3], int kind)
{
	return kind == FORM_PLAIN || k[2];
}

/* A record's first slot in its lane's index of forms. op's address
 * within its page: the same wherever the loader puts the string's
 * library, so a run's forms meet the same collisions every time. */
static inline uint64_t form_hash(const char *op, const uint64_t k[3])
{
	uint64_t x = ((uint64_t)(uintptr_t)op & 0xfff) + k[0] + 3 * k[1] + k[2];

	return x * UINT64_C(0x9e3779b97f4a7c15);
}

static inline unsigned form_slot(const char *op, const uint64_t k[3])
{
	return (unsigned)(form_hash(op, k) >> 59);   /* FORM_SLOTS */
}

/* tab's slot form_slot(op, k), its byte offset masked from the hash's
 * bits as they stand (one shift and an and), not the slot shifted down
 * and scaled up again (emit's common path). */
static inline rec_form *form_at(form_tab *tab, const char *op, const uint64_t k[3])
{
	_Static_assert(FORM_SLOTS == 32 && sizeof(rec_form) == 128, "slot: the hash's top 5 bits, times 128");
	return (rec_form *)(void *)((char *)tab->f + (form_hash(op, k) >> 52 & 0xf80));
}

/* Whether f is the form of a record of op and key k (of the lane's
 * form_pe and form_eng). */
static inline int form_is(const rec_form *f, const char *op, const uint64_t k[3])
{
	return f->op == op && f->key[0] == k[0] && f->key[1] == k[1] && f->key[2] == k[2];
}

/* A form whose tail is not kept holds its op's address with the top bit
 * flipped where addresses have 64 bits (no other string has that one:
 * user space lies below 2^63), so that emit's common path, which wants
 * a tail, does not find it and tests no length per record (issue 13).
 * Elsewhere the address as it is, and emit tests the length. */
#if UINTPTR_MAX == UINT64_MAX
#define FORM_UNTAILED ((uintptr_t)1 << 63)
#else
#define FORM_UNTAILED ((uintptr_t)0)
#endif
static inline const char *op_untailed(const char *op)
{
	return (const char *)((uintptr_t)op ^ FORM_UNTAILED);
}

/* Whether r may have a form in its lane: the lane's pe and eng. */
static inline int form_lane(const kb_oplog_lane *lane, const kb_oplog_record *r)
{
	return r->eng == lane->form_eng && r->pe == lane->form_pe;
}

/* A lane's forms of one kind, every slot free (NULL: no memory). Only
 * what a free slot is read by is cleared: its op (free), and what emit's
 * common path compares and tests before it reads a slot's text (the key,
 * the lengths), not the whole 4 KB (a 32-PE run makes 192 tables: its
 * memsets were 1.6 M instructions, issue 13). */
static form_tab *form_tab_new(void)
{
	void *mem;
	form_tab *tab = alloc_line(sizeof(form_tab), &mem);

	if (!tab)
		return NULL;
	tab->mem = mem;
	for (unsigned i = 0; i < FORM_ROOM; i++) {
		rec_form *f = &tab->f[i];

		f->op = NULL;
		f->key[0] = f->key[1] = f->key[2] = 0;
		f->mid_len = f->tail_len = 0;
	}
	tab->n = 0;
	return tab;
}

static void form_tab_free(form_tab *tab)
{
	if (tab)
		free(tab->mem);
}

/* A serial multi-PE run's forms shared by its lanes of one eng, one
 * table by eng and kind, of records of any PE: a lane's record that its
 * own forms do not give (one of its first FORM_CACHE_AFTER, or the
 * first of a form) takes the form from there where another PE's lane
 * made it, with its own PE in the middle (put_form_pe, form_repe), and
 * else leaves its own there. A multi-PE run's lanes of one engine meet
 * the same forms, and each lane formatted each one whole again (opt3
 * H_kv=8 P=4 C=4 at 16,384 tokens: 2,784 of 72,552 records whole, in
 * 224 lanes; 186 now: issue 13). The table is made once a lane of a
 * second PE formats a record whole, so a run on one PE makes none (the
 * trade of FORM_CACHE_AFTER: a short run's page faults). Only in a
 * serial run (the lane's shared lane is the log's: kb__oplog_serial),
 * where one thread writes every lane: no form is read while another
 * thread writes it. NULL: none for r. */
static form_tab *form_shared(kb_oplog_lane *lane, const kb_oplog_record *r, int kind)
{
	serial_lane *sl;
	struct form_share *e;

	if (lane->shared == &never_takes)
		return NULL;
	sl = (serial_lane *)(void *)lane->shared;
	e = sl->share + (lane->share_ix[kind] ? lane->share_ix[kind] - 1 : 0);
	if (!lane->share_ix[kind] || e->eng != r->eng) {   /* the lane's entry, found once */
		for (e = sl->share; e < sl->share + sl->n_share && (e->eng != r->eng || e->kind != (uint32_t)kind); e++)
			;
		if (e == sl->share + sl->n_share) {
			if (sl->n_share == sizeof(sl->share) / sizeof(sl->share[0]))
				return NULL;
			*e = (struct form_share){ r->eng, NULL, r->pe, (uint32_t)kind };
			sl->n_share++;
		}
		lane->share_ix[kind] = (uint8_t)(e - sl->share + 1);
	}
	if (!e->tab && e->pe != r->pe)
		e->tab = form_tab_new();
	return e->tab;
}

/* to as from for a record of PE pe: `,"pe":` and the PE's digits begin
 * from's middle, whose rest does not depend on the PE. 0 where it does
 * not fit. */
static int form_repe(rec_form *to, const rec_form *from, uint32_t pe)
{
	char d[FMT_U64_ROOM];
	size_t n = (size_t)(fmt_u64(d, pe) - d), n0 = 0, rest, mid;

	while (from->text[6 + n0] != ',')   /* its middle has the next key */
		n0++;
	rest = from->mid_len - 6 - n0;
	mid = 6 + n + rest;
	if (mid > FORM_MID || mid + from->tail_len > FORM_TEXT)
		return 0;
	if (to != from)
		*to = *from;
	memmove(to->text + 6 + n, from->text + 6 + n0, rest + from->tail_len);
	memcpy(to->text + 6, d, n);
	to->mid_len = (uint8_t)mid;
	return 1;
}

/* `{"t0":` (6), the times (at most 2 * 20 + 6: put_u64's FMT_U64_ROOM
 * each, with the scratch after them), a form's middle copied whole. */
#define HEAD_ROOM (6 + 2 * FMT_U64_ROOM + 6 + FORM_MID)

/* The rest of a record from its middle on (at p, the times' end), where
 * the lane holds no form for it: formatted, and kept as the form f (when
 * not NULL) if it fits. Out of line: the records that come here are few,
 * and inlined it cost every record stack and saved registers. */
static __attribute__((noinline)) int format_new(kb_oplog_lane *lane, rec_form *f, char *buf, char *p,
						const char *end, const kb_oplog_record *r,
						const kb_oplog_field *fields, int n_fields,
						const kb_oplog_stage *st, const uint64_t k[3], int kind)
{
	char *mid = p, *tail, *step = NULL;

	p = put_middle(p, end, r);
	if (!p)
		return -1;
	if (f && p - mid <= FORM_MID) {
		f->op = NULL;   /* not a form until whole */
		memcpy(f->text, mid, (size_t)(p - mid));
		f->mid_len = (uint8_t)(p - mid);
	} else {
		f = NULL;
	}
	p = put_cmd(p, end, lane, r->cmd, 0);
	tail = p;
	p = put_tail(p, end, r, fields, n_fields, st, &step);
	if (!p)
		return -1;
	if (f) {
		f->tail_len = 0;
		f->step_end = 0;
		if (form_keeps(k, kind) && p - tail <= FORM_TAIL && f->mid_len + (p - tail) <= FORM_TEXT) {
			memcpy(f->text + f->mid_len, tail, (size_t)(p - tail));
			f->tail_len = (uint8_t)(p - tail);
			/* past `,"step":` (8 bytes) in the tail */
			if (kind == FORM_STAGE && st->step >= STEP_LONG)
				f->step_end = (uint8_t)(step - tail);
		}
		memcpy(f->key, k, sizeof(f->key));
		f->op = f->tail_len ? r->op : op_untailed(r->op);
	}
	return (int)(p - buf);
}

/* The form of op and key k in tab, its slot or the first free one after
 * it in *h; NULL: none. */
static inline rec_form *form_find(form_tab *tab, const char *op, const uint64_t k[3], unsigned *h)
{
	for (*h = form_slot(op, k); tab->f[*h].op; *h = (*h + 1) % FORM_ROOM)
		if (form_is(&tab->f[*h], op, k) || form_is(&tab->f[*h], op_untailed(op), k))
			return &tab->f[*h];
	return NULL;
}

/* Where a new form of op and key k goes in tab (h: form_find's free
 * slot): a form once format_new has made it whole. A full table starts
 * again. */
static inline rec_form *form_free(form_tab *tab, const char *op, const uint64_t k[3], unsigned h)
{
	if (tab->n == FORM_MAX) {
		for (unsigned i = 0; i < FORM_ROOM; i++)
			tab->f[i].op = NULL;
		tab->n = 0;
		h = form_slot(op, k);
	}
	return &tab->f[h];
}

/* A record from its middle on (at p, the times' end) by another PE's
 * form g: its middle's PE (the digits after `,"pe":`) that of r. */
static int put_form_pe(kb_oplog_lane *lane, char *buf, char *p, const char *end, const rec_form *g,
		       const kb_oplog_record *r, const kb_oplog_stage *st, int kind)
{
	size_t n0 = 0;

	while (g->text[6 + n0] != ',')   /* its middle has the next key */
		n0++;
	memcpy(p, g->text, 6);
	p = fmt_u64(p + 6, r->pe);
	memcpy(p, g->text + 6 + n0, FORM_MID);
	p = put_cmd(p + g->mid_len - 6 - n0, end, lane, r->cmd, 1);
	memcpy(p, g->text + g->mid_len, FORM_TAIL);
	if (kind == FORM_STAGE && st->step >= STEP_LONG)
		put_step(p, g, st->step);
	return (int)(p + g->tail_len - buf);
}

/* A record from its middle on (at p, the times' end) by its form f. */
static inline __attribute__((always_inline)) int put_form(kb_oplog_lane *lane, char *buf, char *p, const char *end,
							  const rec_form *f, const kb_oplog_record *r,
							  const kb_oplog_field *fields, int n_fields,
							  const kb_oplog_stage *st, int kind)
{
	char *step;   /* not read: the tail is not kept */

	memcpy(p, f->text, FORM_MID);
	p = put_cmd(p + f->mid_len, end, lane, r->cmd, 1);
	if (f->tail_len) {
		memcpy(p, f->text + f->mid_len, FORM_TAIL);
		if (kind == FORM_STAGE && st->step >= STEP_LONG)
			put_step(p, f, st->step);
		return (int)(p + f->tail_len - buf);
	}
	p = put_tail(p, end, r, fields, n_fields, st, &step);
	return p ? (int)(p - buf) : -1;
}

/* Formats the fixed keys in their contract order, then the optional ones
 * (the fields, or an engine stage's: st), and the newline; returns the
 * length, or -1 past len. */
static inline __attribute__((always_inline)) int format_record(kb_oplog_lane *lane, char *buf, size_t len,
							       const kb_oplog_record *r,
							       const kb_oplog_field *fields, int n_fields,
							       const kb_oplog_stage *st, int kind)
{
	const char *end = buf + len;
	char *p = buf + 6;
	rec_form *f = NULL, *g;
	form_tab *tab = lane->forms[kind], *sh = NULL;
	uint64_t k[3];
	unsigned h = 0, hs;
	int n;

	/* The head (HEAD_ROOM), the cmd (FMT_U64_ROOM) and a form's tail
	 * copied whole fit in emit's buffer (len is a constant there): they
	 * test no room (issue 13). */
	if (len < HEAD_ROOM + FMT_U64_ROOM + FORM_TAIL)
		return -1;
	memcpy(buf, "{\"t0\":", 6);
	p = put_times(p, end, lane, r->t0_ps, r->t1_ps);
	form_key(k, r->bytes, r, fields, n_fields, st, kind, 1);
	if (lane->form_eng && !form_lane(lane, r)) {
		n = format_new(lane, NULL, buf, p, end, r, fields, n_fields, st, k, kind);
		return n;   /* no forms for it (and none made) */
	}
	if (tab) {
		if ((f = form_find(tab, r->op, k, &h)) != NULL)
			return put_form(lane, buf, p, end, f, r, fields, n_fields, st, kind);
		f = form_free(tab, r->op, k, h);
	} else if (++lane->uncached > FORM_CACHE_AFTER && (tab = form_tab_new()) != NULL) {
		lane->forms[kind] = tab;
		lane->fast[kind] = lane->keep_fields ? &no_forms : tab;
		lane->form_pe = r->pe;
		lane->form_eng = r->eng;
	}
	/* None of the lane's own: another PE's lane's (form_shared), or
	 * the one made here kept there too. */
	if ((sh = form_shared(lane, r, kind)) != NULL) {
		if ((g = form_find(sh, r->op, k, &hs)) != NULL && g->tail_len && !f)
			return put_form_pe(lane, buf, p, end, g, r, st, kind);
		if (g && f && form_repe(f, g, r->pe)) {
			tab->n++;
			return put_form(lane, buf, p, end, f, r, fields, n_fields, st, kind);
		}
		if (g) {
			sh = NULL;   /* no tail, or too long for this PE: not made again */
		} else if (!f) {
			f = form_free(sh, r->op, k, hs);
			tab = sh;
			sh = NULL;
		}
	}
	n = format_new(lane, f, buf, p, end, r, fields, n_fields, st, k, kind);
	if (f && f->op) {
		tab->n++;
		if (sh) {   /* the lane's own, a copy there */
			*form_free(sh, r->op, k, hs) = *f;
			sh->n++;
		}
	}
	return n;
}

/* The fields of b's record i kept for the trace or the callback: out of
 * line, as most runs keep none (issue 13); KB_OK, so that emit ends in
 * it. */
static __attribute__((noinline)) int keep_rec(lane_buf *b, size_t i, const kb_oplog_record *rec)
{
	b->rec[i] = *rec;
	b->rec[i].json = NULL;
	return KB_OK;
}

/* The shared lane takes a record of lane order key / 2 ending at t1
 * when it sorts after the lane's last record (key: the shared one's,
 * order times two). While the shared lane holds none its last is (0, 0)
 * (shared_empty), which every record passes: one test, not three. */
static inline int shared_takes(const kb_oplog_lane *sh, kb_time t1, uint32_t key)
{
	return sh->last_t1 < t1 || (sh->last_t1 == t1 && sh->last_key <= key);
}

/* The shared lane's cur was emptied (consumed or sealed): it takes any
 * record next. */
static inline void shared_empty(kb_oplog_lane *l)
{
	l->last_t1 = 0;
	l->last_key = 0;
}

/* A record goes into the shared lane (key: its key there): its order
 * noted, and a piece of the serial run's pending hash taken. */
static inline __attribute__((always_inline)) void shared_took(kb_oplog_lane *sh, kb_time t1, uint32_t key)
{
	oplog_pend *pend = &((serial_lane *)(void *)sh)->pend;

	sh->last_t1 = t1;
	sh->last_key = key;
	if (pend->left)
		kb__sha256_piece(pend);
}

/* kb__oplog_emit and kb__oplog_emit_stage, every case: one of fields and
 * st, kind the record's kind of form. Out of line: emit below comes
 * here for what is rare (no forms yet, a new form, a tail not kept, a
 * full buffer, a prefix to set) and redoes the record
 * from the start (what emit changed before is redone the same). */
static __attribute__((noinline)) int emit_slow(kb_oplog_lane *lane, const kb_oplog_record *rec,
					       const kb_oplog_field *fields, int n_fields,
					       const kb_oplog_stage *st, int kind)
{
	lane_buf *b = &lane->cur;
	uint32_t key = lane->key | 1;
	lane_entry *e;
	int n;

	/* In order after the shared lane's last record, and none of this
	 * lane's own waiting (so of one lane's records, those in the shared
	 * lane come first, as their key says): into the shared lane. A
	 * record that then fails (no memory) fails the run. */
	if (shared_takes(lane->shared, rec->t1_ps, key - 1)) {
		b = &lane->shared->cur;
		key--;
		shared_took(lane->shared, rec->t1_ps, key);
	} else {
		lane->shared = &never_takes;   /* until cur is empty again */
	}

	/* Room for the longest record, then it is formatted in place. */
	if (lane_reserve(b, MAX_RECORD + 1, lane->keep_fields) ||
	    (n = format_record(lane, b->text + b->text_n, MAX_RECORD + 1, rec, fields, n_fields, st, kind)) < 0) {
		atomic_store_explicit(lane->oom, 1, memory_order_relaxed);
		return KB_ENOMEM;
	}
	if (lane->keep_fields)
		keep_rec(b, buf_n(b), rec);
	e = b->end++;
	e->t1 = rec->t1_ps;
	e->text_off = (uint32_t)b->text_n;
	e->key = key;
	b->text_n += (size_t)n;
	return KB_OK;
}

/* An engine stage's record on emit's rare path: rec with v's members,
 * into emit_slow (out of line: the copy is made only here). */
static __attribute__((noinline)) int stage_slow(kb_oplog_lane *lane, const kb_oplog_record *rec,
						const kb_oplog_stage *v)
{
	kb_oplog_record r = *rec;

	r.t0_ps = v->t0_ps;
	r.t1_ps = v->t1_ps;
	r.op = v->op;
	r.cmd = v->cmd;
	r.bytes = v->bytes;
	return emit_slow(lane, &r, NULL, 0, v, FORM_STAGE);
}

/* A dispatch record: rec with d's members. */
static inline __attribute__((always_inline)) kb_oplog_record dispatch_record(const kb_oplog_record *rec,
									     const kb_oplog_dispatch *d)
{
	kb_oplog_record r = *rec;

	r.t0_ps = d->t0_ps;
	r.t1_ps = d->t1_ps;
	r.cmd = d->cmd;
	r.kind = d->kind;
	r.lbytes = d->lbytes;
	return r;
}

/* A dispatch record on emit's rare path, as a stage's above. */
__attribute__((noinline)) int kb__oplog_emit_dispatch_rare(kb_oplog_lane *lane, const kb_oplog_record *rec,
							   const kb_oplog_dispatch *d)
{
	kb_oplog_record r = dispatch_record(rec, d);

	return emit_slow(lane, &r, NULL, 0, NULL, FORM_PLAIN);
}

/* emit's way out to emit_slow; where deferred (a stage's, a dispatch's)
 * it is its caller's to take (KB_OPLOG_RARE), which works the record out
 * again there: none of its members is then live at emit's exits, so none
 * is spilled on the common path (issue 13: ~17 instructions a stage where
 * emit called the rare path with all of them), and a record made here
 * from members by value does not escape, so is not stored. */
static inline __attribute__((always_inline)) int emit_rare(kb_oplog_lane *lane, const kb_oplog_record *rec,
							   const kb_oplog_field *fields, int n_fields, int kind,
							   int defer)
{
	if (defer)
		return KB_OPLOG_RARE;
	return emit_slow(lane, rec, fields, n_fields, NULL, kind);
}

/* A record's member m: a stage's from v (rec's is not read), others'
 * from rec where they are used (v is not read). */
#define REC_V(m, vm) (kind == FORM_STAGE ? v.vm : rec->m)

static inline __attribute__((always_inline)) int emit(kb_oplog_lane *lane, const kb_oplog_record *rec,
						      const kb_oplog_field *fields, int n_fields,
						      kb_oplog_stage v, int kind, int defer, int long_step);

/* A stage's record that kb__oplog_emit_stage_fast left: one with a long
 * step (from STEP_LONG on) by emit's common path as well, its form found
 * by the step's digit count and its digits written (long_step_key), else
 * by emit_slow. kb__oplog_emit_stage_fast, inlined into the engines,
 * leaves long steps here, so that what they take (their key, put_step)
 * costs decode's short steps nothing: in it, they cost decode 3 to 5
 * instructions a stage record, a spilled register among them (issue
 * 13). hot: the one caller (the engines' log_stage_rare) is cold, and
 * GCC then made this for size, a rep movs for each copy and a div for
 * each number (~40 instructions more a GEMM record). */
__attribute__((noinline, hot)) int kb__oplog_emit_stage_rare(kb_oplog_lane *lane, const kb_oplog_record *rec,
							     const kb_oplog_stage *v)
{
	if (v->step >= STEP_LONG && emit(lane, rec, NULL, 0, *v, FORM_STAGE, 1, 1) == KB_OK)
		return KB_OK;
	return stage_slow(lane, rec, v);
}

/* The common record: a lane with forms of its kind and no fields to keep
 * (fast), room in the buffer, and a form with its tail for the record:
 * the times, the form's middle, the cmd and the form's tail. No call but the
 * hash's piece at the end (and emit_slow, where it ends), so no value
 * lives across a call: no saved registers, no stack frame, the form's
 * key in registers (the general path, with format_new and put_tail
 * inside, paid ~30 instructions a record for them: issue 13).
 * rec's times, op, cmd and bytes are v's for kind FORM_STAGE (st is
 * then v), else rec's (v is not read). defer: emit_rare's. long_step
 * (a stage's): 1 where its step is from STEP_LONG on, its digits
 * written over its form's (put_step); 0 where such a step is left to
 * emit_rare. */
static inline __attribute__((always_inline)) int emit(kb_oplog_lane *lane, const kb_oplog_record *rec,
						      const kb_oplog_field *fields, int n_fields,
						      kb_oplog_stage v, int kind, int defer, int long_step)
{
	const kb_oplog_stage *st = kind == FORM_STAGE ? &v : NULL;
	form_tab *tab = lane->fast[kind];
	lane_buf *b = &lane->cur;
	uint64_t k[3], lo0, lo1, cmd, t0, t1;
	rec_form *f;
	uint32_t key;   /* the record's in b (lane_entry) */
	int in;
	char *buf, *p;
	lane_entry *e;
	size_t n;

	/* The form first: what the record needs of fields or st is read
	 * here, and then only the times and the cmd are left to it. Three
	 * slots of the index are looked at; a form further on (rare: the
	 * index is at most half full) is found by emit_slow. */
	if (__builtin_expect(!form_lane(lane, rec), 0) ||
	    (kind == FORM_STAGE && !long_step && __builtin_expect(v.step >= STEP_LONG, 0)))
		return emit_rare(lane, rec, fields, n_fields, kind, defer);
	form_key(k, REC_V(bytes, bytes), rec, fields, n_fields, st, kind, long_step);
	f = form_at(tab, REC_V(op, op), k);
	if (__builtin_expect(!form_is(f, REC_V(op, op), k), 0)) {
		f++;   /* its slot + 2 < FORM_ROOM */
		if (!form_is(f, REC_V(op, op), k) && !form_is(++f, REC_V(op, op), k))
			return emit_rare(lane, rec, fields, n_fields, kind, defer);
	}
	if (!FORM_UNTAILED && __builtin_expect(!f->tail_len, 0))
		return emit_rare(lane, rec, fields, n_fields, kind, defer);
	key = lane->key;
	b = &lane->shared->cur;   /* mostly: taken as a fall-through, no jump back */
	if (__builtin_expect(!shared_takes(lane->shared, REC_V(t1_ps, t1_ps), key), 0)) {
		lane->shared = &never_takes;   /* until cur is empty again */
		key |= 1;
		b = &lane->cur;
	}
	if (__builtin_expect(b->text_n >= b->text_lim, 0))
		return emit_rare(lane, rec, fields, n_fields, kind, defer);
	/* The times in the lane's prefix, or both under 10^8 (a run's
	 * first 100 us); a new prefix is set where they are formatted. */
	cmd = REC_V(cmd, cmd);
	t0 = REC_V(t0_ps, t0_ps);
	t1 = REC_V(t1_ps, t1_ps);
	in = times_in(lane, t0, t1, &lo0, &lo1);
	if (__builtin_expect((!in && !(t1 < E8 && t0 <= t1)) || cmd >= E8, 0))
		return emit_rare(lane, rec, fields, n_fields, kind, defer);
	buf = b->text + b->text_n;
	/* the entry before the text's stores, which may alias b: text_n
	 * as it was loaded for buf, not loaded again */
	e = b->end++;
	e->t1 = t1;
	e->text_off = (uint32_t)b->text_n;
	e->key = key;
	if (in) {
		p = put_times_in(buf + 6, lane, lo0, lo1);
	} else {
		PUT_KEY8(buf, "{\"t0\":");
		p = put_times8(buf + 6, (uint32_t)t0, (uint32_t)t1);
	}
	memcpy(p, f->text, FORM_MID);
	p = put_cmd(p + f->mid_len, buf + MAX_RECORD + 1, lane, cmd, 1);
	memcpy(p, f->text + f->mid_len, FORM_TAIL);
	if (long_step)
		put_step(p, f, v.step);
	n = (size_t)(p + f->tail_len - buf);
	b->text_n += n;
	if (!(key & 1))   /* the shared lane's: b's, not lane->shared read
			   * again after the text's stores (which may alias it) */
		shared_took((kb_oplog_lane *)(void *)((char *)b - offsetof(kb_oplog_lane, cur)), t1, key);
	return KB_OK;
}

/* Inlined into each caller where link-time optimisation sees them all
 * (the library and the command): the scheduler's hazard_wait (PE_CPU's
 * dispatch: kb__oplog_emit_dispatch_fast), with n_fields 0 known there, then pay no call, no saved
 * registers and no loads of the record's members just stored (issue 13:
 * ~20 instructions a record, as kb__oplog_emit_stage's are inlined into
 * the engines' finish). Elsewhere (the tests' programs) an ordinary
 * external function: oplog.h declares it without inline. */
__attribute__((always_inline)) inline int kb__oplog_emit(kb_oplog_lane *lane, const kb_oplog_record *rec,
							 const kb_oplog_field *fields, int n_fields)
{
	/* the scheduler's records, with no fields: a copy of
	 * emit with that known */
	kb_oplog_stage v = { 0 };   /* not read */

	if (!n_fields)
		return emit(lane, rec, NULL, 0, v, FORM_PLAIN, 0, 0);
	return emit(lane, rec, fields, n_fields, v, FORM_FIELDS, 0, 0);
}

int kb__oplog_emit_stage_fast(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_stage st)
{
	return emit(lane, rec, NULL, 0, st, FORM_STAGE, 1, 0);
}

int kb__oplog_emit_dispatch_fast(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_dispatch d)
{
	/* not stored: it does not escape (emit_rare) */
	kb_oplog_record r = dispatch_record(rec, &d);
	kb_oplog_stage v = { 0 };   /* not read */

	return emit(lane, &r, NULL, 0, v, FORM_PLAIN, 1, 0);
}

int kb__oplog_emit_stage(kb_oplog_lane *lane, const kb_oplog_record *rec, kb_oplog_stage st)
{
	int rc = kb__oplog_emit_stage_fast(lane, rec, st);

	return rc == KB_OPLOG_RARE ? kb__oplog_emit_stage_rare(lane, rec, &st) : rc;
}

#undef REC_V

void kb__oplog_hash_steps(kb_oplog *log, const size_t **n, void (**step)(void *), void **ctx)
{
	*n = &log->serial->pend.left;
	*step = kb__sha256_piece_fn(&log->sha);
	*ctx = &log->serial->pend;
}

/* ---- merging: slices of the final records, in the fixed total order ----
 *
 * The records to write (every lane's sealed buffer, or its current one up
 * to a bound) are cut by end time into slices [lo, hi). A slice is a k-way
 * merge over the lanes' runs inside it, by (t1, lane order), its records'
 * text copied one after another with their newlines: the op_log bytes of
 * that stretch. Slices are independent, so threads that have nothing else
 * to do merge them in parallel (kb__oplog_share); only the sinks (hash,
 * file, trace, callback) take the slices one after another, in order. How
 * the records are cut never changes the bytes. */

#define SLICE_RECORDS 1024   /* records per slice, roughly */
#define MIN_SLICE_RECORDS 128 /* with many threads: no smaller (each slice visits every lane) */
#define MAX_SLICES 64

/* A lane's run in a merge: its next record's t1 first (the key). The heap
 * orders indices into the runs, so a heap step moves 4 bytes, and the top
 * run's key and position change in place by plain stores that the next
 * comparisons read back as they were stored (with the runs themselves in
 * the heap, copying the 32-byte top run whole just after those stores
 * stalled on store forwarding: 70% of the heap's time, issue 13). */
typedef struct merge_run {
	kb_time t1;
	uint32_t order;          /* the next record's key (lane_entry) */
	uint32_t lane;
	size_t pos, end;
} merge_run;

struct oplog_slice {
	kb_time lo, hi;
	char *text;              /* the slice's op_log bytes */
	size_t text_n, text_cap;
	/* Per record, for the trace and the callback (when there are any). */
	struct slice_rec {
		const kb_oplog_record *rec;
		size_t off;
		uint32_t len;    /* without the newline */
	} *recs;
	size_t n, cap_recs;
	merge_run *heap;         /* cap_heap runs, then cap_heap heap indices */
	size_t cap_heap;
	int oom;
	atomic_int done;
};

/* The buffer a merge reads: cur (in place, up to a bound) or ready (sealed). */
static lane_buf *lane_of(const kb_oplog *log, size_t i, int ready)
{
	return ready ? &log->lanes[i]->ready : &log->lanes[i]->cur;
}

static int run_less(const merge_run *a, const merge_run *b)
{
	return a->t1 < b->t1 || (a->t1 == b->t1 && a->order < b->order);
}

static void run_down(const merge_run *runs, uint32_t *h, size_t n, size_t i)
{
	uint32_t x = h[i];

	for (;;) {
		size_t l = 2 * i + 1, m;

		if (l >= n)
			break;
		m = l + 1 < n && run_less(&runs[h[l + 1]], &runs[h[l]]) ? l + 1 : l;
		if (!run_less(&runs[h[m]], &runs[x]))
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

/* The first position in [from, n) whose record ends at or after t. */
static size_t lower_bound(const lane_buf *b, size_t from, kb_time t)
{
	size_t lo = from, hi = buf_n(b);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->ent[mid].t1 < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int slice_reserve(kb_oplog *log, oplog_slice *s, size_t bytes, size_t recs)
{
	if (bytes > s->text_cap) {
		size_t cap = s->text_cap ? s->text_cap : 65536;
		char *t;

		while (cap < bytes)
			cap *= 2;
		if (!(t = realloc(s->text, cap)))
			return -1;
		s->text = t;
		s->text_cap = cap;
	}
	if (log->want_recs && recs > s->cap_recs) {
		size_t cap = s->cap_recs ? s->cap_recs : 1024;
		struct slice_rec *r;

		while (cap < recs)
			cap *= 2;
		if (!(r = realloc(s->recs, cap * sizeof(*r))))
			return -1;
		s->recs = r;
		s->cap_recs = cap;
	}
	return 0;
}

/* Merges the slice's records (their text and, for the trace and callback,
 * where each is) out of every lane's cur or ready buffer. Reads the lanes
 * only: any number of slices may run at once. */
static void slice_merge(kb_oplog *log, oplog_slice *s, int ready)
{
	size_t hn = 0, bytes = 0, recs = 0;
	merge_run *runs = s->heap;
	uint32_t *h = (uint32_t *)(s->heap + s->cap_heap);
	char *out;

	s->n = s->text_n = 0;
	s->oom = 0;
	for (size_t k = 0; k < log->n_active; k++) {
		uint32_t i = log->active[k];
		const lane_buf *b = lane_of(log, i, ready);
		size_t a = lower_bound(b, b->head, s->lo), z = lower_bound(b, a, s->hi);
		if (a == z)
			continue;
		bytes += ent_end(b, z - 1) - b->ent[a].text_off;
		recs += z - a;
		runs[hn] = (merge_run){ b->ent[a].t1, b->ent[a].key, i, a, z };
		h[hn] = (uint32_t)hn;
		hn++;
	}
	if (!hn)
		return;
	if (slice_reserve(log, s, bytes, recs)) {
		s->oom = 1;
		return;
	}
	for (size_t i = hn / 2; i-- > 0;)
		run_down(runs, h, hn, i);
	out = s->text;
	while (hn > 0) {
		merge_run *r = &runs[h[0]];
		const lane_buf *b = lane_of(log, r->lane, ready);
		size_t from = r->pos, to = r->end, off = b->ent[from].text_off, n;

		/* The run's records that come before every other run's head go
		 * out as one stretch of its lane's text, newlines and all
		 * (1.7 records a stretch on decode): one copy and one heap
		 * step for them. */
		if (hn > 1) {
			const merge_run *nx = &runs[h[1]];

			if (hn > 2 && run_less(&runs[h[2]], nx))
				nx = &runs[h[2]];

			for (to = from + 1; to < r->end; to++)
				if (b->ent[to].t1 > nx->t1 ||
				    (b->ent[to].t1 == nx->t1 && b->ent[to].key > nx->order))
					break;
		}
		for (size_t k = from; log->want_recs && k < to; k++)
			s->recs[s->n + k - from] = (struct slice_rec){
				&b->rec[k], (size_t)(out - s->text) + b->ent[k].text_off - off,
				(uint32_t)(ent_end(b, k) - b->ent[k].text_off - 1)
			};
		s->n += to - from;
		n = ent_end(b, to - 1) - off;
		memcpy(out, b->text + off, n);
		out += n;
		if (to == r->end) {
			h[0] = h[--hn];
		} else {
			r->pos = to;
			r->t1 = b->ent[to].t1;
			r->order = b->ent[to].key;
		}
		run_down(runs, h, hn, 0);
	}
	s->text_n = (size_t)(out - s->text);
}

static void write_error(kb_oplog *log, const char *what, const char *path)
{
	if (log->failed)
		return;
	log->failed = 1;
	kb__outfile_error(&log->error, "writing", what, path);
}

/* A sink failed: the run stops with its stop message or a write error. */
static void sink_failed(kb_oplog *log, const oplog_sink *k)
{
	if (!k->stop) {
		write_error(log, k->what, k->path ? k->path(k->self) : k->what);
	} else if (!log->failed) {
		log->failed = 1;
		kb__err(&log->error, KB_EINVAL, "%s", k->stop);
	}
}

/* Hands a merged slice to the hash and the sinks: its bytes at once, its
 * records one by one to the sinks that take records. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The pending bytes of a serial run, hashed now: before any later bytes
 * and before the digest. */
static void pend_drain(kb_oplog *log)
{
	if (log->serial->pend.left)
		kb__sha256_spread_end(&log->serial->pend);
}

/* To the byte sinks (not the hash), in order. */
static void sink_only(kb_oplog *log, const char *text, size_t n)
{
	for (int k = 0; k < log->n_sinks && !log->failed && n; k++)
		if (log->sinks[k].bytes && log->sinks[k].bytes(log->sinks[k].self, text, n))
			sink_failed(log, &log->sinks[k]);
}

/* Hands bytes of merged slices to the hash and the byte sinks, in order. */
static void sink_bytes(kb_oplog *log, const char *text, size_t n)
{
	uint64_t t0 = now_ns();

	pend_drain(log);
	kb__sha256_update(&log->sha, text, n);
	for (int k = 0; k < log->n_sinks && !log->failed && n; k++)
		if (log->sinks[k].bytes && log->sinks[k].bytes(log->sinks[k].self, text, n))
			sink_failed(log, &log->sinks[k]);
	log->sink_ns += now_ns() - t0;
}

/* After its bytes: a slice's records, one by one, to the sinks that take
 * records (the trace, the callback). */
static void sink_records(kb_oplog *log, const oplog_slice *s)
{
	uint64_t t0 = now_ns();

	log->records += s->n;
	for (size_t i = 0; log->want_recs && i < s->n && !log->failed; i++) {
		kb_oplog_record rec = *s->recs[i].rec;

		rec.json = s->text + s->recs[i].off;
		rec.json_len = s->recs[i].len;
		for (int k = 0; k < log->n_sinks && !log->failed; k++)
			if (log->sinks[k].record && log->sinks[k].record(log->sinks[k].self, &rec))
				sink_failed(log, &log->sinks[k]);
	}
	log->sink_ns += now_ns() - t0;
}

/* A slice for the queue (a spare one, else a new one) with a heap as
 * large as the lane count; NULL when out of memory. */
static oplog_slice *slice_get(kb_oplog *log)
{
	oplog_slice *s = log->n_spare ? log->spare[--log->n_spare] : calloc(1, sizeof(*s));

	if (s && s->cap_heap < log->n_lanes) {
		merge_run *h = realloc(s->heap, log->n_lanes * (sizeof(*h) + sizeof(uint32_t)));

		if (!h) {
			log->spare[log->n_spare++] = s;   /* a spare slot is free: it came from there or was grown */
			return NULL;
		}
		s->heap = h;
		s->cap_heap = log->n_lanes;
	}
	return s;
}

/* Room for n more slices in the queue (and as many spares), the sunk
 * ones dropped from its front. Between windows only. */
static int queue_reserve(kb_oplog *log, size_t n)
{
	size_t live = log->n_q - log->q_head;

	if (log->q_head)   /* never with a NULL queue: memmove(NULL, ...) is undefined even for 0 */
		memmove(log->q, log->q + log->q_head, live * sizeof(*log->q));
	log->n_q = live;
	log->q_head = 0;
	if (live + n > log->cap_q) {
		size_t cap = 2 * (live + n);
		oplog_slice **q = realloc(log->q, cap * sizeof(*q));

		if (!q)
			return -1;
		log->q = q;
		log->cap_q = cap;
	}
	if (log->cap_q > log->cap_spare) {
		oplog_slice **sp = realloc(log->spare, log->cap_q * sizeof(*sp));

		if (!sp)
			return -1;
		log->spare = sp;
		log->cap_spare = log->cap_q;
	}
	return 0;
}

/* Notes the lanes whose cur buffers hold records with t1 < bound
 * (active), and the first and last such t1 (*lo, *hi); returns how many
 * records that is. (A seal plans on cur too, before the buffers swap.) */
static size_t scan_lanes(kb_oplog *log, kb_time bound, kb_time *lo_out, kb_time *hi_out)
{
	kb_time lo = KB_TIME_INF, hi = 0;
	size_t records = 0;

	log->n_active = 0;
	for (size_t i = 0; i < log->n_lanes; i++) {
		const lane_buf *b = &log->lanes[i]->cur;
		size_t z;

		if (b->head == buf_n(b) || b->ent[b->head].t1 >= bound)
			continue;
		z = bound == KB_TIME_INF ? buf_n(b) : lower_bound(b, b->head, bound);
		records += z - b->head;
		if (b->ent[b->head].t1 < lo)
			lo = b->ent[b->head].t1;
		if (b->ent[z - 1].t1 > hi)
			hi = b->ent[z - 1].t1;
		log->active[log->n_active++] = (uint32_t)i;
	}
	*lo_out = lo;
	*hi_out = hi;
	return records;
}

/* Cuts the records scan_lanes found (records of them, from lo to hi) into
 * slices of about SLICE_RECORDS each, evenly in time. Returns the slice
 * count (0: nothing to write), -1 out of memory. */
static int cut_slices(kb_oplog *log, int ready, kb_time bound, size_t records, kb_time lo, kb_time hi)
{
	size_t n;

	if (!records)
		return 0;
	n = records / SLICE_RECORDS;
	if (ready && n < log->min_slices)
		n = records / MIN_SLICE_RECORDS < log->min_slices ? records / MIN_SLICE_RECORDS
								   : log->min_slices;
	if (n > MAX_SLICES)
		n = MAX_SLICES;
	if (n > hi - lo + 1)
		n = (size_t)(hi - lo + 1);
	if (n < 1)
		n = 1;
	if (queue_reserve(log, n))
		return -1;
	for (size_t j = 0; j < n; j++) {
		oplog_slice *s = slice_get(log);

		if (!s) {
			while (j-- > 0)
				log->spare[log->n_spare++] = log->q[log->n_q + j];
			return -1;
		}
		log->q[log->n_q + j] = s;
		s->lo = j == 0 ? 0 : lo + (kb_time)((double)(hi - lo + 1) * (double)j / (double)n);
		s->hi = j + 1 == n ? bound : lo + (kb_time)((double)(hi - lo + 1) * (double)(j + 1) / (double)n);
		atomic_store_explicit(&s->done, 0, memory_order_relaxed);
	}
	log->q_batch = log->n_q;
	log->n_slices = (unsigned)n;
	log->n_q += n;
	return (int)n;
}

/* Lane l's cur holds no record any more: the shared lane takes any
 * record next, or l's next records may go there again (emit sent them to
 * l's own cur meanwhile: kb_oplog_lane.shared). */
static void cur_emptied(kb_oplog *log, kb_oplog_lane *l)
{
	if (l == log->shared)
		shared_empty(l);
	else if (log->shared)
		l->shared = log->shared;
}

static void buf_compact(lane_buf *lane)
{
	size_t keep = buf_n(lane) - lane->head, off;

	if (lane->head == 0)
		return;
	if (keep == 0) {
		lane->end = lane->ent;
		lane->head = lane->text_n = 0;
		return;
	}
	off = lane->ent[lane->head].text_off;
	memmove(lane->ent, lane->ent + lane->head, keep * sizeof(*lane->ent));
	if (lane->rec)
		memmove(lane->rec, lane->rec + lane->head, keep * sizeof(*lane->rec));
	memmove(lane->text, lane->text + off, lane->text_n - off);
	for (size_t i = 0; i < keep; i++)
		lane->ent[i].text_off -= off;
	lane->text_n -= off;
	lane->end = lane->ent + keep;
	lane->head = 0;
}

/* After the slices up to bound are written: drop them from the lanes. */
static void consume(kb_oplog *log, int ready, kb_time bound)
{
	for (size_t k = 0; k < log->n_active; k++) {
		lane_buf *b = lane_of(log, log->active[k], ready);

		b->head = bound == KB_TIME_INF ? buf_n(b) : lower_bound(b, b->head, bound);
		buf_compact(b);
		if (!ready && !buf_n(b))
			cur_emptied(log, log->lanes[log->active[k]]);
	}
	log->n_active = 0;
}

static int check_oom(kb_oplog *log, kb_error *err)
{
	if (atomic_load_explicit(&log->oom, memory_order_relaxed))
		return kb__err(err, KB_ENOMEM, "out of memory buffering op_log records");
	return KB_OK;
}

static int finish_write(kb_oplog *log, kb_error *err)
{
	for (int k = 0; k < log->n_sinks && !log->failed; k++)
		if (log->sinks[k].flush && log->sinks[k].flush(log->sinks[k].self))
			sink_failed(log, &log->sinks[k]);
	if (log->failed) {
		kb__err_copy(err, &log->error);
		return log->error.code;
	}
	return KB_OK;
}

/* Merges the next sealed slice nobody has taken; 0 when none is left
 * (others may still be merging theirs). */
static int share_one(kb_oplog *log)
{
	unsigned j = atomic_fetch_add(&log->claim, 1);
	oplog_slice *s;

	if (j >= log->n_slices)
		return 0;
	s = log->q[log->q_batch + j];
	slice_merge(log, s, 1);
	atomic_store_explicit(&s->done, 1, memory_order_release);
	return 1;
}

/* Until s is merged: merges the newest batch's slices nobody has taken
 * (s among them, or another thread has s). */
static void wait_merged(kb_oplog *log, oplog_slice *s)
{
	for (unsigned spins = 0; !atomic_load_explicit(&s->done, memory_order_acquire);) {
		unsigned c = atomic_load_explicit(&log->claim, memory_order_relaxed);

		if (c < log->n_slices)
			share_one(log);
		else if (++spins > 64)
			sched_yield();
	}
}

/* The newest batch merged whole (its slices hold their text now): the
 * lanes' sealed buffers are free for the next seal. */
static void batch_done(kb_oplog *log)
{
	if (!log->sealed)
		return;
	for (unsigned j = 0; j < log->n_slices; j++)
		wait_merged(log, log->q[log->q_batch + j]);
	for (size_t i = 0; i < log->n_lanes; i++) {
		lane_buf *b = &log->lanes[i]->ready;

		b->end = b->ent;
		b->head = b->text_n = 0;
	}
	log->sealed = 0;
}

/* The slice at the queue's front is sunk: it goes back to the spares. */
static void pop_front(kb_oplog *log)
{
	log->spare[log->n_spare++] = log->q[log->q_head++];
	log->sink_off = 0;
}

/* Bytes a sink takes at once while others may be waiting for it: ~25 us
 * of hash here, so a window waits at most that long for the sink. */
#define SINK_PIECE 32768

/* Sinks the queue in order (each slice merged here unless another thread
 * has taken it, then waited for) until no more than keep slices wait, or,
 * with busy, until busy reads 0 (checked between pieces). A trace or a
 * callback takes records that point into the lanes: it never waits. */
static int sink_queue(kb_oplog *log, const atomic_uint *busy, size_t keep, kb_error *err)
{
	int rc = check_oom(log, err);

	if (log->want_recs)
		busy = NULL, keep = 0;
	while (!rc && log->n_q - log->q_head > keep) {
		oplog_slice *s = log->q[log->q_head];

		if (busy && !atomic_load_explicit(busy, memory_order_acquire))
			break;
		wait_merged(log, s);
		if (s->oom) {
			rc = kb__err(err, KB_ENOMEM, "out of memory merging op_log records");
			break;
		}
		while (log->sink_off < s->text_n && !log->failed) {
			size_t n = s->text_n - log->sink_off;

			if (busy && n > SINK_PIECE)
				n = SINK_PIECE;
			sink_bytes(log, s->text + log->sink_off, n);
			log->sink_off += n;
			if (busy && log->sink_off < s->text_n &&
			    !atomic_load_explicit(busy, memory_order_acquire))
				break;
		}
		if (log->sink_off < s->text_n && !log->failed)
			break;   /* the window is over: the rest of s waits */
		if (!log->failed)
			sink_records(log, s);
		pop_front(log);
	}
	if (!rc && log->failed) {
		kb__err_copy(err, &log->error);
		rc = log->error.code;
	}
	return rc;
}

/* The shared lane's records before z were sunk, and their text [from,
 * from + len) goes to the hash as pending, where it is: the lane goes on
 * in the spare buffer, the records from z on moved there (consume drops
 * the others). -1, nothing changed, without memory for it. */
static int pend_keep(kb_oplog *log, lane_buf *b, size_t z, size_t from, size_t len)
{
	size_t off = z < buf_n(b) ? b->ent[z].text_off : b->text_n, rest = b->text_n - off, cap;
	char *t;

	pend_drain(log);   /* the rest of the last ones: the spare is free */
	if (log->spare_cap != b->text_cap) {   /* the same: the entries fit it (MIN_RECORD) */
		free(log->spare_text);
		log->spare_cap = 0;
		if (!(log->spare_text = malloc(b->text_cap)))
			return -1;
		log->spare_cap = b->text_cap;
	}
	if (rest)
		memcpy(log->spare_text, b->text + off, rest);
	for (size_t i = z; i < buf_n(b); i++)
		b->ent[i].text_off -= off;
	t = b->text;
	b->text = log->spare_text;
	log->spare_text = t;
	cap = b->text_cap;
	buf_text_cap(b, log->spare_cap);
	log->spare_cap = cap;
	b->text_n = rest;
	kb__sha256_spread(&log->sha, &log->serial->pend, t + from, len);
	return 0;
}

/* Writes every record of the cur buffers with t1 < bound, on this thread
 * (the queue is empty). */
static int flush_cur(kb_oplog *log, kb_time bound, kb_error *err)
{
	kb_time lo, hi;
	size_t records = scan_lanes(log, bound, &lo, &hi);
	int n = 0, oom = 0;

	if (records && log->n_active == 1 && !log->want_recs) {
		/* One buffer holds them all (a sequential run's shared lane):
		 * its text is the op_log's bytes as they are, hashed and
		 * written from where they were formatted, in one piece. */
		lane_buf *b = lane_of(log, log->active[0], 0);
		size_t z = bound == KB_TIME_INF ? buf_n(b) : lower_bound(b, b->head, bound);
		size_t from = b->ent[b->head].text_off;
		size_t len = ent_end(b, z - 1) - from;

		if (!log->failed) {
			/* The shared lane's bytes go to the hash a block per
			 * record from now on (oplog_pend), unless out of memory. */
			if (log->lanes[log->active[0]] == log->shared) {
				uint64_t t0 = now_ns();

				sink_only(log, b->text + from, len);
				if (pend_keep(log, b, z, from, len))
					kb__sha256_update(&log->sha, b->text + from, len);
				log->sink_ns += now_ns() - t0;
			} else {
				sink_bytes(log, b->text + from, len);
			}
			log->records += z - b->head;
		}
		/* no slices: what kb__oplog_flush_sealed left is none either */
	} else if ((n = cut_slices(log, 0, bound, records, lo, hi)) < 0) {
		return kb__err(err, KB_ENOMEM, "out of memory merging op_log records");
	}
	for (int j = 0; j < n; j++) {
		oplog_slice *s = log->q[log->q_head];

		if (!oom && !log->failed) {
			slice_merge(log, s, 0);
			oom = s->oom;
			if (!oom) {
				sink_bytes(log, s->text, s->text_n);
				sink_records(log, s);
			}
		}
		pop_front(log);
	}
	log->n_slices = 0;
	if (oom)
		return kb__err(err, KB_ENOMEM, "out of memory merging op_log records");
	consume(log, 0, bound);
	return finish_write(log, err);
}

int kb__oplog_flush(kb_oplog *log, kb_time bound, kb_error *err)
{
	int rc;

	if (!log)
		return KB_OK;
	rc = check_oom(log, err);
	if (!rc)
		rc = kb__oplog_flush_sealed(log, err);   /* sealed records come first */
	return rc ? rc : flush_cur(log, bound, err);
}

int kb__oplog_seal(kb_oplog *log)
{
	kb_time lo, hi;
	size_t records;
	int n;

	if (!log)
		return KB_OK;
	batch_done(log);
	/* The slices are planned on the cur buffers, which become the ready
	 * ones unchanged: where that fails, nothing has moved, and a flush
	 * writes the records from cur. So every ready buffer is empty here
	 * (batch_done emptied the last batch's), and a lane's cur is empty
	 * once swapped. */
	records = scan_lanes(log, KB_TIME_INF, &lo, &hi);
	n = cut_slices(log, 1, KB_TIME_INF, records, lo, hi);
	for (size_t k = 0; n > 0 && k < log->n_active; k++) {
		kb_oplog_lane *l = log->lanes[log->active[k]];
		lane_buf t = l->ready;

		l->ready = l->cur;
		l->cur = t;
		cur_emptied(log, l);
	}
	if (n <= 0)
		log->n_slices = 0;
	log->sealed = n > 0;
	atomic_store(&log->claim, 0);
	return n < 0 ? KB_ENOMEM : KB_OK;
}

void kb__oplog_share(kb_oplog *log)
{
	while (log && share_one(log))
		;
}

int kb__oplog_sink(kb_oplog *log, const atomic_uint *busy, size_t keep, kb_error *err)
{
	return log ? sink_queue(log, busy, keep, err) : KB_OK;
}

void kb__oplog_threads(kb_oplog *log, unsigned threads)
{
	if (log)
		log->min_slices = threads;
}

size_t kb__oplog_waiting(const kb_oplog *log)
{
	return log ? log->n_q - log->q_head : 0;
}

/* Every sealed slice in order, and the batch's buffers freed. */
int kb__oplog_flush_sealed(kb_oplog *log, kb_error *err)
{
	int rc;

	if (!log)
		return KB_OK;
	rc = sink_queue(log, NULL, 0, err);
	batch_done(log);
	/* on a failure the slices left are dropped: the run stops */
	while (log->q_head < log->n_q)
		pop_front(log);
	if (rc)
		return rc;
	return finish_write(log, err);
}

uint64_t kb__oplog_sink_ns(const kb_oplog *log)
{
	return log ? log->sink_ns : 0;
}

size_t kb__oplog_buffered(const kb_oplog *log)
{
	size_t n = 0;

	for (size_t i = 0; log && i < log->n_lanes; i++)
		n += buf_n(&log->lanes[i]->cur) - log->lanes[i]->cur.head;
	return n;
}

void kb__oplog_discard(kb_oplog *log)
{
	if (log)
		log->discard = 1;
}

int kb__oplog_finish(kb_oplog *log, char sha_hex[65], uint64_t *records, kb_error *err)
{
	int rc = kb__oplog_flush(log, KB_TIME_INF, err), keep;

	/* Every output complete and flushed before any is renamed into
	 * place; after a failure none is. */
	for (int k = 0; k < log->n_sinks && !log->discard && !rc && !log->failed; k++)
		if (log->sinks[k].end && log->sinks[k].end(log->sinks[k].self))
			sink_failed(log, &log->sinks[k]);
	for (int k = 0; k < log->n_sinks && !log->failed; k++)
		if (log->sinks[k].flush && log->sinks[k].flush(log->sinks[k].self))
			sink_failed(log, &log->sinks[k]);
	keep = !rc && !log->failed && !log->discard;
	for (int k = 0; k < log->n_sinks; k++) {
		oplog_sink *sk = &log->sinks[k];

		if (sk->close && sk->close(sk->self, keep && !log->failed) && keep)
			sink_failed(log, sk);
		if (sk->release)
			sk->release(sk->self);
	}
	log->n_sinks = 0;
	log->trace = NULL;
	pend_drain(log);
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
	/* Not finished: the run never completed, so nothing is kept. */
	for (int k = 0; k < log->n_sinks; k++) {
		if (log->sinks[k].close)
			log->sinks[k].close(log->sinks[k].self, 0);
		if (log->sinks[k].release)
			log->sinks[k].release(log->sinks[k].self);
	}
	for (unsigned i = 0; i < log->serial->n_share; i++)
		form_tab_free(log->serial->share[i].tab);
	for (size_t i = 0; i < log->n_lanes; i++) {
		free(log->lanes[i]->cur.ent);
		free(log->lanes[i]->cur.rec);
		free(log->lanes[i]->cur.text);
		free(log->lanes[i]->ready.ent);
		free(log->lanes[i]->ready.rec);
		free(log->lanes[i]->ready.text);
		for (int k = 0; k < FORM_KINDS; k++)
			form_tab_free(log->lanes[i]->forms[k]);
		free(log->lanes[i]->mem);   /* the shared one: log->serial's too */
	}
	if (!log->serial_made)
		free(log->serial_mem);
	for (size_t i = log->q_head; i < log->n_q; i++)
		log->spare[log->n_spare++] = log->q[i];
	for (size_t i = 0; i < log->n_spare; i++) {
		free(log->spare[i]->text);
		free(log->spare[i]->recs);
		free(log->spare[i]->heap);
		free(log->spare[i]);
	}
	free(log->q);
	free(log->spare);
	free(log->spare_text);
	free(log->lanes);
	free(log->active);
	free(log->path);
	free(log);
}
