/*
 * PE_DMA, PE_TCM, PE_GEMM and PE_MATH: each a FIFO of stages on one
 * channel (PE_DMA has two: read and write). An engine knows only a stage's
 * kind and parameters (ADR-0065 D7): it asks the plan what the stage costs,
 * performs it in data mode, logs it, and passes the step on to the engine
 * of its next stage, or back to PE_SCHEDULER when the step is complete.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "pe/plan.h"

/* A waiting STAGE message's payload as a channel's ring keeps it (48
 * bytes, not the message's 72): its words as the message has them (pe.h)
 * and its aux (kb__stage_aux), so that a wait copies them as they are
 * loaded (a layout of its own, 40 bytes, cost ~3 instructions a waiting
 * stage to rearrange). */
typedef struct stage_msg {
	uint64_t w[KB_EVENT_WORDS];
	uint32_t aux;
} stage_msg;

typedef struct chan {
	/* The running stage's message (while busy), in the engine's own
	 * state, which every event touches: most stages find their channel
	 * idle (86% of opt3's, 56% of opt2's) and never go through the ring.
	 * It goes on from here to the next engine (finish), and is made
	 * what it sends (prepare) when the stage starts: its stage and the
	 * engine it goes to (dst, a kb_eng) are kept apart till then. */
	kb_event run;
	uint32_t busy;
	uint32_t dst;
	const kb_event *done;    /* its ENG_DONE self-event (kb_engine done) */
	/* Its stage and cost (the plan's memoised one, or `own` worked out
	 * at start) apart, t0 between them: side by side, prepare's two
	 * stores of them were packed into one 16-byte store (GCC's SLP
	 * vectorizer: movq, movq, punpcklqdq, movups for two movs). */
	const kb_stage_ref *st;
	kb_time t0;
	const kb_stage_cost *cost;
	/* FIFO ring of the stages waiting behind it, cap a power of two
	 * (mask = cap - 1). head goes back to 0 whenever the ring empties,
	 * so the slots in use are its first few, warm, not a cycle through
	 * all of them. */
	stage_msg *q;
	uint32_t head, n, mask;
	kb_stage_cost own;
	/* to 192 bytes (184 without): three lines, so that a channel's
	 * address from its index is a lea and a shift */
	char pad[8];
} chan;

_Static_assert(sizeof(chan) == 192, "chan: 192 bytes");

typedef struct kb_engine {
	/* Read every stage, found once at init instead of through ps and
	 * its machine: the machine, its memory store (data mode), this PE's
	 * first LP and this engine's busy time. */
	const kb_machine *m;
	kb_memstore *mem;
	uint32_t lp0;
	uint64_t *busy_ps;
	chan ch[2];
	kb_busy busy;
	/* Its op_log lane (NULL: no op_log) and a stage record with what is
	 * the same every stage (pe, eng, kind, lbytes, size) filled at init:
	 * a stage's times, op, command and bytes go by value
	 * (kb_oplog_stage). */
	kb_oplog_lane *lane;
	kb_oplog_record rec;
	/* The ENG_DONE self-event of each channel, the same every stage: aux
	 * the channel, w[0] its chan (the state never moves), which the
	 * handler then takes as it is. */
	kb_event done[2];
} kb_engine;

/* kb__pe_after's failure for c->run: its message (out of line, as only
 * it needs the stage kind's keys). */
static __attribute__((noinline)) int begin_fail(kb_lp *lp, const kb_engine *e, const chan *c)
{
	return kb__pe_after_fail(lp, e->m, c->cost->cycles, c->cost->op,
				 kb__stage_keys(c->st->kind));
}

/* How a stage's start changes its engine's busy time (begin's fresh). */
enum {
	/* it follows the stage that ended on its channel just now (finish),
	 * which left the engine busy: a stop and a start at one time add
	 * nothing to its busy time */
	GOES_ON = 0,
	FRESH,          /* on an idle channel of PE_DMA (two channels) */
	FRESH_ONE       /* on the one channel of an idle engine of one */
};

/* c->run's stage begins now on channel c, costing c->cost: kb__pe_after_ps,
 * whose cycles and keys only its failure reads. fresh: GOES_ON, FRESH or
 * FRESH_ONE. */
static inline __attribute__((always_inline)) int begin(kb_lp *lp, kb_engine *e, chan *c, int fresh)
{
	kb_time t = kb__lp_now(lp), d = c->cost->ps;

	c->t0 = t;
	if (fresh == FRESH_ONE)
		kb__busy_start_one(&e->busy, t);
	else if (fresh)
		kb__busy_start(&e->busy, t);
	if (kb__lp_past_end(lp, d))
		return begin_fail(lp, e, c);
	return kb__lp_self_short(lp, d, c->done);
}

/* start for a stage whose plan has no memoised cost for it: worked out
 * into c->own (out of line, so that start needs no stack frame). */
static __attribute__((noinline)) int start_own(kb_lp *lp, kb_engine *e, chan *c, int fresh)
{
	kb__plan_cost_compute((const kb_plan *)(uintptr_t)c->run.w[0],
			      (kb_phase)kb__stage_phase(c->run.w[3]), c->run.w[1], c->st, &c->own);
	c->cost = &c->own;
	return begin(lp, e, c, fresh);
}

/* The stage st (a STAGE message's aux and cost, c->run holding its w[0],
 * w[1] and w[3]) is about to run on channel c: c->run is made at once the
 * message that goes on when it ends, to the engine of the step's next
 * stage (the next stage and its cost: a step's costs lie in its stages'
 * order in the memo) or back to PE_SCHEDULER (STEP_DONE, the payload as
 * it came). Made now, its words are long in L1 when finish sends it,
 * where stored right before the send (finish) they were loaded wider
 * than stored, which the stores cannot forward to (a stall on each of
 * them, ~15% of finish's samples: issue 13). */
static inline void prepare(chan *c, const kb_stage_ref *st, uint32_t aux, const kb_stage_cost *cost)
{
	kb_event *ev = &c->run;

	c->st = st;
	c->cost = cost;
	if (aux >> 1) {
		ev->w[2] = (uint64_t)(uintptr_t)(st + 1);
		ev->w[4] = cost ? (uint64_t)(uintptr_t)(cost + 1) : 0;
		kb__ev_type_aux(ev, KB_EV_STAGE, kb__stage_aux(st + 1, (aux >> 1) - 1));
		c->dst = st[1].eng;
	} else {
		ev->w[2] = (uint64_t)(uintptr_t)st;
		ev->w[4] = (uint64_t)(uintptr_t)cost;
		kb__ev_type_aux(ev, KB_EV_STEP_DONE, aux);
		c->dst = KB_ENG_SCHED;
	}
}

/* Starts c's stage (busy from now; prepare has been), at the cost its
 * message points at (its sender looked it up in the plan's memo), or one
 * worked out. The cost is pointed at, not copied (40 bytes a stage): the
 * plan, and so its memo, lives until its command's last stage is done. */
static inline __attribute__((always_inline)) int start(kb_lp *lp, kb_engine *e, chan *c, int fresh)
{
	if (__builtin_expect(!c->cost, 0))
		return start_own(lp, e, c, fresh);
	return begin(lp, e, c, fresh);
}

/* The record of c's stage, ended at now. */
static inline __attribute__((always_inline)) kb_oplog_stage stage_rec(kb_time now, const chan *c)
{
	const kb_stage_cost *cost = c->cost;
	const kb_stage_ref *st = c->st;
	const kb_cmd *cmd = ((const kb_plan *)(uintptr_t)c->run.w[0])->cmd;
	const char *operand = NULL;

	if (st->kind == KB_ST_DMA_READ && st->op >= 0) {
		operand = cmd->ops[st->op].operands[st->operand].name;
		if (!operand)
			operand = "";
	}
	return (kb_oplog_stage){ c->t0, now, cost->op, cmd->id, cost->bytes, c->run.w[1], cost->n, operand };
}

/* log_stage's rare record (out of line): worked out again here, so that
 * nothing of it is kept live across the common one (issue 13). */
static __attribute__((noinline, cold)) int log_stage_rare(kb_time now, kb_engine *e, const chan *c)
{
	kb_oplog_stage v = stage_rec(now, c);

	return kb__oplog_emit_stage_rare(e->lane, &e->rec, &v);
}

static int log_stage(kb_time now, kb_engine *e, const chan *c)
{
	int rc;

	if (!e->lane)
		return KB_OK;
	rc = kb__oplog_emit_stage_fast(e->lane, &e->rec, stage_rec(now, c));
	if (__builtin_expect(rc == KB_OPLOG_RARE, 0))
		return log_stage_rare(now, e, c);
	return rc;
}

/* Data mode: performs the running stage (out of line: its kb_error is
 * 1 KiB of stack). */
static __attribute__((noinline)) int exec_stage(kb_lp *lp, const chan *c)
{
	const kb_event *ev = &c->run;   /* w[0], w[1] and w[3] as they came */
	kb_plan *p = (kb_plan *)(uintptr_t)ev->w[0];
	kb_error err;
	int rc;

	/* Only the message is read, and only on failure: not the whole
	 * kb_error (1 KiB) cleared for every stage of a data-mode run. */
	err.code = KB_OK;
	err.message[0] = '\0';
	rc = kb__plan_exec(p, (kb_phase)kb__stage_phase(ev->w[3]), ev->w[1], c->st, kb__stage_slot(ev->w[3]),
			   kb__stage_acc(ev->w[3]), &err);
	if (rc)
		return kb__lp_fail(lp, rc, "command %" PRIu64 " (%s:%d): %s", p->cmd->id, p->cmd->file,
				   p->cmd->line, err.message);
	return KB_OK;
}

/* The running stage of channel c ended: its message goes on to the
 * engine of the step's next stage, or back to PE_SCHEDULER; the first
 * waiting stage, if any, starts. Out of line: stage_in's path has no
 * frame for it to pay for. */
static __attribute__((noinline)) int finish(kb_lp *lp, chan *c)
{
	kb_engine *e = kb__lp_state(lp);
	kb_time now = kb__lp_now(lp);
	int rc;

	if (e->mem && (rc = exec_stage(lp, c)))
		return rc;
	rc = log_stage(now, e, c);
	if (rc)
		return kb__lp_fail(lp, rc, "%s buffering an op_log record", kb_strerror(rc));
	rc = kb__lp_send_pe(lp, e->lp0 + c->dst, &c->run);
	if (!c->n) {
		c->busy = 0;
		kb__busy_stop(&e->busy, now, e->busy_ps);
		return rc;
	}
	/* The first waiting stage's message, made whole again. */
	const stage_msg *m = &c->q[c->head];

	c->run.w[0] = m->w[0];
	c->run.w[1] = m->w[1];
	c->run.w[3] = m->w[3];
	prepare(c, (const kb_stage_ref *)(uintptr_t)m->w[2], m->aux,
		(const kb_stage_cost *)(uintptr_t)m->w[4]);
	c->head = --c->n ? (c->head + 1) & c->mask : 0;
	if (rc)
		return rc;
	return start(lp, e, c, GOES_ON);
}

static int stage_wait(kb_lp *lp, chan *c, const kb_event *ev);

/* stage_wait on a full ring: doubles it first (out of line: it seldom
 * grows, and its call would give every wait a stack frame). */
static __attribute__((noinline)) int stage_wait_grow(kb_lp *lp, chan *c, const kb_event *ev)
{
	uint32_t cap = 2 * (c->mask + 1);
	stage_msg *q = aligned_alloc(64, cap * sizeof(*q));

	if (!q)
		return kb__lp_fail(lp, KB_ENOMEM, "out of memory queueing a stage");
	for (uint32_t i = 0; i < c->n; i++)
		q[i] = c->q[(c->head + i) & c->mask];
	free(c->q);
	c->q = q;
	c->head = 0;
	c->mask = cap - 1;
	return stage_wait(lp, c, ev);
}

/* A STAGE message for a busy channel c waits in its ring. */
static __attribute__((noinline)) int stage_wait(kb_lp *lp, chan *c, const kb_event *ev)
{
	if (__builtin_expect(c->n > c->mask, 0))
		return stage_wait_grow(lp, c, ev);
	stage_msg *m = &c->q[(c->head + c->n++) & c->mask];

	memcpy(m->w, ev->w, sizeof(m->w));
	m->aux = ev->aux;
	return KB_OK;
}

/* A STAGE message for channel c of e: it starts at once on an idle
 * channel (fresh: FRESH, or FRESH_ONE on an engine of one channel, a
 * constant), else waits in its ring. */
static inline __attribute__((always_inline)) int stage_to(kb_lp *lp, kb_engine *e, chan *c,
							  const kb_event *ev, int fresh)
{
	/* c's address in a register from here on: GCC worked it out
	 * from e and the index again for each group of stores (three
	 * instructions, three times: ~7 instructions a stage, issue 13). */
	__asm__("" : "+r"(c));
	if (c->busy)
		return stage_wait(lp, c, ev);
	/* What the message's sender set (aux, w[0..4]): not its time,
	 * source and the like, which no one reads here. */
	c->run.w[0] = ev->w[0];
	c->run.w[1] = ev->w[1];
	c->run.w[3] = ev->w[3];
	prepare(c, (const kb_stage_ref *)(uintptr_t)ev->w[2], ev->aux,
		(const kb_stage_cost *)(uintptr_t)ev->w[4]);
	c->busy = 1;
	return start(lp, e, c, fresh);
}

/* PE_DMA's STAGE message, on the channel its aux names. Out of line as
 * finish is, and with tail calls only: most stages come in without a
 * stack frame. */
static __attribute__((noinline)) int stage_in(kb_lp *lp, const kb_event *ev)
{
	kb_engine *e = kb__lp_state(lp);

	return stage_to(lp, e, &e->ch[ev->aux & 1] /* kb__stage_chan */, ev, FRESH);
}

/* The same for an engine of one channel (PE_TCM, PE_GEMM, PE_MATH: only
 * DMA writes run on channel 1), whose address is then a constant offset
 * (~4 instructions a stage), and which is idle when that channel is. */
static __attribute__((noinline)) int stage_in1(kb_lp *lp, const kb_event *ev)
{
	kb_engine *e = kb__lp_state(lp);

	return stage_to(lp, e, &e->ch[0], ev, FRESH_ONE);
}

/* The engine's state is found by each handler, not here: passed on, it
 * cost a register move an event. chans: 2 (PE_DMA) or 1, a constant. */
static inline __attribute__((always_inline)) int engine_event_as(kb_lp *lp, const kb_event *ev,
								 int chans)
{
	if (ev->type == KB_EV_ENG_DONE)
		return finish(lp, (chan *)(uintptr_t)ev->w[0]);
	if (ev->type == KB_EV_STAGE)
		return chans == 2 ? stage_in(lp, ev) : stage_in1(lp, ev);
	return kb__lp_fail(lp, KB_EINTERNAL, "engine got event type %u", ev->type);
}

static int engine_event(kb_lp *lp, const kb_event *ev)
{
	return engine_event_as(lp, ev, 2);
}

static int engine_event1(kb_lp *lp, const kb_event *ev)
{
	return engine_event_as(lp, ev, 1);
}

static int engine_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_engine *e = kb__lp_state(lp);

	for (int i = 0; i < 2; i++)
		if (e->ch[i].busy) {
			snprintf(buf, len, "holds %u queued stage(s)", e->ch[i].n + 1);
			return 1;
		}
	return 0;
}

static int engine_init(void *st, void *arg)
{
	kb_engine *e = st;
	const kb_pe_lp_arg *a = arg;

	e->m = a->ps->m;
	e->mem = a->ps->m->mem;
	e->lp0 = kb__pe_lp(a->ps->pe, 0);
	e->busy_ps = &a->ps->fig.busy_ps[a->eng];
	e->lane = a->ps->lane[a->eng];
	e->rec = (kb_oplog_record){ 0, 0, a->ps->pe, kb__eng_names[a->eng], NULL, 0, NULL, -1, -1,
				    NULL, 0, sizeof(kb_oplog_record) };
	/* The rings exist from the start: a push checks only for room. On
	 * failure the core calls engine_final, which frees what was made. */
	for (int i = 0; i < 2; i++) {
		e->ch[i].q = aligned_alloc(64, 16 * sizeof(*e->ch[i].q));
		if (!e->ch[i].q)
			return KB_ENOMEM;
		e->ch[i].mask = 15;
		e->done[i].type = KB_EV_ENG_DONE;
		e->done[i].aux = (uint32_t)i;
		e->done[i].w[0] = (uint64_t)(uintptr_t)&e->ch[i];
		e->ch[i].done = &e->done[i];
	}
	return KB_OK;
}

static void engine_final(void *st)
{
	kb_engine *e = st;

	free(e->ch[0].q);
	free(e->ch[1].q);
}

#define ENGINE_TYPE(name, event) \
	{ name, NULL, event, engine_pending, NULL, sizeof(kb_engine), engine_init, engine_final, NULL }
const kb_lp_type kb__engine_types[KB_ENG_COUNT] = {
	[KB_ENG_DMA] = ENGINE_TYPE("dma", engine_event),
	[KB_ENG_TCM] = ENGINE_TYPE("tcm", engine_event1),
	[KB_ENG_GEMM] = ENGINE_TYPE("gemm", engine_event1),
	[KB_ENG_MATH] = ENGINE_TYPE("math", engine_event1),
};
