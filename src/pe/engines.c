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

typedef struct chan {
	/* FIFO ring of stage messages, cap a power of two (mask = cap - 1).
	 * While the channel is busy its head is the stage running: a stage
	 * is copied once, into the ring, and its message goes on from there
	 * to the next engine (finish). n counts the running stage too. */
	kb_event *q;
	uint32_t head, n, mask;
	uint32_t id;             /* 0 or 1: which of its engine's channels */
	/* Of the running stage, read once when it starts: its plan, its
	 * stage (the message carries both) and its cost. */
	kb_plan *p;
	const kb_stage_ref *st;
	kb_time t0;
	kb_stage_cost cost;
} chan;

typedef struct kb_engine {
	/* Read every stage, found once at init instead of through ps and
	 * its machine: the machine, its memory store (data mode), this PE's
	 * first LP, the latency between its LPs and this engine's busy time. */
	const kb_machine *m;
	kb_memstore *mem;
	uint32_t lp0;
	kb_time lat;
	uint64_t *busy_ps;
	chan ch[2];
	kb_busy busy;
	/* Its op_log lane (NULL: no op_log) and a stage record with what is
	 * the same every stage (pe, eng, kind, lbytes, size) filled at init:
	 * a stage sets only its times, op, command and bytes. */
	kb_oplog_lane *lane;
	kb_oplog_record rec;
} kb_engine;

/* The ENG_DONE self-event of each channel: the same every stage. */
static const kb_event done_ev[2] = {
	{ .type = KB_EV_ENG_DONE, .aux = 0 },
	{ .type = KB_EV_ENG_DONE, .aux = 1 },
};

/* Starts the stage at the head of channel c (busy from now). Out of
 * line: both handlers call it, and inlined it gave engine_event a stack
 * frame that every event paid for. */
static __attribute__((noinline)) int start(kb_lp *lp, kb_engine *e, chan *c)
{
	const kb_event *ev = &c->q[c->head];

	c->t0 = kb__lp_now(lp);
	kb__busy_start(&e->busy, c->t0);
	c->p = (kb_plan *)(uintptr_t)ev->w[0];
	c->st = (const kb_stage_ref *)(uintptr_t)ev->w[2];
	kb__plan_cost(c->p, (kb_phase)ev->w[3], ev->w[1], c->st, &c->cost);
	return kb__pe_after_ps(lp, e->m, c->cost.ps, c->cost.cycles, c->cost.op,
			       kb__stage_keys(c->st->kind), &done_ev[c->id]);
}

static int log_stage(kb_time now, kb_engine *e, const chan *c, uint64_t step)
{
	const kb_stage_cost *cost = &c->cost;
	const kb_stage_ref *st = c->st;
	const kb_cmd *cmd = c->p->cmd;
	kb_oplog_stage f = { step, cost->n, NULL };

	if (!e->lane)
		return KB_OK;
	if (st->kind == KB_ST_DMA_READ && st->op >= 0) {
		f.operand = cmd->ops[st->op].operands[st->operand].name;
		if (!f.operand)
			f.operand = "";
	}
	e->rec.t0_ps = c->t0;
	e->rec.t1_ps = now;
	e->rec.op = cost->op;
	e->rec.cmd = cmd->id;
	e->rec.bytes = cost->bytes;
	return kb__oplog_emit_stage(e->lane, &e->rec, &f);
}

/* The stage at the head of channel ch ended: its message goes on to the
 * engine of the step's next stage, or back to PE_SCHEDULER. */
static int finish(kb_lp *lp, kb_engine *e, chan *c)
{
	kb_event *ev = &c->q[c->head];
	kb_time now = kb__lp_now(lp);
	uint32_t dst;
	int rc;

	kb__busy_stop(&e->busy, now, e->busy_ps);
	if (e->mem) {
		kb_plan *p = c->p;
		kb_error err;

		/* Only the message is read, and only on failure: not the whole
		 * kb_error (1 KiB) cleared for every stage of a data-mode run. */
		err.code = KB_OK;
		err.message[0] = '\0';
		rc = kb__plan_exec(p, (kb_phase)ev->w[3], ev->w[1], c->st, (uint32_t)ev->w[4],
				   (uint32_t)ev->w[5], &err);
		if (rc)
			return kb__lp_fail(lp, rc, "command %" PRIu64 " (%s:%d): %s", p->cmd->id,
					   p->cmd->file, p->cmd->line, err.message);
	}
	rc = log_stage(now, e, c, ev->w[1]);
	if (rc)
		return kb__lp_fail(lp, rc, "cannot buffer an op_log record");
	if (ev->aux >> 1) {
		const kb_stage_ref *nx = c->st + 1;

		ev->w[2] = (uint64_t)(uintptr_t)nx;
		ev->aux = kb__stage_aux(nx, (ev->aux >> 1) - 1);
		dst = nx->eng;
	} else {
		ev->type = KB_EV_STEP_DONE;
		dst = KB_ENG_SCHED;
	}
	/* The message leaves from its slot in the ring, which frees after. */
	rc = kb__lp_send(lp, e->lp0 + dst, e->lat, ev);
	c->head = (c->head + 1) & c->mask;
	c->n--;
	if (rc)
		return rc;
	return c->n ? start(lp, e, c) : KB_OK;
}

static int stage_in(kb_lp *lp, kb_engine *e, const kb_event *ev);

/* stage_in on a full ring: doubles it first (out of line: it seldom grows). */
static __attribute__((noinline)) int stage_in_grow(kb_lp *lp, kb_engine *e, const kb_event *ev)
{
	chan *c = &e->ch[ev->aux & 1];   /* kb__stage_chan */
	uint32_t cap = 2 * (c->mask + 1);
	kb_event *q = malloc(cap * sizeof(*q));

	if (!q)
		return kb__lp_fail(lp, KB_ENOMEM, "out of memory queueing a stage");
	for (uint32_t i = 0; i < c->n; i++)
		q[i] = c->q[(c->head + i) & c->mask];
	free(c->q);
	c->q = q;
	c->head = 0;
	c->mask = cap - 1;
	return stage_in(lp, e, ev);
}

/* A STAGE message: it joins its channel's FIFO, and starts when it is
 * the only one there. Out of line as finish is, and with tail calls
 * only: most stages come in without a stack frame. */
static __attribute__((noinline)) int stage_in(kb_lp *lp, kb_engine *e, const kb_event *ev)
{
	chan *c = &e->ch[ev->aux & 1];   /* kb__stage_chan */

	if (c->n > c->mask)
		return stage_in_grow(lp, e, ev);
	c->q[(c->head + c->n++) & c->mask] = *ev;
	return c->n == 1 ? start(lp, e, c) : KB_OK;
}

static int engine_event(kb_lp *lp, const kb_event *ev)
{
	kb_engine *e = kb__lp_state(lp);

	if (ev->type == KB_EV_ENG_DONE)
		return finish(lp, e, &e->ch[ev->aux]);
	if (ev->type == KB_EV_STAGE)
		return stage_in(lp, e, ev);
	return kb__lp_fail(lp, KB_EINTERNAL, "engine got event type %u", ev->type);
}

static int engine_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_engine *e = kb__lp_state(lp);

	for (int i = 0; i < 2; i++)
		if (e->ch[i].n) {
			snprintf(buf, len, "holds %u queued stage(s)", e->ch[i].n);
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
	e->lat = a->ps->m->lat_pe;
	e->busy_ps = &a->ps->fig.busy_ps[a->eng];
	e->lane = a->ps->lane[a->eng];
	e->rec = (kb_oplog_record){ 0, 0, a->ps->pe, kb__eng_names[a->eng], NULL, 0, NULL, -1, -1,
				    NULL, 0, sizeof(kb_oplog_record) };
	/* The rings exist from the start: a push checks only for room. On
	 * failure the core calls engine_final, which frees what was made. */
	for (int i = 0; i < 2; i++) {
		e->ch[i].q = malloc(16 * sizeof(*e->ch[i].q));
		if (!e->ch[i].q)
			return KB_ENOMEM;
		e->ch[i].mask = 15;
		e->ch[i].id = (uint32_t)i;
	}
	return KB_OK;
}

static void engine_final(void *st)
{
	kb_engine *e = st;

	free(e->ch[0].q);
	free(e->ch[1].q);
}

#define ENGINE_TYPE(name) \
	{ name, NULL, engine_event, engine_pending, NULL, sizeof(kb_engine), engine_init, engine_final, NULL }
const kb_lp_type kb__engine_types[KB_ENG_COUNT] = {
	[KB_ENG_DMA] = ENGINE_TYPE("dma"),
	[KB_ENG_TCM] = ENGINE_TYPE("tcm"),
	[KB_ENG_GEMM] = ENGINE_TYPE("gemm"),
	[KB_ENG_MATH] = ENGINE_TYPE("math"),
};
