/*
 * The PE pipeline: per PE, seven logical processes (PE_CPU, PE_SCHEDULER,
 * PE_DMA, PE_TCM, PE_GEMM, PE_MATH, PE_IPCQ) that exchange messages only.
 * Shared, read-only during a run: the machine description below, the plans
 * a scheduler hands its engines (immutable geometry; each data buffer is
 * used by one stage at a time, in the order the messages impose), and the
 * memory store.
 */
#ifndef KB_PE_PE_H
#define KB_PE_PE_H

#include <string.h>

#include "base/time.h"
#include "oplog/oplog.h"
#include "pe/cmd.h"
#include "model/memstore.h"
#include "model/topology.h"
#include "sim/sim.h"

/* Engine ids, in op_log "eng" names. KB_ENG_LP names the LPs of the
 * synthetic model (benches/kernels/synthetic.c), which has no PEs. */
typedef enum kb_eng {
	KB_ENG_CPU = 0, KB_ENG_SCHED, KB_ENG_DMA, KB_ENG_TCM, KB_ENG_GEMM,
	KB_ENG_MATH, KB_ENG_IPCQ, KB_ENG_LP, KB_ENG_COUNT
} kb_eng;
/* "cpu", "sched", ...; "?" for an invalid id. */
const char *kb__eng_name(int eng);
/* All KB_ENG_COUNT names, in id order: the trace's tracks. */
extern const char *const kb__eng_names[KB_ENG_COUNT];
/* The trace channel of a record of engine eng: PE_DMA's reads and writes,
 * PE_IPCQ's sends and receives run on channels of their own. */
const char *kb__eng_channel(int eng, const kb_oplog_record *rec);

#define KB_PE_LPS 7   /* LPs per PE, in kb_eng order (cpu .. ipcq) */

/* Message and event types. */
enum {
	KB_EV_CPU_NEXT = 1,      /* self: PE_CPU looks at its next command */
	KB_EV_CPU_DISPATCHED,    /* self: a dispatch finished */
	KB_EV_CMD,               /* cpu -> sched: w[0] = kb_cmd* */
	KB_EV_CMD_DONE,          /* sched -> cpu: w[0] = command id */
	KB_EV_STAGE,             /* -> engine: w[0] plan, w[1] step, w[2] the stage (a kb_stage_ref * into
				  * the plan's list for the step), w[3] phase, slot and acc
				  * (kb__stage_pack) and KB_STAGE_ENDS, w[4] the stage's cost in the plan's memo (a
				  * kb_stage_cost *; 0: none, the engine works it out);
				  * aux: the engine's channel (kb__stage_chan) | the stages after
				  * this one in the step << 1 (kb__stage_aux) */
	KB_EV_STEP_DONE,         /* engine -> sched: same payload */
	KB_EV_ENG_DONE,          /* self: an engine channel finished (aux = channel) */
	KB_EV_IPCQ_DATA,         /* ipcq -> remote ipcq: w[0] payload*, aux = tag */
	KB_EV_IPCQ_RECV          /* (unused id kept stable) */
};

/* A STAGE message's w[3]: its phase (a kb_phase), staging slot and
 * accumulator slot (each below 64), in one word, so that w[4] is free for
 * the stage's cost, which its sender looks up once a step instead of each
 * engine once a stage. */
static inline uint64_t kb__stage_pack(uint32_t phase, uint32_t slot, uint32_t acc)
{
	return phase | slot << 8 | acc << 16;
}

/* A bit of w[3] beside the pack: the step's end is its command's end.
 * Set in the message a keyed plan's start keeps (the scheduler's
 * start_keep) when that single step is all its command runs, so that its
 * STEP_DONE ends the command without the plan's counts being read. */
#define KB_STAGE_ENDS (UINT64_C(1) << 24)

/* ev's type and aux as one 8-byte store: kb__lp_send copies them as one
 * 8-byte load right after, which two 4-byte stores (or one of them and
 * older bytes) cannot forward to: a stall of ~10-15 cycles a stage, 12%
 * of engines.c finish's samples (issue 13). */
static inline void kb__ev_type_aux(kb_event *ev, uint32_t type, uint32_t aux)
{
	struct {
		uint32_t type, aux;
	} ta = { type, aux };
	uint64_t x;

	_Static_assert(offsetof(kb_event, aux) == offsetof(kb_event, type) + 4, "aux follows type");
	memcpy(&x, &ta, sizeof(x));
	memcpy(&ev->type, &x, sizeof(x));
}

/* ev's w[1] .. w[4] as two 16-byte stores, the pieces kb__lp_send loads
 * them in: an 8-byte store under such a load is not forwarded either. */
static inline void kb__ev_words(kb_event *ev, uint64_t w1, uint64_t w2, uint64_t w3, uint64_t w4)
{
	typedef uint64_t v2 __attribute__((vector_size(16)));
	v2 a = { w1, w2 }, b = { w3, w4 };

	memcpy(&ev->w[1], &a, sizeof(a));
	memcpy(&ev->w[3], &b, sizeof(b));
}

static inline uint32_t kb__stage_phase(uint64_t pk)
{
	return (uint32_t)pk & 0xff;
}

static inline uint32_t kb__stage_slot(uint64_t pk)
{
	return (uint32_t)(pk >> 8) & 0xff;
}

static inline uint32_t kb__stage_acc(uint64_t pk)
{
	return (uint32_t)(pk >> 16) & 0xff;
}

/*
 * Where PE_CPU gets its commands, in program order. The layer above (the
 * runtime's kernel launch) hands each PE one; pe never knows what feeds it.
 * next blocks until a command is there and ends the stream with KB_CMD_END
 * or KB_CMD_ERROR. The source stays owned by whoever handed it.
 */
typedef struct kb_cmd_source {
	kb_cmd *(*next)(void *ctx);
	/* Up to max of the commands queued after those taken, oldest first,
	 * skipping the first skip, without taking them (PE_CPU's horizon reads
	 * ahead); may be NULL. Called between windows, while next is not. */
	size_t (*peek)(void *ctx, size_t skip, const kb_cmd **out, size_t max);
	void *ctx;               /* NULL: no kernel runs on this PE */
	/* The commands queued, which PE_CPU takes itself while more than
	 * ring->low are (then next: its producer may have to run); NULL:
	 * every command by next. */
	kb_cmd_ring *ring;
} kb_cmd_source;
typedef struct kb_pe_state kb_pe_state;

/* Read-only machine description. */
typedef struct kb_machine {
	const kb_topo_params *tp;
	kb_cost_model cost;
	kb_clock clock;          /* cost.clock_ghz, for kb__pe_ps */
	kb_memstore *mem;        /* NULL in timing mode */
	uint32_t n_pes;
	uint64_t tcm_user_bytes; /* TCM left to kernels after the staging reserve */
	uint32_t staging_slots;
	kb_sim *sim;
	kb_pe_state **pes;
} kb_machine;

static inline kb_time kb__pe_ps(const kb_machine *m, double cycles)
{
	return kb__clock_ps(&m->clock, cycles);
}

/* kb__pe_after's failure: the message. */
int kb__pe_after_fail(kb_lp *lp, const kb_machine *m, double cycles, const char *what,
		      const char *keys);
/* Schedules ev on lp itself after cycles; when that passes the end of
 * simulated time (KB_TIME_MAX) the LP fails with KB_ERANGE naming what
 * took so long (what) and the topology keys its cycles come from (keys).
 * Inline: every stage and dispatch comes through here. _ps: the same with
 * the cycles already converted (d = kb__pe_ps(m, cycles)). */
static inline int kb__pe_after_ps(kb_lp *lp, const kb_machine *m, kb_time d, double cycles,
				  const char *what, const char *keys, const kb_event *ev)
{
	if (kb__lp_past_end(lp, d))
		return kb__pe_after_fail(lp, m, cycles, what, keys);
	return kb__lp_self(lp, d, ev);
}

static inline int kb__pe_after(kb_lp *lp, const kb_machine *m, double cycles, const char *what,
			       const char *keys, const kb_event *ev)
{
	return kb__pe_after_ps(lp, m, kb__pe_ps(m, cycles), cycles, what, keys, ev);
}

/* Busy time of an engine with several channels (PE_DMA's read and write,
 * PE_IPCQ's send and receive): the engine is busy while any channel is,
 * and time two channels share counts once, so busy / sim_time is a
 * fraction in [0, 1]. The LP's own state. */
typedef struct kb_busy {
	int channels;            /* channels busy now */
	kb_time t0;              /* when the first of them started */
} kb_busy;

static inline void kb__busy_start(kb_busy *b, kb_time now)
{
	if (b->channels++ == 0)
		b->t0 = now;
}

/* kb__busy_start for the one channel of an engine that has one, idle
 * now: no other channel to count (the count kb__busy_stop takes back). */
static inline void kb__busy_start_one(kb_busy *b, kb_time now)
{
	b->channels = 1;
	b->t0 = now;
}

static inline void kb__busy_stop(kb_busy *b, kb_time now, uint64_t *busy_ps)
{
	if (--b->channels == 0)
		*busy_ps += now - b->t0;
}

/* Per-PE figures, each written only by its own LP. The PE's dispatch
 * time is busy_ps[KB_ENG_CPU]: PE_CPU is busy exactly while it
 * dispatches, and kept it twice (issue 13). */
typedef struct kb_pe_figures {
	uint64_t commands;
	uint64_t busy_ps[KB_ENG_COUNT];
} kb_pe_figures;

struct kb_pe_state {
	uint32_t pe, cluster;
	kb_machine *m;
	kb_pe_figures fig;
	void *lp_state[KB_PE_LPS];
	kb_oplog_lane *lane[KB_PE_LPS]; /* op_log lane of each LP; NULL: no op_log */
	kb_cmd_source source;    /* source.ctx NULL when no kernel runs here */
};

static inline uint32_t kb__pe_lp(uint32_t pe, int eng)
{
	return pe * KB_PE_LPS + (uint32_t)eng;
}



/* The LP types of a PE (state_size/init/final, ROSS's tw_lptype); the
 * machine builds each PE from its table of them. init gets a kb_pe_lp_arg. */
typedef struct kb_pe_lp_arg {
	kb_pe_state *ps;
	int eng;
} kb_pe_lp_arg;
extern const kb_lp_type kb__cpu_type;
extern const kb_lp_type kb__sched_type;
extern const kb_lp_type kb__engine_types[KB_ENG_COUNT]; /* DMA, TCM, GEMM, MATH */
extern const kb_lp_type kb__ipcq_type;

/* A record in the op_log from inside the PE's LP of engine eng (a valid
 * kb_eng). Inline: every stage logs one, and as a call its nine
 * arguments and the record were built twice. */
static inline int kb__pe_log(const kb_pe_state *ps, int eng, const char *op, uint64_t cmd,
			     kb_time t0, kb_time t1, int64_t bytes, const kb_oplog_field *fields,
			     int n_fields)
{
	kb_oplog_lane *lane = ps->lane[eng];
	kb_oplog_record r = { t0, t1, ps->pe, kb__eng_names[eng], op, cmd, NULL, -1, bytes, NULL, 0,
			      sizeof(kb_oplog_record) };

	return lane ? kb__oplog_emit(lane, &r, fields, n_fields) : KB_OK;
}

#endif
