/*
 * PE_SCHEDULER: admits commands in strict FIFO order (DDD §8) or, under
 * pe.scheduler.policy = rw_aware, lets a command pass blocked ones it does
 * not conflict with (ADR-0065 A4); turns each into a pipeline plan and feeds
 * its steps to the engines.
 *
 * Hazards by handle identity: a command waits while any in-flight command
 * writes a handle it reads or writes, or reads a handle it writes; and
 * because admission is strict FIFO, every later command waits behind it.
 * Composites sharing rw_handles thus complete in dispatch order and their
 * stages never interleave; disjoint ones overlap.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "pe/hazard.h"
#include "pe/plan.h"

typedef struct queued {
	kb_cmd *cmd;
	kb_time arrived;
	kb_hazard_sig sig;       /* of cmd, signed once when it arrives */
} queued;

typedef struct kb_sched {
	kb_pe_state *ps;
	int rw_aware;            /* pe.scheduler.policy = rw_aware */
	queued *q;
	size_t q_head, q_n, q_cap; /* q_cap: 0 or a power of two */
	/* Plans admitted, not finished, in admission order (linked through
	 * kb_plan fl, circular through this link: one ends without moving
	 * the others): the hazard test reads their signatures and their
	 * commands only when those meet. */
	kb_plan_link fl;
	kb_plan_pool pool;       /* finished plans, for the next ones */
	/* Found once at init: this PE's first LP. And the two messages it
	 * sends, kept here with what is the same every time (their type)
	 * filled at init: a send sets only the payload (no 72-byte message
	 * built on the stack each time). */
	uint32_t lp0;
	kb_event stage_ev, done_ev;
	/* Its op_log lane (NULL: none) and its hazard_wait record with what
	 * is the same every time (pe, eng, op, bytes, size) filled at init:
	 * a wait sets only its times and command. */
	kb_oplog_lane *lane;
	kb_oplog_record wait_rec;
} kb_sched;

/* The plan whose link in the plans in flight is l. */
static inline kb_plan *fl_plan(const kb_plan_link *l)
{
	return (kb_plan *)(void *)((char *)(uintptr_t)l - offsetof(kb_plan, fl));
}

/* The exact test, for signatures that meet (out of line: its nested
 * loops, inline, took enough registers to give every admission a frame
 * of six saved registers, for a test that runs for one admission in
 * five). */
static __attribute__((noinline)) int conflicts(const kb_cmd *c, const kb_cmd *f)
{
	return kb__hazard_conflicts(c, f);
}

/* Inline: every admission asks, mostly of one or two commands in flight. */
static inline __attribute__((always_inline)) const kb_plan *blocker(const kb_sched *s, const kb_cmd *c,
								    kb_hazard_sig sig)
{
	for (const kb_plan_link *l = s->fl.next; l != &s->fl; l = l->next) {
		const kb_plan *f = fl_plan(l);

		if (kb__hazard_may_conflict(sig, f->sig) && conflicts(c, f->cmd))
			return f;
	}
	return NULL;
}

static inline int send_stage(kb_lp *lp, kb_sched *s, kb_plan *p, kb_phase ph, uint64_t step,
			     uint32_t slot, uint32_t acc)
{
	uint32_t n;
	const kb_stage_ref *st = kb__plan_stages(p, ph, step, &n);
	kb_event *ev = &s->stage_ev;

	/* Field by field, not with feed_single's kb__ev_type_aux and
	 * kb__ev_words: here those measured +18.5 k Ir and ~0.9% slower on
	 * opt3 (800 pairs each way, stop 22). */
	ev->aux = kb__stage_aux(st, n - 1);
	ev->w[0] = (uint64_t)(uintptr_t)p;
	ev->w[1] = step;
	ev->w[2] = (uint64_t)(uintptr_t)st;
	ev->w[3] = kb__stage_pack(ph, slot, acc);
	/* The first stage's memoised cost (the engines step on from it):
	 * looked up once a step here, not once a stage by each engine. */
	ev->w[4] = (uint64_t)(uintptr_t)kb__plan_first_cost(p, ph, step, st);
	return kb__lp_send_pe(lp, s->lp0 + st[0].eng, ev);
}

/* The k-step of loop step `step` (kb__plan_step_tile's ki), without its
 * call or division in decode's single k-step loops. */
static uint32_t k_step(const kb_plan *p, uint64_t step)
{
	return p->kt <= 1 ? 0 : (uint32_t)(step % p->kt);
}

/* The lowest free slot, taken (b & (b - 1) clears it: one instruction,
 * not a shift, a not and an and). */
static uint32_t take_slot(uint64_t *free_bits)
{
	uint64_t b = *free_bits;

	*free_bits = b & (b - 1);
	return (uint32_t)__builtin_ctzll(b);
}

/* The most messages feed_single sends as one run: a ring's worth of
 * decode's (opt2's phases have 8 steps). */
#define FEED_RUN 8

/* The single-stage steps of PRE or POST, all at once (they run in order
 * on one FIFO engine): send_stage's message, of which only the step, its
 * stage and that stage's cost change from one step to the next, each the
 * next entry of its list (a step's stage and cost looked up anew was ~20
 * instructions a step; opt2's composites have 8). The messages to one
 * engine go as one run, at most FEED_RUN at a time, written where the
 * event ring keeps them (kb__lp_send_pe_place: the ring moved once, not
 * once a send), or where it has no room for them at once, here first
 * and then sent (kb__lp_send_pe_run). Out of line, as feed_all is. */
static __attribute__((noinline)) int feed_single(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	kb_phase ph = p->phase;
	uint64_t n = ph == KB_PH_PRE ? p->n_pre : p->n_post, i = p->fed;
	uint32_t one;
	const kb_stage_ref *st = kb__plan_stages(p, ph, i, &one);
	/* the costs lie in the stages' order (kb__plan_first_cost); none: 0 */
	uintptr_t cost = (uintptr_t)kb__plan_first_cost(p, ph, i, st);
	uintptr_t cost_step = cost ? sizeof(kb_stage_cost) : 0;
	kb_event run[FEED_RUN];
	int rc = KB_OK;

	while (!rc && i < n) {
		uint32_t eng = st->eng, m = 1;
		uint32_t most = n - i < FEED_RUN ? (uint32_t)(n - i) : FEED_RUN;
		kb_event *const *r;

		while (m < most && st[m].eng == eng)
			m++;
		r = kb__lp_send_pe_place(lp, s->lp0 + eng, m);
		for (uint32_t k = 0; k < m; k++, i++, st++, cost += cost_step) {
			kb_event *ev = r ? r[m - 1 - k] : &run[k];

			/* stored as the send loads them (kb__ev_words) */
			ev->w[0] = (uint64_t)(uintptr_t)p;
			kb__ev_type_aux(ev, KB_EV_STAGE, kb__stage_aux(st, 0));
			kb__ev_words(ev, i, (uint64_t)(uintptr_t)st, kb__stage_pack(ph, 0, 0), cost);
		}
		if (!r)
			rc = kb__lp_send_pe_run(lp, s->lp0 + eng, run, m);
	}
	p->fed = i;
	return rc;
}

/* Feeds the loop what its free slots allow. Out of line: feed below
 * comes here only for more than one step. */
static __attribute__((noinline)) int feed_all(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	int rc = KB_OK;

	while (!rc && p->fed < p->n_steps && p->slot_free) {
		uint32_t slot, acc;

		if (k_step(p, p->fed) == 0) {
			if (!p->acc_free)
				break;
			p->cur_acc = take_slot(&p->acc_free);
		}
		acc = p->cur_acc;
		slot = take_slot(&p->slot_free);
		rc = send_stage(lp, s, p, KB_PH_LOOP, p->fed, slot, acc);
		p->fed++;
	}
	return rc;
}

/* What the phase allows: PRE's or POST's steps (feed_single), else the
 * loop's, feed_all but where at most one loop step can go (the last
 * step, or a single free staging slot: decode opt3's one-step loops, and
 * each step a step's end frees in a longer one): straight, with the send
 * a tail call, so no stack frame. */
static int feed(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	uint64_t step = p->fed, sf = p->slot_free;
	uint32_t slot;

	if (p->phase != KB_PH_LOOP)
		return feed_single(lp, s, p);
	if (step + 1 < p->n_steps && (sf & (sf - 1)))
		return feed_all(lp, s, p);
	if (step >= p->n_steps || !sf)
		return KB_OK;
	if (k_step(p, step) == 0) {
		if (!p->acc_free)
			return KB_OK;
		p->cur_acc = take_slot(&p->acc_free);
	}
	slot = take_slot(&p->slot_free);
	p->fed = step + 1;
	return send_stage(lp, s, p, KB_PH_LOOP, step, slot, p->cur_acc);
}

static __attribute__((noinline)) int finish_freeing(kb_lp *lp, kb_sched *s, kb_plan *p, kb_cmd *cmd);

/* The command of p ends: its plan and command go, and PE_CPU hears of
 * it. The message last, its send the tail: nothing it sends reads the
 * plan or the command, which only the next admission and the kernel's
 * next command take again. */
static inline __attribute__((always_inline)) int finish_cmd(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	kb_cmd *cmd = p->cmd;

	p->fl.prev->next = p->fl.next;
	p->fl.next->prev = p->fl.prev;
	s->done_ev.w[0] = cmd->id;
	if (__builtin_expect(!kb__cmd_keep(cmd), 0))
		return finish_freeing(lp, s, p, cmd);
	if (__builtin_expect(!kb__plan_keep(p, &s->pool), 0))
		return finish_freeing(lp, s, p, NULL);
	return kb__lp_send_pe_short(lp, s->lp0 + KB_ENG_CPU, &s->done_ev);
}

/* finish_cmd's rest where the command (cmd; NULL: it was kept) or the
 * plan is not kept inline: the calls that free them, out of line, so
 * that the common end makes none but its send's tail call and needs no
 * stack frame. */
static __attribute__((noinline)) int finish_freeing(kb_lp *lp, kb_sched *s, kb_plan *p, kb_cmd *cmd)
{
	if (cmd)
		kb__cmd_free_slow(cmd);
	kb__plan_recycle(p, &s->pool);
	return kb__lp_send_pe_short(lp, s->lp0 + KB_ENG_CPU, &s->done_ev);
}

/* The next phase with work in it; the command ends after POST. Without a
 * loop over the phases: most of opt3's commands are a loop of one step
 * and nothing after it, which goes straight to DONE. */
static inline kb_phase phase_after(const kb_plan *p)
{
	kb_phase ph = p->phase;

	if (ph == KB_PH_PRE && p->n_steps)
		return KB_PH_LOOP;
	if (ph != KB_PH_POST && p->n_post)
		return KB_PH_POST;
	return KB_PH_DONE;
}

/* Moves to the next phase with work in it. */
static int next_phase(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	kb_phase ph = phase_after(p);

	p->phase = ph;
	if (ph == KB_PH_DONE)
		return finish_cmd(lp, s, p);
	p->fed = p->retired = 0;
	return feed(lp, s, p);
}

/* The first start of a keyed plan whose start is a loop step (decode's
 * commands): fed, and when one or two steps went, their messages kept
 * for the plan's next starts (kb_plan start_ev, start_w2), the first
 * marked KB_STAGE_ENDS when that step is the whole command. Out of
 * line: once a plan, or at each start of the rare plan whose first feed
 * sends more than two steps (nothing kept). */
static __attribute__((noinline)) int start_keep(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	uint64_t sf = p->slot_free;
	int rc;

	/* The first step alone, its message kept (feed takes the lowest free
	 * slot, as feed_all does first: the others hidden), then the rest,
	 * as feed_all would have gone on. */
	p->slot_free = sf & -sf;
	rc = feed(lp, s, p);
	p->slot_free |= sf & (sf - 1);
	if (rc || p->fed != 1)
		return rc;
	p->start_ev = s->stage_ev;
	rc = feed(lp, s, p);
	if (rc || p->fed > 2)
		return rc;
	p->start_slot_free = p->slot_free;
	p->start_acc_free = p->acc_free;
	p->start_eng = ((const kb_stage_ref *)(uintptr_t)p->start_ev.w[2])->eng;
	p->start_eng2 = 0;
	if (p->fed == 2) {   /* the second is the one stage_ev holds */
		memcpy(p->start_w2, &s->stage_ev.w[1], sizeof(p->start_w2));
		p->start_aux2 = s->stage_ev.aux;
		p->start_eng2 = ((const kb_stage_ref *)(uintptr_t)s->stage_ev.w[2])->eng;
	} else if (p->n_steps == 1 && !p->n_post) {
		p->start_ev.w[3] |= KB_STAGE_ENDS;
	}
	return rc;
}

/* start_kept's second message (out of line: a plan's start of two steps,
 * decode opt3's P.V), made in stage_ev as send_stage makes it: the
 * first's type and w[0], its own aux and w[1..4]. */
static __attribute__((noinline)) int start_kept2(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	kb_event *ev = &s->stage_ev;
	int rc = kb__lp_send_pe(lp, s->lp0 + p->start_eng, &p->start_ev);

	if (rc)
		return rc;
	p->fed = 2;
	p->cur_acc = kb__stage_acc(p->start_w2[2]);
	ev->aux = p->start_aux2;
	ev->w[0] = (uint64_t)(uintptr_t)p;
	memcpy(&ev->w[1], p->start_w2, sizeof(p->start_w2));
	return kb__lp_send_pe(lp, s->lp0 + p->start_eng2, ev);
}

/* feed of the plan's first loop steps as start_keep kept them. Its free
 * slots from there too, not taken from those kb__plan_take has just
 * stored (read back as one 16-byte load, which two 8-byte stores cannot
 * forward to). */
static inline int start_kept(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	p->slot_free = p->start_slot_free;
	p->acc_free = p->start_acc_free;
	p->cur_acc = kb__stage_acc(p->start_ev.w[3]);
	p->fed = 1;
	if (__builtin_expect(p->start_eng2 != 0, 0))
		return start_kept2(lp, s, p);
	return kb__lp_send_pe(lp, s->lp0 + p->start_eng, &p->start_ev);
}

/* p, admitted, joins the plans in flight (at their end) and starts. */
static int start_plan(kb_lp *lp, kb_sched *s, kb_plan *p, kb_hazard_sig sig)
{
	p->sig = sig;
	/* p's two links stored with the old tail's between them, which may
	 * be the same memory as far as GCC knows: side by side, its SLP
	 * vectorizer packed them into one 16-byte store (movq, movq,
	 * punpcklqdq, movups for two movs, a command). */
	p->fl.prev = s->fl.prev;
	s->fl.prev->next = &p->fl;
	p->fl.next = &s->fl;
	s->fl.prev = &p->fl;
	if (p->start_eng)
		return start_kept(lp, s, p);
	/* none in its first phase (not read before: a kept start has one) */
	if ((p->phase == KB_PH_PRE ? p->n_pre : p->n_steps) == 0) {
		p->phase = KB_PH_PRE;
		return next_phase(lp, s, p);
	}
	if (p->phase == KB_PH_LOOP && p->key)
		return start_keep(lp, s, p);
	return feed(lp, s, p);
}

static queued *q_at(kb_sched *s, size_t i)
{
	return &s->q[(s->q_head + i) & (s->q_cap - 1)];
}

/* Takes queue entry i out, keeping the order of the others. */
static void q_remove(kb_sched *s, size_t i)
{
	if (i == 0) {
		s->q_head = (s->q_head + 1) & (s->q_cap - 1);
	} else {
		for (size_t k = i; k + 1 < s->q_n; k++)
			*q_at(s, k) = *q_at(s, k + 1);
	}
	s->q_n--;
}

/* rw_aware: a queued command may pass the ones before it only when it
 * conflicts with none of them (they keep their order among themselves). */
static int conflicts_queued(kb_sched *s, size_t i)
{
	const queued *qi = q_at(s, i);

	for (size_t j = 0; j < i; j++) {
		const queued *qj = q_at(s, j);

		if (kb__hazard_may_conflict(qi->sig, qj->sig) && conflicts(qi->cmd, qj->cmd))
			return 1;
	}
	return 0;
}

/* Plans cmd; on failure the LP fails and cmd stays the caller's. Out of
 * line: its kb_error (1 KiB) would otherwise be in the frame of every
 * admission. */
static __attribute__((noinline)) int plan_for(kb_lp *lp, kb_sched *s, kb_cmd *cmd, kb_plan **p)
{
	kb_error err;
	int rc;

	rc = kb__plan_create_from(p, &s->pool, cmd, s->ps->m, &err);
	if (rc)
		return kb__lp_fail(lp, rc, "%s", err.message);
	return KB_OK;
}

/* plan_for, with a plan its key's memo entry kept taken inline: most
 * commands of a decode run (the call and its frame were ~25 instructions
 * a command). */
static inline int admit_plan(kb_lp *lp, kb_sched *s, kb_cmd *cmd, kb_plan **p)
{
	if ((*p = kb__plan_take(&s->pool, cmd, s->ps->m)))
		return KB_OK;
	return plan_for(lp, s, cmd, p);
}

/*
 * Admits what the policy allows. strict_fifo (the seeds' behaviour, DDD
 * §8): the queue's head, while it conflicts with no in-flight command;
 * everything behind a blocked head waits. rw_aware (ADR-0065 A4): also a
 * later command whose read and write sets meet no in-flight command and no
 * earlier command still queued. Both scan the queue in arrival order inside
 * one event of this LP, so the admission order is deterministic.
 */
static int try_admit(kb_lp *lp, kb_sched *s)
{
	size_t i = 0;

	while (i < s->q_n) {
		const queued *q = q_at(s, i);
		kb_cmd *cmd = q->cmd;
		kb_hazard_sig sig = q->sig;
		kb_plan *p;
		int rc;

		if (blocker(s, cmd, sig) || (i && conflicts_queued(s, i))) {
			if (!s->rw_aware)
				return KB_OK;
			i++;
			continue;
		}
		if (kb__lp_now(lp) > q->arrived && s->lane) {
			s->wait_rec.t0_ps = q->arrived;
			s->wait_rec.t1_ps = kb__lp_now(lp);
			s->wait_rec.cmd = cmd->id;
			rc = kb__oplog_emit(s->lane, &s->wait_rec, NULL, 0);
			if (rc)
				return kb__lp_fail(lp, rc, "%s buffering an op_log record", kb_strerror(rc));
		}
		rc = admit_plan(lp, s, cmd, &p);
		if (rc)
			return rc;
		q_remove(s, i);
		rc = start_plan(lp, s, p, sig);
		if (rc)
			return rc;
	}
	return KB_OK;
}

/* cmd's hazard signature: the tl context's when it kept one. */
static inline kb_hazard_sig cmd_sig(kb_cmd *cmd)
{
	if (cmd->has_sig)
		return (kb_hazard_sig){ kb__cmd_sig(cmd)[0], kb__cmd_sig(cmd)[1] };
	return kb__hazard_sign(cmd);
}

/* enqueue but for a command its fast path did not admit (signed sig). */
static __attribute__((noinline)) int enqueue_slow(kb_lp *lp, kb_sched *s, kb_cmd *cmd,
						  kb_hazard_sig sig)
{
	/* An empty queue: the command is the head try_admit would look at,
	 * admitted now (no hazard wait) unless an in-flight command blocks
	 * it; taken straight, not through a queue entry read back at once. */
	if (!s->q_n && !blocker(s, cmd, sig)) {
		kb_plan *p;
		int rc = admit_plan(lp, s, cmd, &p);

		if (rc) {
			kb__cmd_free(cmd);
			return rc;
		}
		return start_plan(lp, s, p, sig);
	}
	if (s->q_n == s->q_cap) {
		size_t cap = s->q_cap ? 2 * s->q_cap : 16;
		queued *q = malloc(cap * sizeof(*q));

		if (!q) {
			kb__cmd_free(cmd);
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory queueing a command");
		}
		for (size_t i = 0; i < s->q_n; i++)
			q[i] = *q_at(s, i);
		free(s->q);
		s->q = q;
		s->q_head = 0;
		s->q_cap = cap;
	}
	*q_at(s, s->q_n) = (queued){ cmd, kb__lp_now(lp), sig };
	s->q_n++;
	/* Alone in the queue, it is blocked (above). Behind others, under
	 * strict FIFO, it waits behind the head, which try_admit left blocked
	 * with nothing in flight changed since. */
	if (s->q_n == 1 || !s->rw_aware)
		return KB_OK;
	return try_admit(lp, s);
}

/* Whether a plan in flight may conflict with a command signed sig, by
 * their signatures alone (blocker without its exact test). */
static inline int may_block(const kb_sched *s, kb_hazard_sig sig)
{
	for (const kb_plan_link *l = s->fl.next; l != &s->fl; l = l->next)
		if (kb__hazard_may_conflict(sig, fl_plan(l)->sig))
			return 1;
	return 0;
}

/* A command arrives. Most of a decode run's find the queue empty, no
 * signature in flight that meets theirs and a plan their key's memo
 * entry kept: admitted here with no call but the tail call, so without
 * a stack frame (six saved registers, ~15 instructions a command); the
 * rest in enqueue_slow, which decides as if this had not looked. */
static __attribute__((noinline)) int enqueue(kb_lp *lp, kb_cmd *cmd)
{
	kb_sched *s = kb__lp_state(lp);
	kb_hazard_sig sig = cmd_sig(cmd);
	kb_plan *p;

	if (!s->q_n && !may_block(s, sig) && (p = kb__plan_take(&s->pool, cmd, s->ps->m)))
		return start_plan(lp, s, p, sig);
	return enqueue_slow(lp, s, cmd, sig);
}

/* cmd_end where commands wait: the end, then what it unblocked. */
static __attribute__((noinline)) int cmd_end_admit(kb_lp *lp, kb_sched *s, kb_plan *p)
{
	int rc = finish_cmd(lp, s, p);

	if (rc)
		return rc;
	return try_admit(lp, s);
}

/* step_done's command end: the command leaves, and what it blocked may
 * go (out of line: the steps that do not end their command, most of
 * opt2's, need no stack frame). The ends where commands wait apart, so
 * that the common one, whose send is its tail call, has none either. */
static __attribute__((noinline)) int cmd_end(kb_lp *lp, kb_plan *p)
{
	kb_sched *s = kb__lp_state(lp);

	/* p's phase is left as it is: nothing reads it again before a take
	 * (kb__plan_take, kb__plan_make) sets it anew. */
	if (s->q_n)
		return cmd_end_admit(lp, s, p);
	return finish_cmd(lp, s, p);
}

static __attribute__((noinline)) int step_done(kb_lp *lp, const kb_event *ev)
{
	kb_sched *s = kb__lp_state(lp);
	kb_plan *p = (kb_plan *)(uintptr_t)ev->w[0];
	kb_phase ph = (kb_phase)kb__stage_phase(ev->w[3]);
	uint64_t n;

	n = ph == KB_PH_PRE ? p->n_pre : ph == KB_PH_POST ? p->n_post : p->n_steps;
	if (++p->retired < n) {
		if (ph != KB_PH_LOOP)
			return KB_OK;
		p->slot_free |= UINT64_C(1) << kb__stage_slot(ev->w[3]);
		if (p->gemm < 0 || k_step(p, ev->w[1]) == p->kt - 1)
			p->acc_free |= UINT64_C(1) << kb__stage_acc(ev->w[3]);
		return feed(lp, s, p);
	}
	/* The phase's last step: its slots are not freed, as nothing feeds
	 * the loop again (POST's steps take none; a plan made for the next
	 * command starts with all of them free). */
	/* Admission depends only on the queue and the commands in flight:
	 * after the try_admit that ended the last change to them, the head
	 * (every entry, under rw_aware) is blocked or the queue is empty. A
	 * phase that ends without its command leaves both as they were. */
	if (phase_after(p) != KB_PH_DONE)
		return next_phase(lp, s, p);
	return cmd_end(lp, p);
}

/* The scheduler's state is found by each handler, not here: passed on,
 * it cost a register move an event. */
static int sched_event(kb_lp *lp, const kb_event *ev)
{
	switch (ev->type) {
	case KB_EV_CMD:
		return enqueue(lp, (kb_cmd *)(uintptr_t)ev->w[0]);
	case KB_EV_STEP_DONE:
		/* a kept start's whole command (KB_STAGE_ENDS): its end */
		if (ev->w[3] & KB_STAGE_ENDS)
			return cmd_end(lp, (kb_plan *)(uintptr_t)ev->w[0]);
		return step_done(lp, ev);
	default:
		return kb__lp_fail(lp, KB_EINTERNAL, "PE_SCHEDULER got event type %u", ev->type);
	}
}

static int sched_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_sched *s = kb__lp_state(lp);

	if (s->q_n) {
		const queued *h = &s->q[s->q_head];
		const kb_plan *b = blocker(s, h->cmd, h->sig);

		snprintf(buf, len, "holds command %" PRIu64 " behind in-flight command %" PRIu64,
			 s->q[s->q_head].cmd->id, b ? b->cmd->id : UINT64_MAX);
		return 1;
	}
	if (s->fl.next != &s->fl) {
		const kb_cmd *c = fl_plan(s->fl.next)->cmd;

		snprintf(buf, len, "has command %" PRIu64 " (%s) in flight", c->id,
			 kb__cmd_kind_name((int)c->kind));
		return 1;
	}
	return 0;
}

static void sched_discard(const kb_event *ev)
{
	if (ev->type == KB_EV_CMD)
		kb__cmd_free((kb_cmd *)(uintptr_t)ev->w[0]);
}

static int sched_init(void *st, void *arg)
{
	kb_sched *s = st;

	s->ps = ((const kb_pe_lp_arg *)arg)->ps;
	s->rw_aware = s->ps->m->tp->scheduler.policy == KB_SCHED_RW_AWARE;
	s->lp0 = kb__pe_lp(s->ps->pe, 0);
	s->fl.prev = s->fl.next = &s->fl;
	s->stage_ev.type = KB_EV_STAGE;
	s->done_ev.type = KB_EV_CMD_DONE;
	s->lane = s->ps->lane[KB_ENG_SCHED];
	s->wait_rec = (kb_oplog_record){ 0, 0, s->ps->pe, kb__eng_names[KB_ENG_SCHED], "hazard_wait", 0,
					 NULL, -1, -1, NULL, 0, sizeof(kb_oplog_record) };
	return KB_OK;
}

static void sched_final(void *st)
{
	kb_sched *s = st;

	while (s->fl.next != &s->fl) {
		kb_plan *p = fl_plan(s->fl.next);

		s->fl.next = p->fl.next;
		kb__cmd_free(p->cmd);
		kb__plan_free(p);
	}
	for (size_t i = 0; i < s->q_n; i++)
		kb__cmd_free(q_at(s, i)->cmd);
	free(s->q);
	kb__plan_free_pool(&s->pool);
}

const kb_lp_type kb__sched_type = {
	"sched", NULL, sched_event, sched_pending, sched_discard, sizeof(kb_sched), sched_init,
	sched_final, NULL,
};
