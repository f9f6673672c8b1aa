/*
 * PE_CPU: takes the kernel's commands in program order, waits (in
 * simulated time) for the producers of their read-only operands and for
 * memory-reuse fences, pays the dispatch cost FIXED + R * logical_bytes,
 * logs the dispatch and issues the command to PE_SCHEDULER.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "pe/pe.h"

typedef enum cpu_state { CPU_IDLE = 0, CPU_WAITING, CPU_DISPATCHING, CPU_FINISHED } cpu_state;

typedef struct kb_cpu {
	kb_pe_state *ps;
	cpu_state state;
	kb_cmd *cur;
	kb_time dispatch_t0;
	uint64_t outstanding;
	/* completed command ids: all ids < prefix, and a bitmap from base */
	uint64_t prefix, base;
	uint64_t *bits;
	size_t n_words;
	/* SEND commands dispatched and not yet done (the PE's horizon) */
	uint64_t *sends;
	size_t n_sends, cap_sends;
	/* What the horizon has read of the queued commands, so each is read
	 * once: the first ahead_n are neither SEND nor END and take ahead_ps
	 * to dispatch; the next is a SEND (stop 1, dispatch stop_ps) or the
	 * END (stop 2), or not read yet (stop 0). */
	size_t ahead_n;
	kb_time ahead_ps, stop_ps;
	int stop;
	/* Its op_log lane (NULL: none) and a dispatch record with what is
	 * the same every dispatch (pe, eng, op, bytes, size) filled at init. */
	kb_oplog_lane *lane;
	kb_oplog_record rec;
	/* Read every command, found once at init: the command kinds' names
	 * and PE_SCHEDULER's LP. */
	const char *kind_name[KB_CMD_KIND_COUNT];
	uint32_t sched_lp;
	kb_pe_figures *fig;      /* the PE's */
	/* The CMD message to PE_SCHEDULER, its type filled at init: a
	 * dispatch sets only the command, when it starts (advance; none
	 * built on the stack). */
	kb_event cmd_ev;
} kb_cpu;

#define PEEK_MAX 64

/* The self-event that ends a dispatch: the same every command. */
static const kb_event dispatched_ev = { .type = KB_EV_CPU_DISPATCHED };

/* Slide the window: memory follows the ids in flight, not the run. */
static __attribute__((noinline)) void slide(kb_cpu *c)
{
	size_t drop = (size_t)((c->prefix - c->base) / 64);

	/* In order, the prefix may pass what the bitmap holds: every id it
	 * holds is then done, below the prefix. */
	if (drop >= c->n_words) {
		if (c->n_words)
			memset(c->bits, 0, c->n_words * sizeof(*c->bits));
	} else {
		memmove(c->bits, c->bits + drop, (c->n_words - drop) * sizeof(*c->bits));
		memset(c->bits + c->n_words - drop, 0, drop * sizeof(*c->bits));
	}
	c->base += drop * 64;
}

/* mark_done's growth of the bitmap to hold word w (out of line: it grows
 * a few times a run). -1: out of memory. */
static __attribute__((noinline)) int grow_bits(kb_cpu *c, uint64_t w)
{
	uint64_t *b = kb__grow_to(c->bits, &c->n_words, sizeof(*b), 4, w);

	if (!b)
		return -1;
	c->bits = b;
	return 0;
}

/* mark_done's walk of the prefix over runs of done ids that go on past
 * the word it started in (out of line: one completion in 64 in order). */
static __attribute__((noinline)) void walk_prefix(kb_cpu *c)
{
	for (;;) {
		uint64_t k = c->prefix - c->base, w;
		unsigned run;

		if (k / 64 >= c->n_words)
			break;
		/* ones from bit 0 where ids from prefix on are not done; the
		 * shift brings in zeros, so only k % 64 == 0 can leave none */
		w = ~(c->bits[k / 64] >> (k % 64));
		run = w ? (unsigned)__builtin_ctzll(w) : 64u;
		c->prefix += run;
		if (k % 64 + run < 64)
			break;
	}
}

/*
 * id is done. Its bit is set whether or not it is the prefix (no branch
 * on the order: a third of opt3's commands complete in order, two thirds
 * out of it), and the prefix moves over the run of done ids at it, a
 * word at a time (a count of trailing ones): none when id is past it,
 * mostly one when it is id. Only ids from the prefix on are ever read in
 * the bitmap.
 */
static inline int mark_done(kb_cpu *c, uint64_t id)
{
	uint64_t i = id - c->base, k, w;
	unsigned run;

	if (__builtin_expect(i / 64 >= c->n_words, 0) && grow_bits(c, i / 64))
		return -1;
	c->bits[i / 64] |= UINT64_C(1) << (i % 64);
	k = c->prefix - c->base;
	w = ~(c->bits[k / 64] >> (k % 64));
	run = w ? (unsigned)__builtin_ctzll(w) : 64u;
	c->prefix += run;
	if (__builtin_expect(k % 64 + run >= 64, 0))
		walk_prefix(c);
	if (__builtin_expect(c->prefix - c->base >= 64 * 64, 0))
		slide(c);
	return 0;
}

/* mark_done's common case, with no call (so that cmd_done needs no stack
 * frame): the id's word is there, and the prefix moves inside its word
 * and the bitmap's window. 1: it does not, and mark_done has it all to
 * do (the bit set here it sets again). */
static inline int mark_quick(kb_cpu *c, uint64_t id)
{
	uint64_t i = id - c->base, k, w;
	unsigned run;

	if (__builtin_expect(i / 64 >= c->n_words, 0))
		return 1;
	c->bits[i / 64] |= UINT64_C(1) << (i % 64);
	k = c->prefix - c->base;
	w = ~(c->bits[k / 64] >> (k % 64));
	run = w ? (unsigned)__builtin_ctzll(w) : 64u;
	/* Inside its word, the prefix stays inside the window too: k is
	 * below 64 * 64 (mark_done slides the window there), so its word is
	 * one of the first 64, which end there. */
	if (__builtin_expect(k % 64 + run >= 64, 0))
		return 1;
	c->prefix += run;
	return 0;
}

static int is_done(const kb_cpu *c, uint64_t id)
{
	uint64_t i;

	if (id < c->prefix)
		return 1;
	i = id - c->base;
	return i / 64 < c->n_words && (c->bits[i / 64] >> (i % 64)) & 1;
}

static inline __attribute__((always_inline)) int deps_ready(const kb_cpu *c, const kb_cmd *cmd)
{
	if (cmd->fence > c->prefix)
		return 0;
	for (uint32_t i = 0; i < cmd->n_deps; i++)
		if (!is_done(c, cmd->deps[i]))
			return 0;
	return 1;
}

/* A command's dispatch time: the tl context's (kb_cmd has_disp_ps), or
 * worked out here for a command from elsewhere. */
static kb_time dispatch_ps(const kb_cpu *c, const kb_cmd *cmd)
{
	if (cmd->has_disp_ps)
		return cmd->disp_ps;
	return kb__pe_ps(c->ps->m, kb__dispatch_cycles(&c->ps->m->cost, cmd));
}

/* The dispatch time of a queued command, as the horizon counts it. */
static kb_time ahead_cost(const kb_cpu *c, const kb_cmd *cmd)
{
	return cmd->kind == KB_CMD_WAIT ? 0 : dispatch_ps(c, cmd);
}

/* kb__pe_after's failure, with the cycles worked out only then. */
static __attribute__((noinline)) int dispatch_fail(kb_lp *lp, const kb_machine *m, const kb_cmd *cmd)
{
	return kb__pe_after_fail(lp, m, kb__dispatch_cycles(&m->cost, cmd), "a dispatch",
				 cmd->kind == KB_CMD_CPU
					 ? "the cpu_overhead command's cycles"
					 : "pe_cost_model.fixed_cycles, pe_cost_model.r_cycles_per_byte");
}

/* PE_CPU took cmd from the head of the queue the horizon has read. */
static void ahead_taken(kb_cpu *c, const kb_cmd *cmd)
{
	if (c->ahead_n) {
		c->ahead_n--;
		c->ahead_ps -= ahead_cost(c, cmd);
	} else {
		c->stop = 0;
	}
}

/* Whether the ring holds a command PE_CPU takes itself (kb_cmd_source
 * ring: more than its low mark). */
static inline int ring_ready(const kb_cpu *c)
{
	const kb_cmd_ring *r = c->ps->source.ring;

	return r && r->count > r->low;
}

/* The next command, taken: from the ring where ring_ready, else from the
 * source (its producer may have to run). */
static inline kb_cmd *take(kb_cpu *c)
{
	kb_cmd *cmd = ring_ready(c) ? kb__cmd_ring_take(c->ps->source.ring)
				    : c->ps->source.next(c->ps->source.ctx);

	ahead_taken(c, cmd);
	c->cur = cmd;
	return cmd;
}

/* cmd, its operands ready, starts its dispatch. */
static inline int dispatch(kb_lp *lp, kb_cpu *c, kb_cmd *cmd)
{
	kb_time d = dispatch_ps(c, cmd);

	c->state = CPU_DISPATCHING;
	c->dispatch_t0 = kb__lp_now(lp);
	/* The CMD message's command, set now, long before dispatched
	 * sends it: stored there right before the send, its 8 bytes
	 * could not forward to the send's 16-byte copy of them (a
	 * stall on ~40% of dispatched's samples, issue 13). */
	c->cmd_ev.w[0] = (uint64_t)(uintptr_t)cmd;
	/* kb__pe_after_ps, whose cycles only its failure needs */
	if (kb__lp_past_end(lp, d))
		return dispatch_fail(lp, c->ps->m, cmd);
	return kb__lp_self_short(lp, d, &dispatched_ev);
}

/* advance, every case: a loop over the markers, and the source's next
 * where the ring has no command to take. */
static __attribute__((noinline)) int advance_all(kb_lp *lp, kb_cpu *c)
{
	for (;;) {
		kb_cmd *cmd = c->cur ? c->cur : take(c);

		/* WAIT, END and ERROR (the markers) in one test */
		if (__builtin_expect(cmd->kind >= KB_CMD_WAIT, 0)) {
			if (cmd->kind == KB_CMD_ERROR)
				return kb__lp_fail_with(lp, cmd->error);
			if (cmd->kind == KB_CMD_END) {
				c->state = c->outstanding ? CPU_WAITING : CPU_FINISHED;
				if (c->state == CPU_FINISHED) {
					kb__cmd_free(c->cur);
					c->cur = NULL;
				}
				return KB_OK;
			}
		}
		if (!deps_ready(c, cmd)) {
			c->state = CPU_WAITING;
			return KB_OK;
		}
		if (__builtin_expect(cmd->kind == KB_CMD_WAIT, 0)) {
			kb__cmd_free(cmd);
			c->cur = NULL;
			continue;
		}
		return dispatch(lp, c, cmd);
	}
}

/* Looks at commands until one has to wait, is being dispatched, or the
 * kernel ended. The common case, a command that is no marker, taken from
 * the ring or already there, here: no call but the tail calls, so no
 * stack frame (advance_all's loop and its calls gave every command one). */
static __attribute__((noinline)) int advance(kb_lp *lp, kb_cpu *c)
{
	kb_cmd *cmd = c->cur;

	if (!cmd) {
		if (!ring_ready(c))
			return advance_all(lp, c);
		cmd = take(c);
	}
	if (__builtin_expect(cmd->kind >= KB_CMD_WAIT, 0))
		return advance_all(lp, c);
	if (!deps_ready(c, cmd)) {
		c->state = CPU_WAITING;
		return KB_OK;
	}
	return dispatch(lp, c, cmd);
}

/* cmd's dispatch record, ended at now. */
static inline __attribute__((always_inline)) kb_oplog_dispatch dispatch_rec(const kb_cpu *c, const kb_cmd *cmd,
									  kb_time now)
{
	return (kb_oplog_dispatch){ c->dispatch_t0, now, cmd->id,
				    cmd->kind < KB_CMD_KIND_COUNT ? c->kind_name[cmd->kind] : "?",
				    (int64_t)cmd->lbytes };
}

/* log_dispatch's rare record (out of line): worked out again here, so
 * that nothing of it is kept live across the common one (issue 13). */
static __attribute__((noinline, cold)) int log_dispatch_rare(kb_cpu *c, const kb_cmd *cmd, kb_time now)
{
	kb_oplog_dispatch d = dispatch_rec(c, cmd, now);

	return kb__oplog_emit_dispatch_rare(c->lane, &c->rec, &d);
}

/* Its members by value: c->rec (what is the same every command) is not
 * stored to and read back (issue 13). */
static inline __attribute__((always_inline)) int log_dispatch(kb_cpu *c, const kb_cmd *cmd, kb_time now)
{
	int rc = kb__oplog_emit_dispatch_fast(c->lane, &c->rec, dispatch_rec(c, cmd, now));

	if (__builtin_expect(rc == KB_OPLOG_RARE, 0))
		return log_dispatch_rare(c, cmd, now);
	return rc;
}

static __attribute__((noinline)) int dispatched(kb_lp *lp)
{
	kb_cpu *c = kb__lp_state(lp);
	kb_cmd *cmd = c->cur;
	kb_time now = kb__lp_now(lp);
	int rc;

	/* Counted before the record, in a block of its own: next to the add
	 * to busy_ps below, GCC's SLP vectorizer made the two adds to
	 * adjacent words one SSE add, seven instructions for two (issue 13). */
	c->fig->commands++;
	if (c->lane) {
		rc = log_dispatch(c, cmd, now);
		if (rc)
			return kb__lp_fail(lp, rc, "%s buffering an op_log record", kb_strerror(rc));
	}
	c->fig->busy_ps[KB_ENG_CPU] += now - c->dispatch_t0;   /* the dispatch time */
	c->cur = NULL;
	c->state = CPU_IDLE;
	if (cmd->kind == KB_CMD_CPU) {
		/* Pure CPU time: done once paid. */
		rc = mark_done(c, cmd->id);
		kb__cmd_free(cmd);
		if (rc)
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
	} else {
		if (cmd->kind == KB_CMD_SEND) {
			if (c->n_sends == c->cap_sends) {
				uint64_t *s = kb__grow(c->sends, &c->cap_sends, sizeof(*s), 8);

				if (!s)
					return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
				c->sends = s;
			}
			c->sends[c->n_sends++] = cmd->id;
		}
		c->outstanding++;
		rc = kb__lp_send_pe_short(lp, c->sched_lp, &c->cmd_ev);
		if (rc)
			return rc;
	}
	return advance(lp, c);
}

/* cmd_done once id is marked done. */
static inline int cmd_done_rest(kb_lp *lp, kb_cpu *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_sends; i++)
		if (c->sends[i] == id) {
			c->sends[i] = c->sends[--c->n_sends];
			break;
		}
	c->outstanding--;
	if (c->state == CPU_WAITING)
		return advance(lp, c);
	return KB_OK;
}

/* cmd_done where mark_quick does not do: the calls it makes are here. */
static __attribute__((noinline)) int cmd_done_slow(kb_lp *lp, kb_cpu *c, uint64_t id)
{
	if (mark_done(c, id))
		return kb__lp_fail(lp, KB_ENOMEM, "out of memory");
	return cmd_done_rest(lp, c, id);
}

/* A CMD_DONE: the command is done (out of line as dispatched is, so that
 * cpu_event needs no stack frame; with tail calls only, it needs none
 * either). */
static __attribute__((noinline)) int cmd_done(kb_lp *lp, uint64_t id)
{
	kb_cpu *c = kb__lp_state(lp);

	if (__builtin_expect(mark_quick(c, id), 0))
		return cmd_done_slow(lp, c, id);
	return cmd_done_rest(lp, c, id);
}

/* PE_CPU's state is found by each handler, not here: passed on, it cost
 * a register move an event. */
static int cpu_event(kb_lp *lp, const kb_event *ev)
{
	switch (ev->type) {
	case KB_EV_CPU_NEXT:
		return advance(lp, kb__lp_state(lp));
	case KB_EV_CPU_DISPATCHED:
		return dispatched(lp);
	case KB_EV_CMD_DONE:
		return cmd_done(lp, ev->w[0]);
	default:
		return kb__lp_fail(lp, KB_EINTERNAL, "PE_CPU got event type %u", ev->type);
	}
}

static int cpu_start(kb_lp *lp)
{
	kb_cpu *c = kb__lp_state(lp);
	kb_event ev = { .type = KB_EV_CPU_NEXT };

	if (!c->ps->source.ctx) {
		c->state = CPU_FINISHED;
		return KB_OK;
	}
	return kb__lp_self(lp, 0, &ev);
}

static int cpu_pending(kb_lp *lp, char *buf, size_t len)
{
	kb_cpu *c = kb__lp_state(lp);

	if (c->state == CPU_FINISHED)
		return 0;
	if (c->cur && c->cur->kind == KB_CMD_END)
		snprintf(buf, len, "waits for %" PRIu64 " command(s) to finish after the kernel ended",
			 c->outstanding);
	else if (c->cur)
		snprintf(buf, len, "waits to dispatch command %" PRIu64 " (%s, %s:%d) for its operands",
			 c->cur->id, kb__cmd_kind_name((int)c->cur->kind), c->cur->file, c->cur->line);
	else
		snprintf(buf, len, "has not finished its kernel");
	return 1;
}

/*
 * The PE's horizon: the only way out of a PE is an IPCQ send, and a send
 * leaves only after PE_CPU has dispatched its command, one command after
 * another, each for its full dispatch cost. So while no send is in flight,
 * nothing leaves before the queued commands ahead of the next send have
 * been dispatched (or ever, once the kernel's end is queued first). The
 * next dispatch starts no earlier than the current one ends, or than the
 * PE's next event. Reading stops at `enough`; what was read is kept.
 */
static kb_time cpu_horizon(kb_lp *lp, kb_time t_min, kb_time enough)
{
	kb_cpu *c = kb__lp_state(lp);
	const kb_cmd *q[PEEK_MAX];
	kb_time h = t_min;
	size_t n;

	if (c->state == CPU_FINISHED)
		return KB_TIME_INF;
	if (c->n_sends)
		return t_min;
	if (c->cur) {
		if (c->cur->kind == KB_CMD_END)
			return KB_TIME_INF;
		if (c->cur->kind == KB_CMD_ERROR)
			return h;
		if (c->state == CPU_DISPATCHING)
			h = c->dispatch_t0;
		h += ahead_cost(c, c->cur);
		if (c->cur->kind == KB_CMD_SEND)
			return h;
	}
	h += c->ahead_ps;
	while (!c->stop && h < enough && c->ps->source.peek &&
	       (n = c->ps->source.peek(c->ps->source.ctx, c->ahead_n, q, PEEK_MAX)) > 0) {
		for (size_t i = 0; i < n && !c->stop && h < enough; i++) {
			if (q[i]->kind == KB_CMD_ERROR)
				return h;
			if (q[i]->kind == KB_CMD_END) {
				c->stop = 2;
			} else if (q[i]->kind == KB_CMD_SEND) {
				c->stop = 1;
				c->stop_ps = ahead_cost(c, q[i]);
			} else {
				kb_time d = ahead_cost(c, q[i]);

				c->ahead_n++;
				c->ahead_ps += d;
				h += d;
			}
		}
	}
	if (c->stop == 2)
		return KB_TIME_INF;
	return c->stop == 1 ? h + c->stop_ps : h;
}

static int cpu_init(void *st, void *arg)
{
	kb_cpu *c = st;

	c->ps = ((const kb_pe_lp_arg *)arg)->ps;
	c->lane = c->ps->lane[KB_ENG_CPU];
	for (int k = 0; k < KB_CMD_KIND_COUNT; k++)
		c->kind_name[k] = kb__cmd_kind_name(k);
	c->sched_lp = kb__pe_lp(c->ps->pe, KB_ENG_SCHED);
	c->fig = &c->ps->fig;
	c->cmd_ev.type = KB_EV_CMD;
	c->rec = (kb_oplog_record){ 0, 0, c->ps->pe, kb__eng_names[KB_ENG_CPU], "dispatch", 0, NULL, 0, -1,
				    NULL, 0, sizeof(kb_oplog_record) };
	return KB_OK;
}

static void cpu_final(void *st)
{
	kb_cpu *c = st;

	kb__cmd_free(c->cur);
	free(c->bits);
	free(c->sends);
}

const kb_lp_type kb__cpu_type = {
	"cpu", cpu_start, cpu_event, cpu_pending, NULL, sizeof(kb_cpu), cpu_init, cpu_final,
	cpu_horizon,
};
