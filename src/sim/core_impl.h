/* Private layout of the simulation core, shared by core.c and the executors. */
#ifndef KB_SIM_CORE_IMPL_H
#define KB_SIM_CORE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <urcu/wfcqueue.h>

#include "sim/barrier.h"
#include "sim/sim.h"

/* A pending event's place in its worker's order, and the slot that holds
 * it: a sift moves these 32 bytes, never the 80-byte event. */
typedef struct kb_evkey {
	kb_time time;
	uint64_t pair;           /* dst << 32 | src */
	uint64_t seq;
	uint64_t slot;           /* the event's byte offset in ev (core.c ev_at) */
} kb_evkey;

/* A worker's events: a binary min-heap of n keys on (time, destination
 * LP, source LP, source sequence) over cap slots, the unused ones in the
 * stack free. A handler reads its event in its slot (no copy); a grow
 * while it runs keeps the old slots in retired until it returns. hole:
 * key[0] belongs to the event running now and is still counted in n; the
 * handler's first push fills it with one sift down (a pop and a push
 * cost one sift, not two), or the worker refills it from the last key
 * after the handler. The loop leaves a hole only in a heap of more than
 * a few events (core.c HOLE_MIN); a smaller one it pops at once, so that
 * the push may go into a next-event register (kb_worker). */
typedef struct kb_evheap {
	kb_evkey *key;
	kb_event *ev;
	uint64_t *free;
	size_t n, cap, n_free;
	int hole;
	int attn;                /* nonzero: the worker looks (an error, or retired) */
	kb_event *retired;
} kb_evheap;

/* A message in flight between workers; nodes are recycled per worker. */
typedef struct kb_worker kb_worker;

typedef struct kb_msgnode {
	struct cds_wfcq_node node;
	struct kb_msgnode *next_free;
	kb_worker *owner;        /* the worker whose slab it came from */
	kb_event ev;
} kb_msgnode;

struct __attribute__((aligned(64))) kb_lp {
	/* What an event and a send read, on one line, from the head that
	 * sim.h's accessors read inline (kb_lp_head: now, state, id). */
	union {
		kb_lp_head head;
		struct {
			kb_time now;
			void *state;
			uint32_t id;
			/* LPs local_lo .. local_lo + local_n - 1 share this LP's
			 * worker and lie within local_lat of it: a send to one
			 * of them with at least that delay goes straight into
			 * the heap, with no look at the destination. Every LP
			 * when all share one worker (a sequential run, or the
			 * rest of a gathered one; local_lat the longest link),
			 * else this LP's PE when its worker holds the PE whole
			 * (local_lat the engine-to-engine link). local_n 0: no
			 * such shortcut; nor where local_lat would not fit its 32
			 * bits (4.29 ms: the hot fields keep to one line). */
			uint32_t local_n;
			uint32_t local_lo;
			uint32_t local_lat;
		};
	};
	int (*event)(kb_lp *lp, const kb_event *ev); /* type->event */
	kb_worker *worker;
	uint64_t seq;
	uint64_t self_pair;      /* id << 32 | id: a self event's (dst, src) */
	/* The inbox on lines of its own: other threads write here. */
	struct __cds_wfcq_head inbox_head __attribute__((aligned(64)));
	struct cds_wfcq_tail inbox_tail __attribute__((aligned(64)));
	/* What only errors and sends that leave the shortcut read. */
	const kb_lp_type *type __attribute__((aligned(64)));
	kb_sim *sim;
	uint32_t pe, cluster;
};

_Static_assert(offsetof(struct kb_lp, now) == offsetof(kb_lp_head, now) &&
	       offsetof(struct kb_lp, state) == offsetof(kb_lp_head, state) &&
	       offsetof(struct kb_lp, id) == offsetof(kb_lp_head, id) &&
	       offsetof(struct kb_lp, self_pair) < 64, "kb_lp starts with kb_lp_head, its hot fields on one line");

/* kb_worker nr besides a count of ring events (0: the loop runs, the
 * ring is empty): no event loop runs, every event is in the heap; the
 * heap has a hole (kb_evheap), which the next push fills. Both fail
 * ev_put's test for a count with room, so that its common cases test
 * one word. */
#define KB_RING_OFF UINT32_MAX
#define KB_RING_HOLE (UINT32_MAX - 1)
/* The loop runs its events from bands (kb_band), from its start until
 * they are given up: pushes go into the bands. */
#define KB_RING_BANDS (UINT32_MAX - 2)

/* The most events a worker's ring holds (a power of two): decode on one
 * PE never has more than ~10 pending, so none of its events goes
 * through the heap. A worker of one LP (--threads 0) holds 2: its
 * buffers are per worker, and such runs have tens of thousands. */
#define KB_RING 16

/* A sequential run of many PEs (the multi-PE decode: 32 PEs, 64-96
 * pending events) keeps its pending events in bands instead of the heap
 * while its loops run (kb__worker_run, until kb__worker_close): each
 * band the events of one time, linked in
 * (destination, source, sequence) order through kb_event pad, the bands
 * in time order. The PEs run in lockstep: those events fall on 3-4
 * times, and 97% of pushes go to a time already pending, always behind
 * its events (a push costs a scan of a few bands and a link, a pop an
 * unlink, where the heap's sifts took ~160 instructions an event). */
#define KB_BANDS 16
#define KB_BAND_NO_MID UINT64_MAX

typedef struct kb_band {
	kb_time time;
	uint64_t head, tail;     /* slots (kb_evkey slot) of its first and last events */
	/* Where the last push into its middle went (KB_BAND_NO_MID: none,
	 * or it ran): the next such push walks from there when it orders
	 * behind it (the multi-PE opt2's PEs each push before their own
	 * last, which from the head made a walk through every PE before). */
	uint64_t mid;
} kb_band;

struct __attribute__((aligned(64))) kb_worker {
	/* What a send and the event loop touch first, then the heap. The
	 * next-event registers: while the loop runs (nr a count), a push
	 * whose key orders before every key in the heap goes into the ring
	 * instead, and the loop runs the ring's events from there, with no
	 * heap or slot work: most of decode's events send the very next one
	 * (~78% of opt3's), a second push at the same time often comes next
	 * after it (a quarter of opt2's events), and a plan's first stages
	 * go out at once, each behind the last (opt2's scheduler: up to 9
	 * pending, which went through the heap at ~200 instructions a push
	 * and pop). ring[nr - 1] .. ring[0] hold the pending events in
	 * order, the earliest last (a push before all, the most common,
	 * writes a buffer and moves nothing); ring[nr] .. are free buffers,
	 * and cur the buffer of the event that runs, so that running the
	 * next event costs one exchange. The ring's events order before
	 * every heap key (a push into a full ring before its latest moves
	 * that one into the heap), so events run in exactly the heap's
	 * order; they go into the heap when the loop ends, so nothing
	 * outside the loop sees them. */
	uint32_t nr;             /* events in the ring, or KB_RING_OFF, KB_RING_HOLE */
	uint32_t room;           /* ring size - 1: KB_RING - 1, or 1 */
	kb_event *cur;
	/* Every pending event of its LPs in one heap: popped in the order
	 * a heap of LPs on (earliest time, LP id), each with its own heap on
	 * (time, source, sequence), gave, at one sift per event instead of
	 * two heaps' (decode holds ~1.5 events per LP). */
	kb_evheap heap;
	kb_event *ring[KB_RING + 1]; /* ring[KB_RING]: put_ring's scratch */
	kb_event *rbuf;          /* the room + 2 buffers */
	uint32_t nb;             /* bands in use: band[1] (the earliest) .. band[nb] */
	uint32_t band_rest;      /* sequential loops left that do not try bands */
	uint32_t band_steps;     /* steps this loop's pushes may still walk into bands */
	/* band[0]: time 0, the end of a scan (core.c band_find); band[nb +
	 * 1]: time KB_TIME_INF, after the last (put_band_as looks at
	 * band[2] by its time alone) */
	kb_band band[KB_BANDS + 2];
	unsigned index;
	kb_sim *sim;
	kb_lp **members;         /* its LPs in id order (stable) */
	size_t n_lps, cap_lps;
	kb_msgnode *free_nodes;
	/* Nodes other workers received go back here (many producers, drained
	 * by whoever next needs nodes for this worker, outside drain phases). */
	struct __cds_wfcq_head ret_head __attribute__((aligned(64)));
	struct cds_wfcq_tail ret_tail __attribute__((aligned(64)));
	void **slabs;
	size_t n_slabs, cap_slabs;
	uint64_t events;
	kb_time last_time;       /* time of the last event processed */
	/* Lookahead: the LPs that answer for this worker's PEs (horizon
	 * hook), used only when every PE of the worker has one and PEs are
	 * whole; out_lat is the shortest link from here to another worker. */
	kb_lp **hlps;
	size_t n_hlps;
	int covered;
	kb_time out_lat;
	/* Its horizon worked out by the thread that drained it after a
	 * parallel window (hz, asked with enough = hz_enough), so that the
	 * coordinator does not ask every PE alone; hz_ok 0: none, or the
	 * worker has run or received messages since. */
	kb_time hz, hz_enough;
	int hz_ok;
	/* Instrumentation of the current window (written by the thread that
	 * runs this worker, read by the coordinator after the barrier). */
	uint64_t win_events;
	uint64_t win_ns;
	int err;                 /* first error of this worker, by (time, LP id) */
	kb_time err_time;
	uint32_t err_lp;
	kb_error error;
	pthread_t thread;
	int alloc_failed;
	/* Which thread runs it in a parallel window (exec.c): the thread that
	 * ran it last claims it first (its LPs' state is in that core's
	 * cache); taken and drained hold the job generation that claimed it. */
	atomic_uint home;
	atomic_uint taken, drained;
	/* The coordinator's heap of worker minima (see exec.c). */
	size_t hpos;
	kb_time hkey;
	int dirty;               /* its minimum may have moved since keyed */
};

struct kb_sim {
	kb_sim_config cfg;
	kb_lp **lps;
	size_t n_lps, cap_lps;
	kb_worker *workers;
	unsigned n_workers;
	kb_time window;
	kb_sim_stats stats;
	kb_barrier barrier;
	kb_time bound;           /* the current window's end, set before a barrier */
	int solo;                /* the coordinator alone runs this window */
	atomic_int quit;         /* tells workers to leave */
	/* dense windows: a job generation that wakes helpers (and stamps the
	 * workers claimed in it) and tickets that pick who helps */
	_Atomic uint64_t job;    /* generation << 32 | tickets taken */
	_Atomic unsigned job_gen; /* the futex word helpers sleep on */
	_Atomic unsigned helpers; /* threads besides the coordinator in this job */
	atomic_uint busy;        /* helpers still running the window (on_overlap's busy) */
	_Atomic unsigned job_sleepers;
	unsigned ncpu;
	unsigned n_pes;
	size_t *pe_index;        /* per LP id: its PE's index (0 .. n_pes - 1) */
	int per_lp;              /* a worker per LP (--threads 0): PEs split */
	int horizons;            /* some worker uses horizon hooks */
	double rate;             /* events per simulated ps, moving average */
	kb_time hz_span;         /* how far past its minimum a drain asks a horizon */
	double ns_event;         /* wall ns per event run alone, moving average */
	unsigned threshold;      /* the parallel threshold now (adapts) */
	unsigned wins, losses;   /* parallel windows that paid / did not */
	double overhead;         /* their ns beyond their events, this batch */
	unsigned probes;         /* windows dense only at the configured threshold */
	uint64_t sparse_run;     /* windows in a row run by the coordinator alone */
	/* figures at the last regroup (next: finding windows and draining) */
	uint64_t adapt_windows, adapt_next, adapt_events;
	uint64_t adapt_every;    /* KB_EXEC_ADAPT_WINDOWS (tests): regroup this often */
	/* instrumentation: per-thread sums, folded into stats at the end */
	_Atomic uint64_t ns_events, ns_barrier, ns_drain, ns_share;
	void *profile;           /* FILE * of the per-window profile, or NULL */
	atomic_int stop;
	atomic_int failed;       /* some worker has an error (first_error finds it) */
	int ran;
	/* The coordinator's view of the workers (exec.c): a min-heap on each
	 * worker's earliest event, the workers with events in the current
	 * window, and those whose minimum a solo window moved. */
	kb_worker **wheap;
	kb_worker **active;
	unsigned n_active;
	kb_worker **dirty;
	unsigned n_dirty;
	kb_time min_out_lat;
};

/* core.c */
uint64_t kb__now_ns(void);
void kb__worker_window(kb_worker *w, kb_time bound, uint64_t budget);
/* The same with no bound (a sequential run: one worker has every LP).
 * Stopped by its budget, it may leave the pending events in bands
 * (kb_band) for the next call, which kb__worker_min sees: the caller
 * ends with kb__worker_close, which puts them back into the heap, before
 * anything else looks at the worker's events. */
void kb__worker_run(kb_worker *w, uint64_t budget);
void kb__worker_close(kb_worker *w);
void kb__worker_drain(kb_worker *w);
kb_time kb__worker_min(const kb_worker *w);
size_t kb__worker_count_below(const kb_worker *w, kb_time bound, size_t cap);
int kb__worker_pool_init(kb_worker *w);
int kb__sim_regroup(kb_sim *sim, unsigned groups);
void kb__worker_pool_free(kb_worker *w);

/* executors */
int kb__exec_sequential(kb_sim *sim, kb_error *err);
int kb__exec_parallel(kb_sim *sim, kb_error *err);

#endif
