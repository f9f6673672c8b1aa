/*
 * The simulation core: logical processes (LPs) that share nothing and
 * exchange timestamped messages, run by an executor.
 *
 * - An LP is one engine instance (e.g. pe3.dma). It owns its state, an event
 *   heap and an inbox. Handlers see only their own LP.
 * - A message to another LP carries a delay of at least the latency of the
 *   link between the two (same PE / same cluster / across clusters); the
 *   smallest of those is the lookahead. A shorter delay is an error.
 * - Events at an LP are processed in the total order (time, source LP,
 *   source sequence number); sequence numbers count each LP's own sends, so
 *   nothing depends on the order in which messages arrive.
 * - Executors (sequential, threaded one-per-LP, threaded M:N) run the same
 *   LPs and give byte-identical results; no model code knows which one runs.
 */
#ifndef KB_SIM_SIM_H
#define KB_SIM_SIM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/time.h"
#include "kernbench/common.h"

typedef struct kb_sim kb_sim;
typedef struct kb_lp kb_lp;

#define KB_EVENT_WORDS 5

/* One event or message. The core fills time, src, dst and seq. */
typedef struct kb_event {
	kb_time time;
	uint32_t src;
	uint32_t dst;
	uint64_t seq;
	uint64_t pad;                /* the core's (a band's link, core_impl.h kb_band); puts w[1] .. w[4] on a 16-byte boundary, as the core copies them */
	uint32_t type;               /* model-defined */
	uint32_t aux;                /* model-defined */
	uint64_t w[KB_EVENT_WORDS];  /* model-defined payload */
} kb_event;

/* A kind of LP: callbacks over the LP's own state (ROSS tw_lptype style). */
typedef struct kb_lp_type {
	const char *name;
	/* Schedules the LP's first events; may be NULL. */
	int (*start)(kb_lp *lp);
	/* Handles one event; returns 0 or a kb_status after kb__lp_fail. */
	int (*event)(kb_lp *lp, const kb_event *ev);
	/* At quiescence: returns nonzero when the LP still has unfinished work
	 * and writes what it waits for into buf (deadlock report); may be NULL. */
	int (*pending)(kb_lp *lp, char *buf, size_t len);
	/* Frees what an event never delivered owns (a run that stopped early);
	 * must not touch the LP's state, which may be gone. May be NULL. */
	void (*discard)(const kb_event *ev);
	/* State the core allocates (zeroed) for each LP of this type and frees
	 * with the simulation; 0: the state is the caller's (kb__sim_add_lp's
	 * arg), and the core neither allocates nor frees it. */
	size_t state_size;
	/* Fills a new LP's state from kb__sim_add_lp's arg; returns 0 or a
	 * kb_status (the LP is then not added). May be NULL. */
	int (*init)(void *state, void *arg);
	/* Frees what the state owns, when the simulation is destroyed; the
	 * core frees a state it allocated itself. May be NULL. */
	void (*final)(void *state);
	/* Lookahead beyond the link latency: a lower bound on the time at which
	 * any LP of this LP's PE next sends a message to another PE, given that
	 * the PE's earliest pending event is at t_min and that nothing arrives
	 * from other PEs; KB_TIME_INF when it never will. The LP answers for its
	 * whole PE (the model knows which of its LPs can reach another PE); a
	 * PE where no LP answers may send at t_min. Any bound of at least
	 * `enough` is as good as a later one (the window ends there anyway), so
	 * the LP may stop looking ahead there. Called between windows, on any
	 * thread, while no handler of the PE runs. May be NULL. */
	kb_time (*horizon)(kb_lp *lp, kb_time t_min, kb_time enough);
} kb_lp_type;

/* Flags of a window hook call. */
enum {
	/* The run is over: nothing more will be produced; do everything now. */
	KB_WINDOW_LAST = 1,
	/* The parallel executor will call on_overlap from its coordinating
	 * thread while the LPs run the next window: set work aside for it
	 * rather than doing it now. */
	KB_WINDOW_OVERLAP = 2,
};

#define KB_SIM_THREADS_AUTO (-1)

typedef struct kb_sim_config {
	int threads;            /* 0: one thread per LP; 1: sequential; N: N workers;
				 * KB_SIM_THREADS_AUTO: min(PEs, 4 x cores) workers */
	kb_time lat_pe;         /* smallest latency between LPs of one PE */
	kb_time lat_cluster;    /* between PEs of one cluster */
	kb_time lat_global;     /* between clusters */
	unsigned par_threshold; /* events in a window below which one thread runs it (0: default) */
	/*
	 * The window hook: how the owner learns that results are final, without
	 * the core knowing what they are (the runtime seals and writes the
	 * op_log with it). on_window runs on the executor's coordinating thread
	 * while no LP runs, whenever everything the LPs produce with a time
	 * before bound is final: between windows, and with KB_WINDOW_LAST at the
	 * end (bound = KB_TIME_INF, or the time of the first error). Either
	 * callback may be NULL; a nonzero return stops the run with that error.
	 */
	int (*on_window)(void *ctx, kb_time bound, unsigned flags, kb_error *err);
	/* busy: while it reads nonzero, other threads still run the window
	 * and on_overlap may go on with the work set aside; once it reads 0
	 * they wait for on_overlap alone, which should leave what it has not
	 * done for a later call. NULL: do all of it now. */
	int (*on_overlap)(void *ctx, const atomic_uint *busy, kb_error *err);
	/* Called on every other thread of a parallel window while on_overlap
	 * runs on the coordinating one, before they run LPs: a share of the
	 * work set aside, which on_overlap waits for. May be NULL. */
	void (*on_share)(void *ctx);
	/* Told before the first window of a parallel run or the first event
	 * of a sequential one (1), and again whenever auto changes between
	 * them, how many threads run windows (the hook may cut shared work
	 * finer for more, or take the records of one thread in order). May
	 * be NULL. */
	void (*on_threads)(void *ctx, unsigned threads);
	void *hook_ctx;
	/* Work the owner spreads over a sequential run's events (the
	 * op_log's hash, issue 13): after each event, while *step_n reads
	 * nonzero, on_step(step_ctx) does a small piece of it, which the
	 * next events' work overlaps. Only on the executor's one thread,
	 * never in a parallel run. Both NULL: none. */
	const size_t *step_n;
	void (*on_step)(void *step_ctx);
	void *step_ctx;
} kb_sim_config;

/* Figures of a finished run. */
typedef struct kb_sim_stats {
	kb_time end_time;       /* time of the last event */
	uint64_t events;        /* events processed (messages + self events) */
	uint64_t windows;       /* synchronization windows (threaded executors) */
	uint64_t parallel_windows; /* windows run by more than one thread */
	unsigned workers;       /* worker threads used */
	kb_time window;         /* smallest window: the shortest link between workers
				 * (KB_TIME_INF when sequential); horizons stretch it */
	unsigned threads;       /* busy threads at most (never more than cores) */
	int gathered;           /* windows too small: 1 PEs regrouped whole, 2 went sequential
				 * (or auto's last stretch ran on one thread) */
	uint64_t alone_events;  /* events a threaded executor ran on one thread, every LP on it */
	uint64_t switches;      /* auto's changes between windows and one thread */
	/* Where the executor's wall time went (nanoseconds, summed over the
	 * threads; threaded executors only). */
	uint64_t ns_events;     /* running events (workers' windows) */
	uint64_t ns_barrier;    /* waiting at the barrier for the other threads */
	uint64_t ns_next;       /* finding the next window (minima, horizons, density) */
	uint64_t ns_drain;      /* moving delivered messages into heaps */
	uint64_t ns_oplog;      /* in the window hooks (the runtime's op_log) */
	uint64_t ns_wall;       /* the executor's own wall time */
} kb_sim_stats;

kb_sim *kb__sim_create(const kb_sim_config *cfg, kb_error *err);
void kb__sim_destroy(kb_sim *sim);
/* Adds an LP; pe/cluster locate it for link latencies. Its state is made
 * as its type says (state_size, init, with arg). Returns its id, or
 * UINT32_MAX on allocation failure or when init fails. LP ids order op_log
 * records at equal times, so models add LPs PE-major. */
uint32_t kb__sim_add_lp(kb_sim *sim, const kb_lp_type *type, void *arg,
			uint32_t pe, uint32_t cluster);
/* The state of LP id (NULL for an unknown id). */
void *kb__sim_lp_state(kb_sim *sim, uint32_t id);
uint32_t kb__sim_lp_count(const kb_sim *sim);
/* Runs to quiescence. On error, err says what failed, where and when. */
int kb__sim_run(kb_sim *sim, kb_error *err);
const kb_sim_stats *kb__sim_stats(const kb_sim *sim);
/* Asks a running simulation to stop at the next window (any thread). */
void kb__sim_request_stop(kb_sim *sim);

/* ---- called from inside handlers, on the LP's own thread ---- */

/* What every LP starts with (core_impl.h lays kb_lp out so), for the
 * accessors below to read inline: handlers ask for their time and state
 * on every event, and a call into the core for each cost more than the
 * load. */
typedef struct kb_lp_head {
	kb_time now;
	void *state;
	uint32_t id;
} kb_lp_head;

static inline kb_time kb__lp_now(const kb_lp *lp)
{
	return ((const kb_lp_head *)(const void *)lp)->now;
}

static inline uint32_t kb__lp_id(const kb_lp *lp)
{
	return ((const kb_lp_head *)(const void *)lp)->id;
}

static inline void *kb__lp_state(kb_lp *lp)
{
	return ((const kb_lp_head *)(const void *)lp)->state;
}
/* Sends ev (type, aux, w) to dst after delay; ev->time etc. are filled in.
 * A delay below the link latency is KB_ELOOKAHEAD. */
int kb__lp_send(kb_lp *lp, uint32_t dst, kb_time delay, const kb_event *ev);
/* The same for a message whose handler (and type's discard) reads its
 * type, aux and w[0] alone (a command to PE_SCHEDULER, its end to
 * PE_CPU): as kb__lp_self_short, w[1] .. w[4] may hold anything. */
int kb__lp_send_short(kb_lp *lp, uint32_t dst, kb_time delay, const kb_event *ev);
/* kb__lp_send to dst, an LP of lp's own PE (lp's own too), after the
 * engine-to-engine latency (kb_sim_config lat_pe), the delay of nearly
 * every message of a decode run: the delay known, the common case
 * tests neither it against the link nor that the sum can wrap (issue
 * 13). _short: as kb__lp_send_short. */
int kb__lp_send_pe(kb_lp *lp, uint32_t dst, const kb_event *ev);
int kb__lp_send_pe_short(kb_lp *lp, uint32_t dst, const kb_event *ev);
/* kb__lp_send_pe of ev[0] .. ev[m - 1] to dst, one after another, as one
 * call: where they fit in the ring at once, it moves once (issue 13). */
int kb__lp_send_pe_run(kb_lp *lp, uint32_t dst, const kb_event *ev, uint32_t m);
/* The same written in place: where m messages to dst fit in the ring at
 * once, their buffers, keyed (their seq numbers taken), message k's at
 * [m - 1 - k], for the caller to write their type, aux and payload
 * before its handler returns; NULL where they do not (nothing done:
 * kb__lp_send_pe_run sends them). */
kb_event *const *kb__lp_send_pe_place(kb_lp *lp, uint32_t dst, uint32_t m);
/* Schedules an event on the LP itself; any delay >= 0. */
int kb__lp_self(kb_lp *lp, kb_time delay, const kb_event *ev);
/* The same for an event whose handler reads its type, aux and w[0]
 * alone (an engine's stage end, PE_CPU's end of a dispatch: a third of
 * a decode run's events): w[1] .. w[4] need not be copied, and may
 * hold anything when it runs (issue 13). */
int kb__lp_self_short(kb_lp *lp, kb_time delay, const kb_event *ev);
/* Whether now + delay passes KB_TIME_MAX, as kb__time_add refuses it
 * (now is at most KB_TIME_MAX, so the sum cannot wrap): kb__lp_self's
 * own test, written the same, so that a caller that tests first (to
 * fail with its own message) lets the compiler drop kb__lp_self's once
 * it is inlined (issue 13: a stage's start made both). */
static inline int kb__lp_past_end(const kb_lp *lp, kb_time delay)
{
	return ((kb__lp_now(lp) + delay) | delay) > KB_TIME_MAX;
}
/* Records an error of this LP at its current time; returns code. */
int kb__lp_fail(kb_lp *lp, int code, const char *fmt, ...) KB_PRINTF(3, 4);
/* The same with an error object: keeps its detail, source and line. */
int kb__lp_fail_with(kb_lp *lp, const kb_error *e);
/* Latency of the link from lp to dst (what kb__lp_send requires). */
kb_time kb__lp_link_latency(const kb_lp *lp, uint32_t dst);

#endif
