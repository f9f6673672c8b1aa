/*
 * The lowering of tl operations into PE commands (the compiler analog of
 * ADR-0065 D7): a command with its hazard sets, handed to PE_CPU in program
 * order; the simple operations (ref, alloc, full, load, store, wait, CPU
 * overhead, send and receive). Composite lowering lives in composite.c.
 */
#include "tl/tl_int.h"

#include <stdlib.h>

/* ---- commands ---- */

/* Every command but a composite reads and writes at most two handles. */
kb_cmd *kb__tl_cmd_new(kb_tl *tl, kb_cmd_kind kind)
{
	return kb__tl_cmd_new_n(tl, kind, 0, 2);
}

/* Adds x to a set of ids held in the command (room: cap). */
static int push_id(uint64_t *v, uint32_t *n, uint32_t cap, uint64_t x)
{
	for (uint32_t i = 0; i < *n; i++)
		if (v[i] == x)
			return 0;
	if (*n >= cap)
		return -1;
	v[(*n)++] = x;
	return 0;
}

/* Records that c reads h: a hazard-set entry, and (read-only use) an
 * implicit wait for h's producer. */
int kb__cmd_read(kb_cmd *c, const kb_hslot *h, int implicit_wait)
{
	if (h->fence > c->fence)
		c->fence = h->fence;
	if (push_id(c->reads, &c->n_reads, c->cap_ids, h->view.id))
		return -1;
	if (implicit_wait && h->writer >= 0)
		return push_id(c->deps, &c->n_deps, c->cap_ids, (uint64_t)h->writer);
	return 0;
}

int kb__cmd_write(kb_cmd *c, const kb_hslot *h)
{
	if (h->fence > c->fence)
		c->fence = h->fence;
	return push_id(c->writes, &c->n_writes, c->cap_ids, h->view.id);
}

/* kb__cmd_read and kb__cmd_write over a composite's sets, in the same
 * order, with the arrays, counts and fence in locals, which the stores of
 * ids would otherwise make the compiler reload (with a call per handle,
 * ~150 instructions a decode command, issue 13). */
int kb__cmd_sets(kb_cmd *c, kb_hslot *const *reads, uint32_t n_reads, kb_hslot *const *rw,
		 uint32_t n_rw, kb_hslot *const *writes, uint32_t n_writes)
{
	uint64_t *rv = c->reads, *dv = c->deps, *wv = c->writes;
	uint32_t nr = c->n_reads, nd = c->n_deps, nw = c->n_writes, cap = c->cap_ids;
	uint64_t fence = c->fence;
	int rc = -1;

	/* Read-only operands: implicit wait for their producers. rw handles
	 * and outputs: the scheduler's strict-FIFO tracker orders them. */
	for (uint32_t i = 0; i < n_reads; i++) {
		const kb_hslot *h = reads[i];

		fence = h->fence > fence ? h->fence : fence;
		if (push_id(rv, &nr, cap, h->view.id) ||
		    (h->writer >= 0 && push_id(dv, &nd, cap, (uint64_t)h->writer)))
			goto out;
	}
	for (uint32_t i = 0; i < n_rw; i++) {
		const kb_hslot *h = rw[i];

		fence = h->fence > fence ? h->fence : fence;
		if (push_id(rv, &nr, cap, h->view.id) || push_id(wv, &nw, cap, h->view.id))
			goto out;
	}
	for (uint32_t i = 0; i < n_writes; i++) {
		const kb_hslot *h = writes[i];

		fence = h->fence > fence ? h->fence : fence;
		if (push_id(wv, &nw, cap, h->view.id))
			goto out;
	}
	for (uint32_t i = 0; i < n_rw; i++)
		rw[i]->writer = (int64_t)c->id;
	for (uint32_t i = 0; i < n_writes; i++)
		writes[i]->writer = (int64_t)c->id;
	rc = 0;
out:
	c->n_reads = nr;
	c->n_deps = nd;
	c->n_writes = nw;
	c->fence = fence;
	return rc;
}

uint64_t kb__tl_disp_ps(const kb_tl *tl, const kb_cmd *c)
{
	return kb__clock_ps(&tl->clock, kb__dispatch_cycles(&tl->cfg.cost, c));
}

/* Hands the command to PE_CPU; it now belongs to the consumer. */
int kb__tl_emit(kb_tl *tl, kb_cmd *c)
{
	/* A composite's were worked out against the cap already (never 0). */
	if (!c->lbytes)
		c->lbytes = kb__cmd_lbytes(c);
	if (c->kind == KB_CMD_CPU) {
		c->disp_ps = kb__clock_ps(&tl->clock, kb__dispatch_cycles(&tl->cfg.cost, c));
		c->has_disp_ps = 1;
		tl->dispatch_ps += c->disp_ps;
	} else if (c->kind < KB_CMD_WAIT) {
		/* Logical bytes go in steps of 4 and 8 (doc/commands.md): their
		 * low bits alone put decode opt3's 26, 34, 58 and 66 in one
		 * entry, which missed for half its commands. */
		uint32_t i = (uint32_t)(c->lbytes ^ c->lbytes >> 3) & 7u;

		if (tl->disp_lbytes[i] != c->lbytes) {
			tl->disp_lbytes[i] = c->lbytes;
			tl->disp_ps[i] = kb__tl_disp_ps(tl, c);
		}
		c->disp_ps = tl->disp_ps[i];
		c->has_disp_ps = 1;
		tl->dispatch_ps += c->disp_ps;
	}
	tl->next_cmd++;
	return kb__tl_push_or_cancel(tl, c);
}

/* Whether a ref of dt, rank and shape is of the shape kept in p (a
 * kb_tl.ref_proto; rank 0: none): then it passed the checks, and has
 * p's view. */
static inline int ref_like(const kb_tview *p, kb_dtype dt, int rank, const int64_t *shape)
{
	if (!rank || rank != p->rank || (int)dt != p->dtype || !shape)
		return 0;
	for (int i = 0; i < rank; i++)
		if (shape[i] != p->shape[i])
			return 0;
	return 1;
}

KB_API kb_tl_tensor *kb_tl_ref_at(kb_tl *tl, uint64_t addr, kb_dtype dt, int rank,
				  const int64_t *shape, const char *file, int line)
{
	kb_tl_tensor *out = NULL;

	if (kb__tl_begin(tl, "kb_tl_ref", file, line))
		return NULL;
	if (!ref_like(&tl->ref_proto, dt, rank, shape)) {
		if (kb__tl_check_shape(tl, rank, shape, dt, &tl->ref_bytes))
			return NULL;
		kb__tl_view_proto(&tl->ref_proto, KB_SPACE_HBM, dt, rank, shape);
	}
	if (addr > tl->cfg.hbm_bytes || tl->ref_bytes > tl->cfg.hbm_bytes - addr) {
		kb__tl_fail(tl, KB_V_SPACE, "HBM range 0x%llx + %llu bytes is outside HBM (%llu bytes)",
			    (unsigned long long)addr, (unsigned long long)tl->ref_bytes,
			    (unsigned long long)tl->cfg.hbm_bytes);
		return NULL;
	}
	/* inline: a decode kernel refs each K and V tile */
	kb__tl_handle(tl, addr, &tl->ref_proto, KB_SPACE_HBM, dt, rank, shape, &out);
	return out;
}

KB_API kb_tl_tensor *kb_tl_alloc_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				    const char *file, int line)
{
	kb_tl_tensor *out = NULL;

	if (kb__tl_begin(tl, "kb_tl_alloc", file, line))
		return NULL;
	kb__tl_new_tcm(tl, dt, rank, shape, &out);
	return out;
}

KB_API kb_tl_tensor *kb_tl_full_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				   double value, const char *file, int line)
{
	kb_tl_tensor *out = NULL;
	kb_hslot *h;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_full", file, line))
		return NULL;
	h = kb__tl_new_tcm(tl, dt, rank, shape, &out);
	if (!h)
		return NULL;
	c = kb__tl_cmd_new(tl, KB_CMD_FILL);
	if (!c)
		return NULL;
	c->dst = h->view;
	c->fill_value = value;
	if (kb__cmd_write(c, h)) {
		kb__cmd_free(c);
		kb__tl_fail_internal(tl, KB_TL_SETS_FULL);
		return NULL;
	}
	h->writer = (int64_t)c->id;
	return kb__tl_emit(tl, c) ? NULL : out;
}

/* kb__tl_emit of a load or store c, its sets written. Inline: as a call
 * it was ~40 instructions of a decode load, half of them the call. */
static inline int emit_move(kb_tl *tl, kb_cmd *c)
{
	int i = c->kind == KB_CMD_STORE;

	if (!tl->move_ps[i]) {
		/* The first of its kind: kb__tl_disp_ps reads its lbytes. */
		tl->move_lbytes[i] = kb__cmd_lbytes(c);
		c->lbytes = tl->move_lbytes[i];
		tl->move_ps[i] = kb__tl_disp_ps(tl, c);
	} else {
		c->lbytes = tl->move_lbytes[i];
	}
	return kb__tl_emit_ps(tl, c, tl->move_ps[i]);
}

static __attribute__((noinline)) int same_rows_cols(const kb_tview *a, const kb_tview *b)
{
	return kb__tview_rows(a) == kb__tview_rows(b) && kb__tview_cols(a) == kb__tview_cols(b);
}

/* Inline: two a decode tile (its loads), a call each. */
static inline int same_shape(const kb_tview *a, const kb_tview *b)
{
	/* The same rank and dims (a tl view is zero beyond its rank, and
	 * one that were not only takes the products): a decode kernel's
	 * loads, where the products' loops by rank were ~45 instructions. */
	if (a->rank == b->rank && a->shape[0] == b->shape[0] && a->shape[1] == b->shape[1] &&
	    a->shape[2] == b->shape[2] && a->shape[3] == b->shape[3])
		return 1;
	return same_rows_cols(a, b);
}

/* The sets of a load or store c, just made (room for two ids, none
 * yet): it reads s, with an implicit wait for s's producer, and writes
 * d. kb__cmd_read's and kb__cmd_write's work, in that order, without
 * their searches and room checks, which cannot fail here; and their
 * signature. */
static void move_sets(kb_cmd *c, const kb_hslot *s, const kb_hslot *d)
{
	c->fence = s->fence > d->fence ? s->fence : d->fence;
	c->reads[0] = s->view.id;
	c->n_reads = 1;
	if (s->writer >= 0) {
		c->deps[0] = (uint64_t)s->writer;
		c->n_deps = 1;
	}
	c->writes[0] = d->view.id;
	c->n_writes = 1;
	kb__tl_sig(c, kb__hazard_set(0, s->view.id), kb__hazard_set(0, d->view.id));
}

KB_API kb_tl_tensor *kb_tl_load_at(kb_tl *tl, kb_tl_tensor *src, kb_tl_tensor *dst,
				   const char *file, int line)
{
	kb_hslot *s, *d;
	kb_cmd *c;

	/* kb__tl_slot only to say why a handle is not one (its look-up
	 * inline: two calls a load) */
	if (kb__tl_begin(tl, "kb_tl_load", file, line) ||
	    (!(s = kb__tl_slot_find(tl, src)) && !(s = kb__tl_slot(tl, src, "load source"))))
		return NULL;
	if (s->view.space != KB_SPACE_HBM) {
		kb__tl_fail(tl, KB_V_SPACE, "load source must live in HBM (it is already in TCM)");
		return NULL;
	}
	if (dst) {
		if (!(d = kb__tl_slot_find(tl, dst)) && !(d = kb__tl_slot(tl, dst, "load destination")))
			return NULL;
		if (d->view.space != KB_SPACE_TCM || !same_shape(&d->view, &s->view) ||
		    d->view.dtype != s->view.dtype) {
			kb__tl_fail(tl, d->view.space != KB_SPACE_TCM ? KB_V_SPACE :
				    d->view.dtype != s->view.dtype ? KB_V_DTYPE : KB_V_SHAPE,
				    "load destination must be a TCM tensor of the source's shape and dtype");
			return NULL;
		}
	} else {
		d = kb__tl_new_tcm(tl, (kb_dtype)s->view.dtype, s->view.rank, s->view.shape, &dst);
		if (!d)
			return NULL;
	}
	c = kb__tl_cmd_here(tl, kb__cmd_alloc_views(2), KB_CMD_LOAD);   /* src and dst below */
	if (!c)
		return NULL;
	c->src = s->view;
	c->dst = d->view;
	move_sets(c, s, d);
	d->writer = (int64_t)c->id;
	return emit_move(tl, c) ? NULL : dst;
}

KB_API int kb_tl_store_at(kb_tl *tl, kb_tl_tensor *dst_hbm, kb_tl_tensor *src_tcm,
			  const char *file, int line)
{
	kb_hslot *s, *d;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_store", file, line))
		return KB_EVALIDATE;
	if (!(d = kb__tl_slot(tl, dst_hbm, "store destination")) ||
	    !(s = kb__tl_slot(tl, src_tcm, "store source")))
		return KB_EVALIDATE;
	if (d->view.space != KB_SPACE_HBM || s->view.space != KB_SPACE_TCM)
		return kb__tl_fail(tl, KB_V_SPACE, "store moves a TCM tensor to an HBM tensor");
	if (!same_shape(&d->view, &s->view) || d->view.dtype != s->view.dtype)
		return kb__tl_fail(tl, same_shape(&d->view, &s->view) ? KB_V_DTYPE : KB_V_SHAPE,
				   "store source and destination differ in shape or dtype");
	c = kb__tl_cmd_here(tl, kb__cmd_alloc_views(2), KB_CMD_STORE);   /* src and dst below */
	if (!c)
		return KB_EVALIDATE;
	c->src = s->view;
	c->dst = d->view;
	move_sets(c, s, d);
	d->writer = (int64_t)c->id;
	return emit_move(tl, c);
}

KB_API int kb_tl_wait_at(kb_tl *tl, kb_tl_tensor *t, const char *file, int line)
{
	kb_hslot *h;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_wait", file, line) || !(h = kb__tl_slot(tl, t, "tensor")))
		return KB_EVALIDATE;
	if (h->writer < 0)
		return KB_OK;
	c = kb__tl_cmd_new(tl, KB_CMD_WAIT);
	if (!c)
		return KB_EVALIDATE;
	if (kb__cmd_read(c, h, 1)) {
		kb__cmd_free(c);
		return kb__tl_fail_internal(tl, KB_TL_SETS_FULL);
	}
	/* A wait is not a hardware command: it keeps no id of its own. */
	c->id = UINT64_MAX;
	return kb__tl_push_or_cancel(tl, c);
}

KB_API int kb_tl_cpu_overhead_at(kb_tl *tl, double cycles, const char *file, int line)
{
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_cpu_overhead", file, line))
		return KB_EVALIDATE;
	if (!(cycles >= 0.0) || cycles > 1e12)
		return kb__tl_fail(tl, KB_V_SHAPE, "CPU overhead of %g cycles is not in 0..1e12", cycles);
	c = kb__tl_cmd_new(tl, KB_CMD_CPU);
	if (!c)
		return KB_EVALIDATE;
	c->cpu_cycles = cycles;
	return kb__tl_emit(tl, c);
}

static int ipcq_cmd(kb_tl *tl, kb_cmd_kind kind, kb_tl_tensor *t, uint32_t peer, uint32_t tag)
{
	kb_hslot *h = kb__tl_slot(tl, t, kind == KB_CMD_SEND ? "send source" : "receive destination");
	kb_cmd *c;
	int rc;

	if (!h)
		return KB_EVALIDATE;
	if (h->view.space != KB_SPACE_TCM)
		return kb__tl_fail(tl, KB_V_SPACE, "IPCQ tensors must live in TCM");
	if (peer >= tl->cfg.n_pes || peer == tl->cfg.pe)
		return kb__tl_fail(tl, KB_V_MISSING_OPERAND, "peer PE %u is not another PE of this machine (0..%u)",
				   peer, tl->cfg.n_pes - 1);
	c = kb__tl_cmd_new(tl, kind);
	if (!c)
		return KB_EVALIDATE;
	c->peer_pe = peer;
	c->tag = tag;
	if (kind == KB_CMD_SEND) {
		c->src = h->view;
		rc = kb__cmd_read(c, h, 1);
	} else {
		c->dst = h->view;
		rc = kb__cmd_write(c, h);
		h->writer = (int64_t)c->id;
	}
	if (rc) {
		kb__cmd_free(c);
		return kb__tl_fail_internal(tl, KB_TL_SETS_FULL);
	}
	return kb__tl_emit(tl, c);
}

KB_API int kb_tl_send_at(kb_tl *tl, kb_tl_tensor *src, uint32_t dst_pe, uint32_t tag,
			 const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_send", file, line))
		return KB_EVALIDATE;
	return ipcq_cmd(tl, KB_CMD_SEND, src, dst_pe, tag);
}

KB_API int kb_tl_recv_at(kb_tl *tl, kb_tl_tensor *dst, uint32_t src_pe, uint32_t tag,
			 const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_recv", file, line))
		return KB_EVALIDATE;
	return ipcq_cmd(tl, KB_CMD_RECV, dst, src_pe, tag);
}
