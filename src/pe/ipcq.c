/*
 * PE_IPCQ: inter-PE queues. A send occupies the sending queue for setup +
 * bytes / link bandwidth, then the tensor (a copy, in data mode) travels to
 * the peer's PE_IPCQ with the PE-to-PE link latency, which is what gives
 * the parallel executor long windows between PEs. A receive is matched
 * with arrivals from (source PE, tag) in FIFO order and writes the tensor
 * into TCM. A receive nobody sends to is a deadlock that names both PEs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "pe/plan.h"

typedef struct arrival {
	uint32_t src_pe, tag;
	uint64_t bytes;
	void *data;              /* NULL in timing mode */
} arrival;

typedef struct kb_ipcq {
	kb_pe_state *ps;
	kb_event *tx;            /* sends waiting for the queue */
	size_t tx_head, tx_n, tx_cap; /* rings: caps 0 or powers of two */
	int tx_busy;
	kb_event tx_cur;
	kb_time tx_t0;
	kb_event *posted;        /* receives waiting for data, in order */
	size_t n_posted, cap_posted;
	arrival *arrived;        /* data waiting for a receive, in order */
	size_t n_arrived, cap_arrived;
	int rx_busy;
	kb_event rx_cur;
	kb_time rx_t0;
	arrival rx_data;
	kb_event *rx_ready;      /* matched receives waiting for the write port */
	size_t rx_head, rx_n, rx_cap;
	arrival *rx_ready_data;
	kb_busy busy;            /* send and receive at once count once */
} kb_ipcq;

static kb_plan *plan_of(const kb_event *ev)
{
	return (kb_plan *)(uintptr_t)ev->w[0];
}

/* Schedules done on lp when the stage of ev has taken its time. */
static int stage_after(kb_lp *lp, kb_ipcq *q, const kb_event *ev, const kb_event *done)
{
	kb_plan *p = plan_of(ev);
	uint32_t n;
	const kb_stage_ref *st = kb__plan_stages(p, KB_PH_LOOP, 0, &n);
	kb_stage_cost c;

	kb__plan_cost(p, KB_PH_LOOP, 0, st, &c);
	return kb__pe_after(lp, q->ps->m, c.cycles, c.op, kb__stage_keys(st->kind), done);
}

static int step_done(kb_lp *lp, kb_ipcq *q, const kb_event *ev, kb_time t0)
{
	kb_plan *p = plan_of(ev);
	kb_event done = *ev;
	uint32_t n;
	const kb_stage_ref *st = kb__plan_stages(p, KB_PH_LOOP, 0, &n);
	kb_stage_cost c;
	kb_oplog_field f[2] = { KB_FIELD_U("peer", p->cmd->peer_pe), KB_FIELD_U("tag", p->cmd->tag) };
	int rc;

	kb__plan_cost(p, KB_PH_LOOP, 0, st, &c);
	kb__busy_stop(&q->busy, kb__lp_now(lp), &q->ps->fig.busy_ps[KB_ENG_IPCQ]);
	rc = kb__pe_log(q->ps, KB_ENG_IPCQ, c.op, p->cmd->id, t0, kb__lp_now(lp), c.bytes, f, 2);
	if (rc)
		return kb__lp_fail(lp, rc, "%s buffering an op_log record", kb_strerror(rc));
	done.type = KB_EV_STEP_DONE;
	return kb__lp_send_pe(lp, kb__pe_lp(q->ps->pe, KB_ENG_SCHED), &done);
}

static int tx_start(kb_lp *lp, kb_ipcq *q)
{
	kb_event ev = { .type = KB_EV_ENG_DONE, .aux = 0 };

	if (q->tx_busy || !q->tx_n)
		return KB_OK;
	q->tx_cur = q->tx[q->tx_head];
	q->tx_head = (q->tx_head + 1) & (q->tx_cap - 1);
	q->tx_n--;
	q->tx_busy = 1;
	q->tx_t0 = kb__lp_now(lp);
	kb__busy_start(&q->busy, q->tx_t0);
	return stage_after(lp, q, &q->tx_cur, &ev);
}

/* The send left the queue: ship the tensor to the peer. */
static int tx_done(kb_lp *lp, kb_ipcq *q)
{
	kb_plan *p = plan_of(&q->tx_cur);
	const kb_cmd *c = p->cmd;
	uint32_t dst = kb__pe_lp(c->peer_pe, KB_ENG_IPCQ);
	kb_event msg = { .type = KB_EV_IPCQ_DATA, .aux = c->tag,
			 .w = { 0, kb__tview_bytes(&c->src), q->ps->pe } };
	int rc;

	q->tx_busy = 0;
	if (q->ps->m->mem) {
		kb_error err;
		void *copy = malloc(kb__tview_bytes(&c->src));

		if (!copy)
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory sending a tensor");
		rc = kb__plan_exec(p, KB_PH_LOOP, 0, &p->last[0], 0, 0, &err);
		if (!rc)
			memcpy(copy, p->run, kb__tview_bytes(&c->src));
		if (rc) {
			free(copy);
			return kb__lp_fail(lp, rc, "command %" PRIu64 " (%s:%d): %s", c->id, c->file, c->line, err.message);
		}
		msg.w[0] = (uint64_t)(uintptr_t)copy;
	}
	rc = kb__lp_send(lp, dst, kb__lp_link_latency(lp, dst), &msg);
	if (!rc)
		rc = step_done(lp, q, &q->tx_cur, q->tx_t0);
	return rc ? rc : tx_start(lp, q);
}

static int rx_start(kb_lp *lp, kb_ipcq *q)
{
	kb_event ev = { .type = KB_EV_ENG_DONE, .aux = 1 };

	if (q->rx_busy || !q->rx_n)
		return KB_OK;
	q->rx_cur = q->rx_ready[q->rx_head];
	q->rx_data = q->rx_ready_data[q->rx_head];
	q->rx_head = (q->rx_head + 1) & (q->rx_cap - 1);
	q->rx_n--;
	q->rx_busy = 1;
	q->rx_t0 = kb__lp_now(lp);
	kb__busy_start(&q->busy, q->rx_t0);
	return stage_after(lp, q, &q->rx_cur, &ev);
}

static int rx_done(kb_lp *lp, kb_ipcq *q)
{
	kb_plan *p = plan_of(&q->rx_cur);
	int rc = KB_OK;

	q->rx_busy = 0;
	if (q->ps->m->mem) {
		kb_error err;

		p->run = q->rx_data.data;  /* the plan executes the copy into TCM */
		q->rx_data.data = NULL;
		rc = kb__plan_exec(p, KB_PH_LOOP, 0, &p->last[0], 0, 0, &err);
		if (rc)
			return kb__lp_fail(lp, rc, "command %" PRIu64 " (%s:%d): %s", p->cmd->id,
					   p->cmd->file, p->cmd->line, err.message);
	}
	rc = step_done(lp, q, &q->rx_cur, q->rx_t0);
	return rc ? rc : rx_start(lp, q);
}

/* Pairs posted receives with arrivals, oldest first, per (source, tag). */
static int match(kb_lp *lp, kb_ipcq *q)
{
	for (size_t i = 0; i < q->n_posted; i++) {
		const kb_cmd *c = plan_of(&q->posted[i])->cmd;

		for (size_t k = 0; k < q->n_arrived; k++) {
			arrival *a = &q->arrived[k];

			if (a->src_pe != c->peer_pe || a->tag != c->tag)
				continue;
			if (a->bytes != kb__tview_bytes(&c->dst))
				return kb__lp_fail(lp, KB_EVALIDATE,
						   "receive of %" PRIu64 " bytes from pe%u (tag %u) got %" PRIu64 " bytes (%s:%d)",
						   kb__tview_bytes(&c->dst), c->peer_pe, c->tag, a->bytes, c->file, c->line);
			if (q->rx_n == q->rx_cap) {
				size_t cap = q->rx_cap ? 2 * q->rx_cap : 8;
				kb_event *r = malloc(cap * sizeof(*r));
				arrival *d = malloc(cap * sizeof(*d));

				if (!r || !d) {
					free(r);
					free(d);
					return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
				}
				for (size_t j = 0; j < q->rx_n; j++) {
					r[j] = q->rx_ready[(q->rx_head + j) & (q->rx_cap - 1)];
					d[j] = q->rx_ready_data[(q->rx_head + j) & (q->rx_cap - 1)];
				}
				free(q->rx_ready);
				free(q->rx_ready_data);
				q->rx_ready = r;
				q->rx_ready_data = d;
				q->rx_head = 0;
				q->rx_cap = cap;
			}
			q->rx_ready[(q->rx_head + q->rx_n) & (q->rx_cap - 1)] = q->posted[i];
			q->rx_ready_data[(q->rx_head + q->rx_n) & (q->rx_cap - 1)] = *a;
			q->rx_n++;
			memmove(a, a + 1, (q->n_arrived - k - 1) * sizeof(*a));
			q->n_arrived--;
			memmove(&q->posted[i], &q->posted[i + 1], (q->n_posted - i - 1) * sizeof(*q->posted));
			q->n_posted--;
			i--;
			break;
		}
	}
	return rx_start(lp, q);
}

static int ipcq_event(kb_lp *lp, const kb_event *ev)
{
	kb_ipcq *q = kb__lp_state(lp);

	switch (ev->type) {
	case KB_EV_STAGE:
		if (plan_of(ev)->cmd->kind == KB_CMD_SEND) {
			if (q->tx_n == q->tx_cap) {
				kb_event *t = malloc((q->tx_cap ? 2 * q->tx_cap : 8) * sizeof(*t));

				if (!t)
					return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
				for (size_t i = 0; i < q->tx_n; i++)
					t[i] = q->tx[(q->tx_head + i) & (q->tx_cap - 1)];
				free(q->tx);
				q->tx = t;
				q->tx_head = 0;
				q->tx_cap = q->tx_cap ? 2 * q->tx_cap : 8;
			}
			q->tx[(q->tx_head + q->tx_n++) & (q->tx_cap - 1)] = *ev;
			return tx_start(lp, q);
		}
		if (q->n_posted == q->cap_posted) {
			kb_event *v = kb__grow(q->posted, &q->cap_posted, sizeof(*v), 8);

			if (!v)
				return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
			q->posted = v;
		}
		q->posted[q->n_posted++] = *ev;
		return match(lp, q);
	case KB_EV_IPCQ_DATA:
		if (q->n_arrived == q->cap_arrived) {
			arrival *v = kb__grow(q->arrived, &q->cap_arrived, sizeof(*v), 8);

			if (!v) {
				free((void *)(uintptr_t)ev->w[0]);
				return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
			}
			q->arrived = v;
		}
		q->arrived[q->n_arrived++] = (arrival){ (uint32_t)ev->w[2], ev->aux, ev->w[1],
							(void *)(uintptr_t)ev->w[0] };
		return match(lp, q);
	case KB_EV_ENG_DONE:
		return ev->aux == 0 ? tx_done(lp, q) : rx_done(lp, q);
	default:
		return kb__lp_fail(lp, KB_EINTERNAL, "PE_IPCQ got event type %u", ev->type);
	}
}

static int ipcq_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_ipcq *q = kb__lp_state(lp);

	if (q->n_posted) {
		const kb_cmd *c = plan_of(&q->posted[0])->cmd;

		snprintf(buf, len, "waits for a message from pe%u (tag %u) for command %" PRIu64 " (%s:%d)",
			 c->peer_pe, c->tag, c->id, c->file, c->line);
		return 1;
	}
	if (q->n_arrived) {
		snprintf(buf, len, "holds a message from pe%u (tag %u) that nothing receives",
			 q->arrived[0].src_pe, q->arrived[0].tag);
		return 1;
	}
	return q->tx_busy || q->tx_n || q->rx_busy || q->rx_n;
}

static void ipcq_discard(const kb_event *ev)
{
	if (ev->type == KB_EV_IPCQ_DATA)
		free((void *)(uintptr_t)ev->w[0]);
}

static int ipcq_init(void *st, void *arg)
{
	kb_ipcq *q = st;

	q->ps = ((const kb_pe_lp_arg *)arg)->ps;
	return KB_OK;
}

static void ipcq_final(void *st)
{
	kb_ipcq *q = st;

	for (size_t i = 0; i < q->n_arrived; i++)
		free(q->arrived[i].data);
	for (size_t i = 0; i < q->rx_n; i++)
		free(q->rx_ready_data[(q->rx_head + i) & (q->rx_cap - 1)].data);
	free(q->rx_data.data);
	free(q->tx);
	free(q->posted);
	free(q->arrived);
	free(q->rx_ready);
	free(q->rx_ready_data);
}

const kb_lp_type kb__ipcq_type = {
	"ipcq", NULL, ipcq_event, ipcq_pending, ipcq_discard, sizeof(kb_ipcq), ipcq_init,
	ipcq_final, NULL,
};
