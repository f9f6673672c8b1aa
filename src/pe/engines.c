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
	kb_event *q;             /* FIFO ring of stage messages; cap a power of two */
	size_t head, n, cap;
	int busy;
	kb_event cur;
	kb_time t0;
	/* Of cur, found once when it starts: its plan, its step's stage list
	 * (n_st stages; st is cur's) and its cost. */
	kb_plan *p;
	const kb_stage_ref *st;
	uint32_t n_st;
	kb_stage_cost cost;
} chan;

typedef struct kb_engine {
	kb_pe_state *ps;
	int eng;
	chan ch[2];
	kb_busy busy;
} kb_engine;

static int chan_push(chan *c, const kb_event *ev)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		kb_event *q = malloc(cap * sizeof(*q));

		if (!q)
			return -1;
		for (size_t i = 0; i < c->n; i++)
			q[i] = c->q[(c->head + i) & (c->cap - 1)];
		free(c->q);
		c->q = q;
		c->head = 0;
		c->cap = cap;
	}
	c->q[(c->head + c->n++) & (c->cap - 1)] = *ev;
	return 0;
}

/* Starts the stage of ev on channel c (idle). */
static int start(kb_lp *lp, kb_engine *e, chan *c, const kb_event *ev, int ch)
{
	kb_event done = { .type = KB_EV_ENG_DONE, .aux = (uint32_t)ch };
	kb_phase ph = (kb_phase)ev->w[3];

	c->cur = *ev;
	c->busy = 1;
	c->t0 = kb__lp_now(lp);
	kb__busy_start(&e->busy, c->t0);
	c->p = (kb_plan *)(uintptr_t)ev->w[0];
	c->st = &kb__plan_stages(c->p, ph, ev->w[1], &c->n_st)[ev->w[2]];
	kb__plan_cost(c->p, ph, ev->w[1], c->st, &c->cost);
	return kb__pe_after(lp, e->ps->m, c->cost.cycles, c->cost.op, kb__stage_keys(c->st->kind),
			    &done);
}

static int start_next(kb_lp *lp, kb_engine *e, int ch)
{
	chan *c = &e->ch[ch];
	const kb_event *ev;

	if (c->busy || c->n == 0)
		return KB_OK;
	ev = &c->q[c->head];
	c->head = (c->head + 1) & (c->cap - 1);
	c->n--;
	return start(lp, e, c, ev, ch);
}

static int log_stage(kb_time now, kb_engine *e, const chan *c, kb_plan *p, const kb_stage_ref *st)
{
	const kb_stage_cost *cost = &c->cost;
	kb_oplog_field f[3];
	int n = 0;

	f[n++] = KB_FIELD_U("step", c->cur.w[1]);
	if (cost->n >= 0)
		f[n++] = KB_FIELD_I("n", cost->n);
	if (st->kind == KB_ST_DMA_READ && st->op >= 0)
		f[n++] = KB_FIELD_S("operand", p->cmd->ops[st->op].operands[st->operand].name);
	return kb__pe_log(e->ps, e->eng, cost->op, p->cmd->id, c->t0, now, cost->bytes, f, n);
}

static int finish(kb_lp *lp, kb_engine *e, int ch)
{
	chan *c = &e->ch[ch];
	kb_machine *m = e->ps->m;
	kb_plan *p = c->p;
	const kb_stage_ref *st = c->st;
	kb_event next = c->cur;
	kb_time now = kb__lp_now(lp);  /* a call into the event loop: once */
	int rc;

	c->busy = 0;
	kb__busy_stop(&e->busy, now, &e->ps->fig.busy_ps[e->eng]);
	if (m->mem) {
		kb_error err;

		/* Only the message is read, and only on failure: not the whole
		 * kb_error (1 KiB) cleared for every stage of a data-mode run. */
		err.code = KB_OK;
		err.message[0] = '\0';
		rc = kb__plan_exec(p, (kb_phase)c->cur.w[3], c->cur.w[1], st, (uint32_t)c->cur.w[4],
				   (uint32_t)c->cur.w[5], &err);
		if (rc)
			return kb__lp_fail(lp, rc, "command %" PRIu64 " (%s:%d): %s", p->cmd->id,
					   p->cmd->file, p->cmd->line, err.message);
	}
	rc = log_stage(now, e, c, p, st);
	if (rc)
		return kb__lp_fail(lp, rc, "cannot buffer an op_log record");
	if (c->cur.w[2] + 1 < c->n_st) {
		const kb_stage_ref *nx = st + 1;

		next.w[2]++;
		next.aux = kb__stage_chan(nx);
		rc = kb__lp_send(lp, kb__pe_lp(e->ps->pe, nx->eng), m->lat_pe, &next);
	} else {
		next.type = KB_EV_STEP_DONE;
		rc = kb__lp_send(lp, kb__pe_lp(e->ps->pe, KB_ENG_SCHED), m->lat_pe, &next);
	}
	if (rc)
		return rc;
	return start_next(lp, e, ch);
}

static int engine_event(kb_lp *lp, const kb_event *ev)
{
	kb_engine *e = kb__lp_state(lp);

	if (ev->type == KB_EV_STAGE) {
		int ch = ev->aux == 1;   /* kb__stage_chan */
		chan *c = &e->ch[ch];

		if (!c->busy && c->n == 0)   /* idle: no need to queue it */
			return start(lp, e, c, ev, ch);
		if (chan_push(c, ev))
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory queueing a stage");
		return start_next(lp, e, ch);
	}
	if (ev->type == KB_EV_ENG_DONE)
		return finish(lp, e, (int)ev->aux);
	return kb__lp_fail(lp, KB_EINTERNAL, "engine got event type %u", ev->type);
}

static int engine_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_engine *e = kb__lp_state(lp);

	for (int i = 0; i < 2; i++)
		if (e->ch[i].busy || e->ch[i].n) {
			snprintf(buf, len, "holds %zu queued stage(s)", e->ch[i].n + (size_t)e->ch[i].busy);
			return 1;
		}
	return 0;
}

static int engine_init(void *st, void *arg)
{
	kb_engine *e = st;
	const kb_pe_lp_arg *a = arg;

	e->ps = a->ps;
	e->eng = a->eng;
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
