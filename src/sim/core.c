/* The simulation core: LPs, their event heaps, messages and the worker heap. */
#include "sim/core_impl.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/tsan.h"

#define NODES_PER_SLAB 256
#define AUTO_WORKERS_PER_CORE 4
/* A heap of more events than this leaves a hole for the event that runs
 * (kb_evheap hole), which the handler's first push fills; one of this
 * many or fewer pops it at once (a sift of at most one compare), so
 * that the push may go into a register (kb_worker reg). */
#define HOLE_MIN 3

/* ---- a worker's event heap: (time, destination LP, source LP, source
 * sequence). Events at one LP run in the order (time, source, sequence),
 * and LPs at one time in id order, as the contract (sim.h) says. ---- */

/* The total order itself, in one place: (t, pair, seq) before (t2, pair2,
 * seq2). A macro, not a function: the operands are loads, and each is
 * made only when the comparison gets to it (as arguments of a function
 * they were all loaded first: +66 K instructions in opt3's put_far).
 * Written with || and &&, so that a test of it compiles to jumps alone;
 * as nested ?: GCC made a 0/1 value of it and tested that (setb, movzx,
 * test: 12% of the event core of a multi-PE run, mostly in its sifts). */
#define ORDER_BEFORE(t, pair, seq, t2, pair2, seq2) \
	((t) < (t2) || ((t) == (t2) && ((pair) < (pair2) || ((pair) == (pair2) && (seq) < (seq2)))))

static inline int key_less(const kb_evkey *a, const kb_evkey *b)
{
	return ORDER_BEFORE(a->time, a->pair, a->seq, b->time, b->pair, b->seq);
}

/* The key (t, pair, seq) against k, as key_less. */
static inline int key_before(kb_time t, uint64_t pair, uint64_t seq, const kb_evkey *k)
{
	return ORDER_BEFORE(t, pair, seq, k->time, k->pair, k->seq);
}

/* Of the two keys at byte offset l from base, the byte offset of the
 * earlier (l, or l + sizeof), with no branch: a sift's choice between
 * two children is a coin toss to the branch predictor (a multi-PE
 * run's descents missed about one level in two: put_hole was 17% of
 * its time, issue 13). On x86-64 one subtraction with borrow over the
 * three words, seq first, leaves the right one before the left in the
 * carry flag, and one more makes a mask of it; elsewhere key_less. */
static inline size_t key_pick(const char *base, size_t l)
{
#if defined(__x86_64__) && defined(__GNUC__)
	uint64_t t, pair, m;

	_Static_assert(sizeof(kb_evkey) == 32 && offsetof(kb_evkey, pair) == 8 &&
		       offsetof(kb_evkey, seq) == 16, "key_pick's offsets");
	__asm__("mov 48(%[b],%[l]), %[m]\n\t"
		"mov 40(%[b],%[l]), %[pair]\n\t"
		"mov 32(%[b],%[l]), %[t]\n\t"
		"cmp 16(%[b],%[l]), %[m]\n\t"
		"sbb 8(%[b],%[l]), %[pair]\n\t"
		"sbb (%[b],%[l]), %[t]\n\t"
		"sbb %[m], %[m]\n\t"
		"and $32, %[m]\n\t"
		"add %[m], %[l]"
		: [l] "+r"(l), [m] "=&r"(m), [pair] "=&r"(pair), [t] "=&r"(t)
		: [b] "r"(base), "m"(*(const kb_evkey(*)[2])(const void *)(base + l))
		: "cc");
	return l;
#else
	const kb_evkey *c = (const kb_evkey *)(const void *)(base + l);

	return key_less(c + 1, c) ? l + sizeof(*c) : l;
#endif
}

/* The pair of an event's key: (dst, src) as kb_evkey pair. */
static inline uint64_t ev_pair(const kb_event *e)
{
	return (uint64_t)e->dst << 32 | e->src;
}

/* The same against an event's own key (the register's). */
static inline int ev_before(kb_time t, uint64_t pair, uint64_t seq, const kb_event *e)
{
	return ORDER_BEFORE(t, pair, seq, e->time, ev_pair(e), e->seq);
}

#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define EV_VECTORS 1
typedef uint64_t ev_v2 __attribute__((vector_size(16)));
_Static_assert(offsetof(kb_event, src) == 8 && offsetof(kb_event, dst) == 12 &&
	       offsetof(kb_event, seq) == 16 && offsetof(kb_event, type) == 32 &&
	       offsetof(kb_event, aux) == 36 && offsetof(kb_event, w) == 40 &&
	       offsetof(kb_evkey, seq) == 16, "kb_event and kb_evkey layouts");
#endif

/* Writes and copies go in 16-byte halves, as the struct copies that
 * read them back load them: a 16-byte load over narrower stores just
 * made stalls on store forwarding (perf put 40% of kb__lp_send there). */
static inline void key_put(kb_evkey *dst, const kb_evkey *k)
{
#ifdef EV_VECTORS
	ev_v2 a = { k->time, k->pair }, b = { k->seq, k->slot };

	memcpy(dst, &a, sizeof(a));
	memcpy(&dst->seq, &b, sizeof(b));
#else
	*dst = *k;
#endif
}

/* The payload: its first word alone, the other four in two 16-byte
 * pieces. Senders often write the first just before the send (PE_CPU a
 * command, PE_SCHEDULER a command's id), and a 16-byte load over an
 * 8-byte store just made waits until the store reaches the cache (no
 * store forwarding: ~40% of those senders' samples, issue 13). */
static inline void ev_fill_words(kb_event *slot, const kb_event *body)
{
	_Static_assert(KB_EVENT_WORDS == 5, "the payload's pieces");
	slot->w[0] = body->w[0];
	memcpy(&slot->w[1], &body->w[1], 4 * sizeof(slot->w[0]));
}

/* The payload or, for a short event (kb__lp_self_short, whole 0; a
 * constant once inlined), its first word alone. */
static inline void ev_fill_words_as(kb_event *slot, const kb_event *body, int whole)
{
	if (whole)
		ev_fill_words(slot, body);
	else
		slot->w[0] = body->w[0];
}

/* Keeps ev_fill_head's stores on either side of it apart: GCC's SLP
 * vectorizer packed two of them (time and pair, or pair and seq) into
 * one 16-byte store wherever both came from registers (movq, movq,
 * punpcklqdq, movups for two movs, issue 13). An asm on the slot's
 * memory ends the vectorizer's region here; it emits nothing. */
static inline __attribute__((always_inline)) void slot_apart(kb_event *slot)
{
	__asm__("" : "+m"(*slot));
}

/* The header (time, source, destination, seq) from k, its words stored
 * one by one, as they are read (the loop reads time and dst, a handler
 * its fields): packing them into two 16-byte stores took two more
 * instructions a push into the ring. */
static inline void ev_fill_head(kb_event *slot, const kb_evkey *k)
{
	slot->time = k->time;
#ifdef EV_VECTORS
	slot_apart(slot);
	memcpy(&slot->src, &k->pair, sizeof(k->pair));
	slot_apart(slot);
#else
	slot->src = (uint32_t)k->pair;
	slot->dst = (uint32_t)(k->pair >> 32);
#endif
	slot->seq = k->seq;
}

/* The header from k, the rest (type, aux, payload) from body, type and
 * aux loaded first, as one word. */
static inline void ev_fill_as(kb_event *slot, const kb_evkey *k, const kb_event *body,
			      int whole)
{
#ifdef EV_VECTORS
	uint64_t ta;

	memcpy(&ta, &body->type, sizeof(ta));
	ev_fill_head(slot, k);
	memcpy(&slot->type, &ta, sizeof(ta));
#else
	ev_fill_head(slot, k);
	slot->type = body->type;
	slot->aux = body->aux;
#endif
	ev_fill_words_as(slot, body, whole);
}

static inline void ev_fill(kb_event *slot, const kb_evkey *k, const kb_event *body)
{
	ev_fill_as(slot, k, body, 1);
}

/* ev_fill for a push into the heap, whose key (key_put) begins with
 * the same 16-byte half: it is built once for both. */
static inline void ev_fill_key(kb_event *slot, const kb_evkey *k, const kb_event *body)
{
#ifdef EV_VECTORS
	uint64_t ta;
	ev_v2 a = { k->time, k->pair };

	memcpy(&ta, &body->type, sizeof(ta));
	memcpy(slot, &a, sizeof(a));
	slot->seq = k->seq;
	memcpy(&slot->type, &ta, sizeof(ta));
	ev_fill_words(slot, body);
#else
	ev_fill(slot, k, body);
#endif
}

/* The event in slot (a byte offset into ev, so that neither a pop nor a
 * push scales an index: three instructions each, per heap event). */
static inline kb_event *ev_at(const kb_evheap *h, uint64_t slot)
{
	return (kb_event *)(void *)((char *)h->ev + slot);
}

/* Moves up the children in the way of k placed at i; returns where k
 * belongs. Never writes key[n]. */
static inline size_t evheap_down(kb_evheap *h, size_t i, const kb_evkey *k)
{
	/* k's fields and the heap's bounds in locals: the moves below
	 * could alias them (k may be the key at n), which made every step
	 * load them again. */
	kb_time t = k->time;
	uint64_t pair = k->pair, seq = k->seq;
	kb_evkey *key = h->key;
	size_t n = h->n;

	for (;;) {
		size_t l = 2 * i + 1, m;

		if (l >= n)
			break;
		m = (l + 1 < n && key_less(&key[l + 1], &key[l])) ? l + 1 : l;
		if (key_before(t, pair, seq, &key[m])) /* keys are unique */
			break;
		key[i] = key[m];
		i = m;
	}
	return i;
}

/* The same for a hole at the root, Floyd's way: the smaller child up
 * to a leaf (one compare a level), then k up from there. A key that
 * fills the hole mostly belongs low (the heap's last, or a push behind
 * most pending events: a multi-PE run's), where the two compares a
 * level of evheap_down cost more than the few steps back up. key[n]
 * (there is room: a free slot, or n just lowered) gets a time after
 * every event's (KB_TIME_INF > KB_TIME_MAX), so that a last child with
 * no sibling loses the compare against it, and no level tests l + 1 <
 * n (a multi-PE run spends a quarter of its event core here: issue
 * 13). k must not be key[n]. */
static inline size_t evheap_down_leaf(kb_evheap *h, const kb_evkey *k)
{
	kb_time t = k->time;
	uint64_t pair = k->pair, seq = k->seq;
	kb_evkey *key = h->key;
	size_t n = h->n, i;
	/* Byte offsets, not indices: a child's is 2 o + sizeof (no
	 * shifts to scale an index at each level). */
	size_t o = 0, end = n * sizeof(*key);
	char *base = (char *)key;

	key[n].time = KB_TIME_INF;
	for (;;) {
		size_t l = 2 * o + sizeof(*key);

		if (l >= end)
			break;
		l = key_pick(base, l);
		*(kb_evkey *)(base + o) = *(const kb_evkey *)(base + l);
		o = l;
	}
	i = o / sizeof(*key);
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!key_before(t, pair, seq, &key[p]))
			break;
		key[i] = key[p];
		i = p;
	}
	return i;
}

/* Doubles the slots (and room for keys). The old slots are kept in
 * retired while a handler may read its event there. */
static int evheap_grow(kb_evheap *h)
{
	size_t cap = h->cap ? 2 * h->cap : 16;
	kb_evkey *key = realloc(h->key, cap * sizeof(*key));
	uint64_t *fr;
	kb_event *ev;

	if (!key)
		return KB_ENOMEM;
	/* Keys past n are read, never trusted: a sift's sentinel at key[n]
	 * sets only its time (key_pick reads all three words). */
	memset(key + h->cap, 0xff, (cap - h->cap) * sizeof(*key));
	h->key = key;
	if (!(fr = realloc(h->free, cap * sizeof(*fr))))
		return KB_ENOMEM;
	h->free = fr;
	if (!(ev = malloc(cap * sizeof(*ev))))
		return KB_ENOMEM;
	if (h->cap)
		memcpy(ev, h->ev, h->cap * sizeof(*ev));
	if (h->retired)
		free(h->ev); /* not the slots of the running event: those retired first */
	else
		h->retired = h->ev;
	h->attn = 1; /* the worker frees retired after the handler */
	h->ev = ev;
	for (size_t s = cap; s-- > h->cap;)
		h->free[h->n_free++] = s * sizeof(*ev);
	h->cap = cap;
	return KB_OK;
}

/* Inserts key k, whose event is in its slot, into a heap with no hole. */
static inline __attribute__((always_inline)) void evheap_insert_key(kb_evheap *h,
								    const kb_evkey *k)
{
	size_t i;

	for (i = h->n++; i > 0; i = (i - 1) / 2) {
		size_t p = (i - 1) / 2;

		if (key_less(&h->key[p], k)) /* keys are unique: (src, seq) */
			break;
		h->key[i] = h->key[p];
	}
	key_put(&h->key[i], k);
}

/* Inserts the event keyed (time, pair, seq) with body's type, aux and
 * payload into a heap with no hole and a free slot. */
static inline __attribute__((always_inline)) void evheap_insert(kb_evheap *h, kb_time time,
								uint64_t pair, uint64_t seq,
								const kb_event *body)
{
	kb_evkey k;

	k = (kb_evkey){ time, pair, seq, h->free[--h->n_free] };
	ev_fill_key(ev_at(h, k.slot), &k, body);
	evheap_insert_key(h, &k);
}

/* The same into the hole, if there is one. */
static inline __attribute__((always_inline)) void evheap_place(kb_evheap *h, kb_time time,
							       uint64_t pair, uint64_t seq,
							       const kb_event *body)
{
	kb_evkey k;

	if (!h->hole) {
		evheap_insert(h, time, pair, seq, body);
		return;
	}
	h->hole = 0;
	k = (kb_evkey){ time, pair, seq, h->free[--h->n_free] };
	ev_fill_key(ev_at(h, k.slot), &k, body);
	key_put(&h->key[evheap_down(h, 0, &k)], &k);
}

static inline __attribute__((always_inline)) int evheap_put(kb_evheap *h, kb_time time,
							   uint64_t pair, uint64_t seq,
							   const kb_event *body)
{
	if (!h->n_free && evheap_grow(h))
		return KB_ENOMEM;
	evheap_place(h, time, pair, seq, body);
	return KB_OK;
}

static int evheap_push(kb_evheap *h, const kb_event *e)
{
	return evheap_put(h, e->time, (uint64_t)e->dst << 32 | e->src, e->seq, e);
}

/* Fills the hole the running event left when its handler pushed nothing. */
static inline void evheap_settle(kb_evheap *h)
{
	if (!h->hole)
		return;
	h->hole = 0;
	if (--h->n) {
		kb_evkey k = h->key[h->n];

		h->key[evheap_down_leaf(h, &k)] = k;
	}
}

/* Gives back the slot of an event that ran (or moved away). */
static inline void evheap_release(kb_evheap *h, uint64_t slot)
{
	h->free[h->n_free++] = slot;
}

static void evheap_heapify(kb_evheap *h)
{
	for (size_t i = h->n / 2; i-- > 0;) {
		kb_evkey x = h->key[i];

		h->key[evheap_down(h, i, &x)] = x;
	}
}

static void evheap_free(kb_evheap *h)
{
	free(h->key);
	free(h->ev);
	free(h->free);
	free(h->retired);
}

static size_t evheap_count_below(const kb_evheap *h, size_t i, kb_time bound, size_t cap)
{
	size_t n;

	if (i >= h->n || h->key[i].time >= bound || cap == 0)
		return 0;
	n = 1;
	n += evheap_count_below(h, 2 * i + 1, bound, cap - n);
	if (n < cap)
		n += evheap_count_below(h, 2 * i + 2, bound, cap - n);
	return n;
}

kb_time kb__worker_min(const kb_worker *w)
{
	kb_time t = w->heap.n ? w->heap.key[0].time : KB_TIME_INF;

	/* The bands kb__worker_run left (the heap is empty then). */
	return w->nb && w->band[1].time < t ? w->band[1].time : t;
}

size_t kb__worker_count_below(const kb_worker *w, kb_time bound, size_t cap)
{
	return evheap_count_below(&w->heap, 0, bound, cap);
}

/* ---- message node pool (per worker; no allocator call per message) ---- */

int kb__worker_pool_init(kb_worker *w)
{
	kb_msgnode *slab = calloc(NODES_PER_SLAB, sizeof(*slab));

	if (!slab)
		return KB_ENOMEM;
	if (w->n_slabs == w->cap_slabs) {
		void **s = kb__grow(w->slabs, &w->cap_slabs, sizeof(*s), 8);

		if (!s) {
			free(slab);
			return KB_ENOMEM;
		}
		w->slabs = s;
	}
	w->slabs[w->n_slabs++] = slab;
	for (size_t i = 0; i < NODES_PER_SLAB; i++) {
		slab[i].owner = w;
		slab[i].next_free = w->free_nodes;
		w->free_nodes = &slab[i];
	}
	return KB_OK;
}

void kb__worker_pool_free(kb_worker *w)
{
	for (size_t i = 0; i < w->n_slabs; i++)
		free(w->slabs[i]);
	free(w->slabs);
	w->slabs = NULL;
	w->n_slabs = w->cap_slabs = 0;
	w->free_nodes = NULL;
}

/* Next node of a queue (single consumer, non-blocking), or NULL. Callers
 * run when no producer can be mid-enqueue (after a barrier, or before the
 * next drain), so a would-block answer cannot hide a message. */
static kb_msgnode *pop_node(struct __cds_wfcq_head *head, struct cds_wfcq_tail *tail)
{
	struct cds_wfcq_node *qn = __cds_wfcq_dequeue_nonblocking(head, tail);
	kb_msgnode *n;

	if (!qn || qn == CDS_WFCQ_WOULDBLOCK)
		return NULL;
	n = caa_container_of(qn, kb_msgnode, node);
	KB_TSAN_ACQUIRE(n);
	return n;
}

/* cds_wfcq_enqueue of a message node, with the happens-before that
 * ThreadSanitizer cannot see told to it. Producers into one queue order
 * themselves by an exchange on its tail (liburcu's uatomic_xchg, inline
 * assembly): each then writes the `next` of the node the exchange returned,
 * which the producer before it initialised (node_get, kb__worker_drain).
 * TSan saw the two writes unordered and reported ___cds_wfcq_append against
 * _cds_wfcq_node_init (tests/cli/plugin.sh now and then). Under TSan the
 * two steps of ___cds_wfcq_append (urcu/static/wfcqueue.h), with an acquire
 * of the returned node between them that pairs with the release of each
 * node before its exchange; a suppression cannot name that pair alone (it
 * matches a frame in either stack), so it would also hide a node reused
 * while another thread still appends to it. Elsewhere liburcu's own
 * enqueue, the very code as before (a macro: no function of its own for
 * the optimiser to weigh). */
#ifdef KB_TSAN
static void msg_enqueue(struct __cds_wfcq_head *head, struct cds_wfcq_tail *tail, kb_msgnode *n)
{
	struct cds_wfcq_node *old;

	(void)head;
	KB_TSAN_RELEASE(n);
	old = uatomic_xchg(&tail->p, &n->node);
	/* &head->node when the queue was empty: a key nobody releases. */
	KB_TSAN_ACQUIRE(caa_container_of(old, kb_msgnode, node));
	CMM_STORE_SHARED(old->next, &n->node);
}
#else
#define msg_enqueue(head, tail, n) cds_wfcq_enqueue((head), (tail), &(n)->node)
#endif

/* Takes back the nodes other workers returned. */
static void reclaim_nodes(kb_worker *w)
{
	kb_msgnode *n;

	while ((n = pop_node(&w->ret_head, &w->ret_tail))) {
		n->next_free = w->free_nodes;
		w->free_nodes = n;
	}
}

static kb_msgnode *node_get(kb_worker *w)
{
	kb_msgnode *n;

	if (!w->free_nodes)
		reclaim_nodes(w);
	if (!w->free_nodes && kb__worker_pool_init(w))
		return NULL;
	n = w->free_nodes;
	w->free_nodes = n->next_free;
	cds_wfcq_node_init(&n->node);
	return n;
}

/* ---- errors ---- */

static void lp_name(const kb_lp *lp, char *buf, size_t len)
{
	snprintf(buf, len, "pe%u.%s", lp->pe, lp->type->name);
}

int kb__lp_fail(kb_lp *lp, int code, const char *fmt, ...)
{
	kb_worker *w = lp->worker;
	char name[64], msg[600];
	va_list ap;

	if (w->err && (w->err_time < lp->now || (w->err_time == lp->now && w->err_lp < lp->id)))
		return code;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	lp_name(lp, name, sizeof(name));
	kb_error_clear(&w->error);
	kb__err(&w->error, code, "%s at t=%llu ps: %s", name, (unsigned long long)lp->now, msg);
	w->err = code;
	w->err_time = lp->now;
	w->err_lp = lp->id;
	w->heap.attn = 1;
	atomic_store_explicit(&lp->sim->failed, 1, memory_order_relaxed);
	return code;
}

int kb__lp_fail_with(kb_lp *lp, const kb_error *e)
{
	kb_worker *w = lp->worker;
	int rc = kb__lp_fail(lp, e->code, "%s", e->message);

	/* Keep the detail and the source of the original error. */
	if (w->err_lp == lp->id && w->err_time == lp->now) {
		w->error.detail = e->detail;
		w->error.line = e->line;
		w->error.column = e->column;
		memcpy(w->error.source, e->source, sizeof(w->error.source));
	}
	return rc;
}

/* An event past KB_TIME_MAX would wrap simulated time. The PE engines
 * check first and name their keys (kb__pe_after); this is the net under
 * every other LP type. */
static int time_end(kb_lp *lp, kb_time delay)
{
	return kb__lp_fail(lp, KB_ERANGE, "simulated time would pass 2^63 ps (a delay of %llu ps)",
			   (unsigned long long)delay);
}

/* ---- what handlers call ---- */

kb_time kb__lp_link_latency(const kb_lp *lp, uint32_t dst)
{
	const kb_sim *sim = lp->sim;
	const kb_lp *d = sim->lps[dst];

	if (d == lp)
		return 0;
	if (d->cluster != lp->cluster)
		return sim->cfg.lat_global;
	if (d->pe != lp->pe)
		return sim->cfg.lat_cluster;
	return sim->cfg.lat_pe;
}

/* Into the heap where it has to grow (or a hole to fill: put_hole's
 * rare case). Out of line: it calls out, and needs registers saved. */
static __attribute__((noinline)) int put_rare(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					      uint64_t seq, const kb_event *body)
{
	if (evheap_put(&w->heap, t, pair, seq, body))
		return kb__lp_fail(lp, KB_ENOMEM, "out of memory scheduling an event");
	if (w->nr == KB_RING_HOLE) /* evheap_put filled it */
		w->nr = 0;
	return KB_OK;
}

/* A push while the heap has its hole (the running event came from a
 * heap of more than HOLE_MIN events): into the hole, in one sift, as a
 * pop and a push would take two. The ring stays empty until then: in
 * such a heap a push is seldom the earliest. */
static __attribute__((noinline)) int put_hole(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					      uint64_t seq, const kb_event *body)
{
	kb_evheap *h = &w->heap;
	kb_evkey k;

	if (__builtin_expect(!h->n_free, 0))
		return put_rare(lp, w, t, pair, seq, body);
	h->hole = 0;
	w->nr = 0;
	k = (kb_evkey){ t, pair, seq, h->free[--h->n_free] };
	ev_fill_key(ev_at(h, k.slot), &k, body);
	key_put(&h->key[evheap_down_leaf(h, &k)], &k);
	return KB_OK;
}

/* Into the heap (no hole there): a push behind the ring's events and
 * the heap's first, or any push while no loop runs. The common one
 * calls nothing but by a tail call, so that it needs no registers
 * saved either. */
static __attribute__((noinline)) int put_far(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					     uint64_t seq, const kb_event *body)
{
	kb_evheap *h = &w->heap;

	if (__builtin_expect(!h->n_free, 0))
		return put_rare(lp, w, t, pair, seq, body);
	evheap_insert(h, t, pair, seq, body);
	return KB_OK;
}

/* ring[i + 1] = ring[i] for every i < 2 * pairs (a constant). */
static inline __attribute__((always_inline)) void ring_shift_up(kb_worker *w, int pairs)
{
#ifdef EV_VECTORS
	ev_v2 v[KB_RING / 2];

	_Static_assert(KB_RING % 2 == 0, "the ring moves in pairs");
	for (int i = 0; i < pairs; i++)
		memcpy(&v[i], &w->ring[2 * i], sizeof(v[i]));
	for (int i = 0; i < pairs; i++)
		memcpy(&w->ring[2 * i + 1], &v[i], sizeof(v[i]));
#else
	memmove(&w->ring[1], &w->ring[0], 2 * (size_t)pairs * sizeof(w->ring[0]));
#endif
}

/* Into the ring of n events at its place (a free buffer at ring[n]):
 * those before it move up one, the earliest first. */
static inline __attribute__((always_inline)) void ring_insert(kb_worker *w, uint32_t n, kb_time t,
							      uint64_t pair, uint64_t seq,
							      const kb_event *body)
{
	kb_event *buf = w->ring[n];
	uint32_t i;

	for (i = n; i > 0 && !ev_before(t, pair, seq, w->ring[i - 1]); i--)
		w->ring[i] = w->ring[i - 1];
	w->ring[i] = buf;
	ev_fill(buf, &(kb_evkey){ t, pair, seq, 0 }, body);
	w->nr = n + 1;
}

/* A push into a full ring before its latest: the latest goes first in
 * the heap (it orders before every key there), and its buffer is
 * free. */
static __attribute__((noinline)) int put_full(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					      uint64_t seq, const kb_event *body)
{
	kb_event *last = w->ring[0];
	uint32_t n = w->nr - 1;
	int rc = put_rare(lp, w, last->time, ev_pair(last), last->seq, last);

	if (rc)
		return rc;
	memmove(&w->ring[0], &w->ring[1], n * sizeof(w->ring[0]));
	w->ring[n] = last;
	ring_insert(w, n, t, pair, seq, body);
	return KB_OK;
}

/* Every one of the ring's n events (n within its size) moves up one
 * place: the ring's first 4, 8 or all its entries move, in 16-byte
 * pieces (loads first), the fewest that hold ring[n] (where a loop took
 * ~50 instructions a push). Free buffers above n move up too: the one
 * at ring[n], now at ring[n + 1], gives way there to the one the move
 * pushed out of its entries (ring[4], ring[8], or into the scratch
 * ring[KB_RING]). Returns the buffer that was free at ring[n], for the
 * place the move left below. */
static inline __attribute__((always_inline)) kb_event *ring_up(kb_worker *w, uint32_t n)
{
	kb_event *buf = w->ring[n], *out;

	if (n < 3) {
		out = w->ring[4];
		ring_shift_up(w, 2);
	} else if (n < 7) {
		out = w->ring[8];
		ring_shift_up(w, 4);
	} else {
		ring_shift_up(w, KB_RING / 2);
		out = w->ring[KB_RING];
	}
	w->ring[n + 1] = out;
	return buf;
}

/* put_ring's push between the ring's events, or into a full ring (out
 * of line: its loop's registers would give put_ring's common push, the
 * latest, a stack frame). Second to the latest in a ring of 4 or more
 * (opt2: an engine's stage end behind a phase's stages to come, before
 * one later event), the ring moves up whole and its latest back down,
 * where a walk from the earliest passed every one of those stages. */
static __attribute__((noinline)) int put_mid(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					     uint64_t seq, const kb_event *body)
{
	uint32_t n = w->nr;
	kb_event *buf;

	if (n > w->room)
		return put_full(lp, w, t, pair, seq, body);
	if (n < 4 || ev_before(t, pair, seq, w->ring[1])) {
		ring_insert(w, n, t, pair, seq, body);
		return KB_OK;
	}
	buf = ring_up(w, n);
	w->ring[0] = w->ring[1];
	w->ring[1] = buf;
	ev_fill(buf, &(kb_evkey){ t, pair, seq, 0 }, body);
	w->nr = n + 1;
	return KB_OK;
}

/* ev_put's other cases with events in the ring, behind its earliest:
 * behind its latest too (there, or into the heap if the heap's first
 * comes before it or the ring is full), or between; or into a full
 * ring. Most are opt2's engines' stage ends behind a phase's stages,
 * and opt3's engines' sends into a ring of 2. */
static __attribute__((noinline)) int put_ring(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					      uint64_t seq, const kb_event *body)
{
	const kb_evheap *h = &w->heap;
	uint32_t n = w->nr;
	kb_event *buf;

	if (!ev_before(t, pair, seq, w->ring[0])) {
		if (n > w->room || (h->n && !key_before(t, pair, seq, &h->key[0])))
			return put_far(lp, w, t, pair, seq, body);
		/* The latest: every other one moves up. */
		buf = ring_up(w, n);
		w->ring[0] = buf;
		ev_fill(buf, &(kb_evkey){ t, pair, seq, 0 }, body);
		w->nr = n + 1;
		return KB_OK;
	}
	return put_mid(lp, w, t, pair, seq, body);
}

/* ---- bands (core_impl.h kb_band): a sequential run of many PEs ---- */

/* A heap of more events than this at a sequential loop's start goes into
 * bands: more than a ring's worth, so that a run on one PE (at most
 * KB_RING pending, mostly) keeps its ring; a run of 8 PEs has ~20. */
#define BAND_MIN KB_RING

/* Steps the pushes of one sequential loop (SEQ_BUDGET events) may walk
 * into bands to find their places there: where a time's pushes come in
 * no order (a PHOLD model at a fixed delay: 256 events of one time, each
 * push to any LP) each would walk half a band. More, like one band too
 * many, give the bands up (bands_give_up), and the next BAND_REST loops
 * do not try them. The multi-PE decode walks a few times a run (opt2's:
 * 4 walks, 2 of them past 8 events). */
#define BAND_STEPS 4096
#define BAND_REST 64

/* Every band's events back into the heap, in order. While there are
 * bands the heap is empty, so each key goes in behind the last with no
 * sift; when bands_open gives up, the heap holds the rest and the keys
 * sift in as any insert's. */
static void bands_close(kb_worker *w)
{
	kb_evheap *h = &w->heap;

	for (uint32_t i = 1; i <= w->nb; i++) {
		uint64_t slot = w->band[i].head;

		for (;;) {
			const kb_event *e = ev_at(h, slot);
			kb_evkey k = { e->time, ev_pair(e), e->seq, slot };

			evheap_insert_key(h, &k);
			if (slot == w->band[i].tail)
				break;
			slot = e->pad;
		}
	}
	w->nb = 0;
	w->band[1].time = KB_TIME_INF;
}

/* The last band of a time at or before t (band[0]: none; its time 0
 * ends the scan); most pushes go to the latest or the one before. */
static inline kb_band *band_find(kb_worker *w, kb_time t)
{
	kb_band *b = &w->band[w->nb];

	while (b->time > t)
		b--;
	return b;
}

/* Whether the event keyed (t, pair, seq) goes behind the last event of
 * band b, whose time is t: its (pair, seq) alone (the tail's time is
 * the band's). */
static inline int band_behind_tail(const kb_worker *w, const kb_band *b, uint64_t pair,
				   uint64_t seq)
{
	const kb_event *e = ev_at(&w->heap, b->tail);

	return !(pair < ev_pair(e) || (pair == ev_pair(e) && seq < e->seq));
}

/* Whether the event keyed (t, pair, seq) goes behind the last event of
 * band b (band_find's): almost every push. */
static inline int band_behind(const kb_worker *w, const kb_band *b, kb_time t, uint64_t pair,
			      uint64_t seq)
{
	return b != w->band && b->time == t && band_behind_tail(w, b, pair, seq);
}

static inline void band_append(kb_worker *w, kb_band *b, uint64_t slot)
{
	ev_at(&w->heap, b->tail)->pad = slot;
	b->tail = slot;
}

/* Links slot's event, keyed (t, pair, seq), into its band: behind the
 * band of its time's last, or in its place there, or as a new band.
 * Returns nonzero with no room for a new band, or where its place lies
 * deeper than the loop's steps left (band_steps) allow. */
static int band_link(kb_worker *w, uint64_t slot, kb_time t, uint64_t pair, uint64_t seq)
{
	kb_evheap *h = &w->heap;
	kb_band *b = band_find(w, t);
	uint32_t i = (uint32_t)(b - w->band);
	kb_event *p;

	if (band_behind(w, b, t, pair, seq)) {
		band_append(w, b, slot);
		return 0;
	}
	if (!i || b->time != t) { /* a new band after band i */
		if (w->nb == KB_BANDS)
			return -1;
		/* the bands after it up one, and the end's time with them */
		memmove(b + 2, b + 1, (w->nb - i + 1) * sizeof(*b));
		b[1] = (kb_band){ t, slot, slot, KB_BAND_NO_MID };
		w->nb++;
		return 0;
	}
	if (ev_before(t, pair, seq, ev_at(h, b->head))) {
		ev_at(h, slot)->pad = b->head;
		b->head = slot;
		return 0;
	}
	p = ev_at(h, b->head);
	if (b->mid != KB_BAND_NO_MID && !ev_before(t, pair, seq, ev_at(h, b->mid)))
		p = ev_at(h, b->mid);
	while (!ev_before(t, pair, seq, ev_at(h, p->pad))) {
		if (!w->band_steps)
			return -1;
		w->band_steps--;
		p = ev_at(h, p->pad);
	}
	ev_at(h, slot)->pad = p->pad;
	p->pad = slot;
	b->mid = slot;
	return 0;
}

/* The bands into the heap, for the rest of this loop and BAND_REST more. */
static void bands_give_up(kb_worker *w)
{
	bands_close(w);
	w->band_rest = BAND_REST;
}

/* put_band's other cases: a grow, a new band or a place inside one, or
 * one band too many or a walk too long (then the bands go into the
 * heap, and the push). */
static __attribute__((noinline)) int put_band_far(kb_lp *lp, kb_worker *w, kb_time t,
						  uint64_t pair, uint64_t seq, const kb_event *body)
{
	kb_evheap *h = &w->heap;
	uint64_t slot;

	if (!h->n_free && evheap_grow(h))
		return kb__lp_fail(lp, KB_ENOMEM, "out of memory scheduling an event");
	slot = h->free[h->n_free - 1];
	if (band_link(w, slot, t, pair, seq)) {
		bands_give_up(w);
		w->nr = 0;
		evheap_insert(h, t, pair, seq, body);
		return KB_OK;
	}
	h->n_free--;
	ev_fill(ev_at(h, slot), &(kb_evkey){ t, pair, seq, 0 }, body);
	return KB_OK;
}

/* A push while the loop runs from bands: behind the last of its time's
 * band, calling nothing but by a tail call (no registers saved). whole
 * 0 (a constant): a short event's (kb__lp_self_short), whose w[1] ..
 * w[4] are not copied, as a ring push leaves them (put_band_far copies
 * them all). */
static inline __attribute__((always_inline)) int put_band_as(kb_lp *lp, kb_worker *w, kb_time t,
							     uint64_t pair, uint64_t seq,
							     const kb_event *body, int whole)
{
	kb_evheap *h = &w->heap;
	kb_band *b = &w->band[2];
	uint64_t slot;

	/* The band after the earliest first, by its time alone: the next
	 * time the PEs step to (78% of the multi-PE opt3's pushes, where
	 * band_find walked down from the latest through 1.2 bands a push).
	 * Its times differ from band to band, so the band of time t is
	 * band_find's, and band_behind's tests of it are passed. While the
	 * loop runs from bands there is one at least, so band[2] is a band
	 * or the end (time KB_TIME_INF, which no push has). */
	if (__builtin_expect(b->time == t, 1)) {
		if (__builtin_expect(!h->n_free || !band_behind_tail(w, b, pair, seq), 0))
			return put_band_far(lp, w, t, pair, seq, body);
	} else {
		b = band_find(w, t);
		if (__builtin_expect(!h->n_free || !band_behind(w, b, t, pair, seq), 0))
			return put_band_far(lp, w, t, pair, seq, body);
	}
	slot = h->free[--h->n_free];
	band_append(w, b, slot);
	ev_fill_as(ev_at(h, slot), &(kb_evkey){ t, pair, seq, 0 }, body, whole);
	return KB_OK;
}

static __attribute__((noinline)) int put_band(kb_lp *lp, kb_worker *w, kb_time t, uint64_t pair,
					      uint64_t seq, const kb_event *body)
{
	return put_band_as(lp, w, t, pair, seq, body, 1);
}

/* put_band of a short event: half of a multi-PE run's pushes (stage
 * ends, PE_CPU's, the commands and their ends). */
static __attribute__((noinline)) int put_band_short(kb_lp *lp, kb_worker *w, kb_time t,
						    uint64_t pair, uint64_t seq, const kb_event *body)
{
	return put_band_as(lp, w, t, pair, seq, body, 0);
}

/* A sequential loop's start with more than BAND_MIN events in the heap,
 * or with bands: the heap's events go into bands, unless band_link
 * gives up (then they all stay in the heap). */
static void bands_open(kb_worker *w)
{
	kb_evheap *h = &w->heap;

	while (h->n) {
		kb_evkey k = h->key[0];

		h->hole = 1;
		evheap_settle(h);
		if (band_link(w, k.slot, k.time, k.pair, k.seq)) {
			evheap_insert_key(h, &k);
			bands_give_up(w);
			return;
		}
	}
}

/* Schedules the event keyed (t, pair, seq) with body's type, aux and
 * payload on worker w (lp: the sender). The common cases write a ring
 * buffer in place: a key before the ring's earliest with room in the
 * ring (a handler's first push, mostly), or into an empty ring before
 * the heap's first, or behind the ring's one event and before the
 * heap's first (a second push, as an engine's send and then its own
 * busy time: 58% of opt3's second pushes). They call nothing but
 * put_ring, put_far or put_hole by tail calls, so that they need no
 * registers saved (put_band too, while a sequential run has bands). */
static inline __attribute__((always_inline)) int ev_put_as(kb_lp *lp, kb_worker *w, kb_time t,
							   uint64_t pair, uint64_t seq,
							   const kb_event *body, int whole)
{
	const kb_evheap *h = &w->heap;
	uint32_t n = w->nr;

	if (__builtin_expect(n - 1 < w->room, 1)) { /* 1 .. size - 1 events */
		if (__builtin_expect(ev_before(t, pair, seq, w->ring[n - 1]), 1)) {
			ev_fill_as(w->ring[n], &(kb_evkey){ t, pair, seq, 0 }, body, whole);
			w->nr = n + 1;
			return KB_OK;
		}
		/* Second: behind the earliest and before the next, the
		 * ring's or, with one, the heap's first. */
		if (n > 1 ? ev_before(t, pair, seq, w->ring[n - 2])
			  : !h->n || key_before(t, pair, seq, &h->key[0])) {
			kb_event *buf = w->ring[n];

			w->ring[n] = w->ring[n - 1];
			w->ring[n - 1] = buf;
			ev_fill_as(buf, &(kb_evkey){ t, pair, seq, 0 }, body, whole);
			w->nr = n + 1;
			return KB_OK;
		}
		return put_ring(lp, w, t, pair, seq, body);
	}
	if (__builtin_expect(!n, 1)) {
		if (__builtin_expect(!h->n || key_before(t, pair, seq, &h->key[0]), 1)) {
			ev_fill_as(w->ring[0], &(kb_evkey){ t, pair, seq, 0 }, body, whole);
			w->nr = 1;
			return KB_OK;
		}
		return put_far(lp, w, t, pair, seq, body);
	}
	/* bands first: every push of a run of many PEs; a hole is rare (a
	 * heap of more than HOLE_MIN events: 4 pushes of opt2, none of
	 * opt3) */
	if (n == KB_RING_BANDS)
		return whole ? put_band(lp, w, t, pair, seq, body)
			     : put_band_short(lp, w, t, pair, seq, body);
	if (n == KB_RING_HOLE)
		return put_hole(lp, w, t, pair, seq, body);
	if (n == KB_RING_OFF)
		return put_far(lp, w, t, pair, seq, body);
	return put_ring(lp, w, t, pair, seq, body);
}

static inline __attribute__((always_inline)) int ev_put(kb_lp *lp, kb_worker *w, kb_time t,
							uint64_t pair, uint64_t seq,
							const kb_event *body)
{
	return ev_put_as(lp, w, t, pair, seq, body, 1);
}

/* kb__lp_self's rare case: time's end. */
static __attribute__((noinline)) int self_far(kb_lp *lp, kb_time delay)
{
	return time_end(lp, delay);
}

/* kb__lp_self, or kb__lp_self_short with whole 0. */
static inline __attribute__((always_inline)) int self_put(kb_lp *lp, kb_time delay,
							  const kb_event *ev, int whole)
{
	kb_time t = lp->now + delay;

	/* lp->now <= KB_TIME_MAX, so with delay there too the sum cannot
	 * wrap, and it passes KB_TIME_MAX just when kb__time_add refuses. */
	if (__builtin_expect((t | delay) > KB_TIME_MAX, 0))
		return self_far(lp, delay);
	return ev_put_as(lp, lp->worker, t, lp->self_pair, lp->seq++, ev, whole);
}

/* As kb__lp_send: inline in the caller (LTO), where the common case
 * calls nothing but tail calls. */
__attribute__((always_inline)) inline int kb__lp_self(kb_lp *lp, kb_time delay, const kb_event *ev)
{
	return self_put(lp, delay, ev, 1);
}

/* A ring push leaves w[1] .. w[4] as the buffer had them (4 of a self
 * event's ~20 instructions there); the heap's pushes copy them all. */
__attribute__((always_inline)) inline int kb__lp_self_short(kb_lp *lp, kb_time delay,
							    const kb_event *ev)
{
	return self_put(lp, delay, ev, 0);
}

/* A send that kb__lp_send's shortcut does not take: it looks at the
 * destination LP (out of line: its error buffers would give every send
 * a stack frame). */
static __attribute__((noinline)) int send_far(kb_lp *lp, uint32_t dst, kb_time delay,
					      const kb_event *ev)
{
	kb_sim *sim = lp->sim;
	kb_lp *d;
	kb_time lat, t;
	uint64_t pair, seq;

	if (dst >= sim->n_lps)
		return kb__lp_fail(lp, KB_EINTERNAL, "message to LP %u, which does not exist", dst);
	d = sim->lps[dst];
	if (d == lp)
		return kb__lp_self(lp, delay, ev);
	lat = kb__lp_link_latency(lp, dst);
	if (delay < lat) {
		char name[64];

		lp_name(d, name, sizeof(name));
		return kb__lp_fail(lp, KB_ELOOKAHEAD,
				   "message to %s with delay %llu ps, below the link latency of %llu ps",
				   name, (unsigned long long)delay, (unsigned long long)lat);
	}
	t = lp->now;
	if (kb__time_add(&t, delay))
		return time_end(lp, delay);
	pair = (uint64_t)dst << 32 | lp->id;
	seq = lp->seq++;
	/* One worker, or one thread running every worker this window (solo):
	 * straight into the heap. Either way the message is due at or after
	 * the window's bound (below), so no one runs it in this window. */
	if (d->worker == lp->worker || (sim->solo && t >= sim->bound)) {
		kb_worker *dw = d->worker;
		int rc = ev_put(lp, dw, t, pair, seq, ev);

		if (rc)
			return rc;
		/* Solo: the coordinator notes whose minimum moved (its heap of
		 * worker minima). */
		if (dw != lp->worker && !dw->dirty) {
			dw->dirty = 1;
			sim->dirty[sim->n_dirty++] = dw;
		}
	} else {
		kb_msgnode *n;

		/* Another worker may be running up to the window's bound: a
		 * message due before it means a horizon hook promised too much. */
		if (t < sim->bound) {
			char name[64];

			lp_name(d, name, sizeof(name));
			return kb__lp_fail(lp, KB_ELOOKAHEAD,
					   "message to %s due at t=%llu ps, inside the window that ends at %llu ps "
					   "(a horizon promised no message before then)",
					   name, (unsigned long long)t, (unsigned long long)sim->bound);
		}
		n = node_get(lp->worker);

		if (!n)
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory sending a message");
		ev_fill(&n->ev, &(kb_evkey){ t, pair, seq, 0 }, ev);
		msg_enqueue(&d->inbox_head, &d->inbox_tail, n);
	}
	return KB_OK;
}

/* kb__lp_send, or kb__lp_send_short with whole 0. */
static inline __attribute__((always_inline)) int send_put(kb_lp *lp, uint32_t dst, kb_time delay,
							  const kb_event *ev, int whole)
{
	kb_time t = lp->now + delay;
	kb_worker *w = lp->worker;

	/* The destination on this worker and the delay past any link to it
	 * (kb_lp local_lo, local_n): no look at the destination LP (its
	 * worker, PE, cluster). Unsigned: a dst below local_lo wraps past
	 * local_n. A send to lp itself may go this way: its key is the one
	 * kb__lp_self would give it (self_pair, the next seq). A time past
	 * KB_TIME_MAX (tested as in kb__lp_self) goes the long way, which
	 * reports it; as there, the common case makes no call that needs a
	 * frame. */
	if (__builtin_expect(dst - lp->local_lo >= lp->local_n || delay < lp->local_lat ||
			     (t | delay) > KB_TIME_MAX, 0))
		return send_far(lp, dst, delay, ev);
	return ev_put_as(lp, w, t, (uint64_t)dst << 32 | lp->id, lp->seq++, ev, whole);
}

/* Inline in the caller: with LTO, in every handler (always_inline; the
 * definition is still an external one, for builds without LTO), as the
 * call, its argument moves and the caller's test of a result known to be
 * KB_OK on the common paths cost more than the copies of ev_put's tests
 * (-0.4 M instructions of opt3's 36.8 M outside the hash at S_kv=65536,
 * -0.23 M of opt2's 20.5 M; +10 KB of text). */
__attribute__((always_inline)) inline int kb__lp_send(kb_lp *lp, uint32_t dst, kb_time delay,
						      const kb_event *ev)
{
	return send_put(lp, dst, delay, ev, 1);
}

/* As kb__lp_self_short. */
__attribute__((always_inline)) inline int kb__lp_send_short(kb_lp *lp, uint32_t dst,
							    kb_time delay, const kb_event *ev)
{
	return send_put(lp, dst, delay, ev, 0);
}

/* kb__lp_send_pe, or kb__lp_send_pe_short with whole 0. Where the
 * shortcut holds for dst (local_n), local_lat is the engine-to-engine
 * latency itself (set_shortcuts), the delay: the time is all the
 * common case tests besides dst, and as local_lat has 32 bits and now
 * at most KB_TIME_MAX, the sum cannot wrap. Elsewhere, or at time's
 * end, send_far with that latency, as kb__lp_send. */
static inline __attribute__((always_inline)) int send_pe_put(kb_lp *lp, uint32_t dst,
							     const kb_event *ev, int whole)
{
	kb_time t = lp->now + lp->local_lat;

	if (__builtin_expect(dst - lp->local_lo >= lp->local_n || t > KB_TIME_MAX, 0))
		return send_far(lp, dst, lp->sim->cfg.lat_pe, ev);
	return ev_put_as(lp, lp->worker, t, (uint64_t)dst << 32 | lp->id, lp->seq++, ev, whole);
}

/* Inline in the caller, as kb__lp_send. */
__attribute__((always_inline)) inline int kb__lp_send_pe(kb_lp *lp, uint32_t dst,
							 const kb_event *ev)
{
	return send_pe_put(lp, dst, ev, 1);
}

__attribute__((always_inline)) inline int kb__lp_send_pe_short(kb_lp *lp, uint32_t dst,
							       const kb_event *ev)
{
	return send_pe_put(lp, dst, ev, 0);
}

/* Where m messages to dst, keyed as m kb__lp_send_pe in turn would key
 * them, fit in the running loop's ring at once: behind its latest event
 * and before the heap's first (opt2's scheduler: a phase's 8 stages to
 * PE_MATH), with room for them all. There the ring moves once, not once
 * a push behind the last (put_ring, ~110 instructions a send): its
 * events move up m places, each into one of the m free buffers above
 * them, which take their places below, keyed in order, the earliest
 * highest (ring[m - 1]), as the m pushes would leave them. Returns the
 * ring, message k's buffer at [m - 1 - k], whose type, aux and payload
 * the caller writes before its handler returns; NULL where they do not
 * fit (nothing done, no seq taken). */
kb_event *const *kb__lp_send_pe_place(kb_lp *lp, uint32_t dst, uint32_t m)
{
	kb_worker *w = lp->worker;
	const kb_evheap *h = &w->heap;
	kb_time t = lp->now + lp->local_lat;
	uint64_t pair = (uint64_t)dst << 32 | lp->id, seq = lp->seq;
	uint32_t n = w->nr;

	/* n + m in 64 bits: n may be KB_RING_OFF and the like, no count */
	if (dst - lp->local_lo >= lp->local_n || t > KB_TIME_MAX || !m ||
	    (uint64_t)n + m > (uint64_t)w->room + 1 || (n && ev_before(t, pair, seq, w->ring[0])) ||
	    (h->n && !key_before(t, pair, seq + m - 1, &h->key[0])))
		return NULL;
	for (uint32_t i = n; i-- > 0;) {
		kb_event *e = w->ring[i];

		w->ring[i] = w->ring[i + m];
		w->ring[i + m] = e;
	}
	for (uint32_t k = 0; k < m; k++)
		ev_fill_head(w->ring[m - 1 - k], &(kb_evkey){ t, pair, seq + k, 0 });
	w->nr = n + m;
	lp->seq = seq + m;
	return w->ring;
}

/* m messages ev[0] .. ev[m - 1] to dst, each as kb__lp_send_pe in turn
 * (the same keys: seq numbers in that order): placed at once where
 * kb__lp_send_pe_place can, else one send at a time. */
int kb__lp_send_pe_run(kb_lp *lp, uint32_t dst, const kb_event *ev, uint32_t m)
{
	kb_event *const *r = kb__lp_send_pe_place(lp, dst, m);
	int rc = KB_OK;

	if (r) {
		for (uint32_t k = 0; k < m; k++) {
			kb_event *b = r[m - 1 - k];
			uint64_t ta;

			memcpy(&ta, &ev[k].type, sizeof(ta));
			memcpy(&b->type, &ta, sizeof(ta));
			ev_fill_words(b, &ev[k]);
		}
		return KB_OK;
	}
	for (uint32_t k = 0; !rc && k < m; k++)
		rc = kb__lp_send_pe(lp, dst, &ev[k]);
	return rc;
}

/* ---- what executors call ---- */

/* Puts a register's event into the heap as the loop ends. */
static void reg_spill(kb_worker *w, kb_event *r)
{
	const kb_lp_type *type;

	if (!evheap_push(&w->heap, r))
		return;
	/* Lost: let its type free what it owns; the run fails. */
	type = w->sim->lps[r->dst]->type;
	if (type->discard)
		type->discard(r);
	atomic_store_explicit(&w->sim->failed, 1, memory_order_relaxed);
	if (!w->err) {
		kb_error_clear(&w->error);
		kb__err(&w->error, KB_ENOMEM, "out of memory scheduling an event");
		w->err = KB_ENOMEM;
		w->err_time = r->time;
		w->err_lp = r->dst;
	}
}

static void reg_close(kb_worker *w)
{
	for (; w->nr; w->nr--)
		reg_spill(w, w->ring[w->nr - 1]);
	w->nr = KB_RING_OFF;
}

/* After an event whose handler failed, or with the worker's attention
 * raised (an error; slots retired by a grow): nonzero when the loop must
 * stop. Out of line: rc lives across no call in the loop. */
static __attribute__((noinline)) int event_rare(kb_worker *w, kb_lp *lp, int rc)
{
	kb_evheap *h = &w->heap;

	h->attn = 0;
	free(h->retired);
	h->retired = NULL;
	if (rc && !w->err)
		kb__lp_fail(lp, rc, "event handler failed: %s", kb_strerror(rc));
	return w->err;
}

/* Runs this worker's events in order, at most budget of them, while
 * they are earlier than bound (bounded 0: no bound, the sequential run).
 * The next event is the ring's earliest when it has events (kb_worker
 * ring), else the first band's head while the loop runs from bands (a
 * sequential run of many PEs: nr KB_RING_BANDS, the heap empty), else
 * the heap's first. The per-event path tests one word for
 * everything rare (attn: an error, or slots retired by a grow) besides
 * the handler's return code, right after the call, so that the code is
 * not kept across the spread work's call; what must live across the
 * handler's call fits the callee-saved registers (w, left, lps, step_n,
 * lp: the last event's time is its LP's now), with no reload from the
 * stack per event. */
static inline __attribute__((always_inline)) void worker_run(kb_worker *w, kb_time bound,
							     uint64_t budget, int bounded)
{
	kb_lp *const *lps = w->sim->lps;
	kb_evheap *h = &w->heap;
	uint64_t left = budget;
	kb_lp *lp = NULL;
	/* A sequential run's spread work (kb_sim_config): one predictable
	 * test per event, a call while there is some. */
	static const size_t none;
	const size_t *step_n = !bounded && w->sim->cfg.step_n ? w->sim->cfg.step_n : &none;

	free(h->retired);
	h->retired = NULL;
	/* The count and last time reach the worker after the loop: nothing
	 * a handler calls reads them. */
	if (w->err || !budget)
		return;
	w->nr = 0;
	if (!bounded && (w->nb || h->n > BAND_MIN)) {
		w->band_steps = BAND_STEPS;
		if (!w->band_rest)
			bands_open(w);
		else /* given up lately (bands_give_up) */
			w->band_rest--;
		/* While there are bands, every push goes to them: the ring
		 * stays unused, and nr says so from event to event (not set
		 * and reset around each handler) until put_band_far gives
		 * them up or the last band's last event runs. */
		if (w->nb)
			w->nr = KB_RING_BANDS;
	}
	for (;;) {
		uint32_t n = w->nr;
		kb_time t;
		int rc;

		/* a count of ring events: KB_RING_BANDS and the like read
		 * negative, as 0 does not read positive */
		if ((int32_t)n > 0) {
			/* cppcheck-suppress arrayIndexOutOfBounds ; n is 1..KB_RING here: KB_RING_BANDS reads negative above */
			kb_event **r = &w->ring[n - 1], *ev = *r;

			t = ev->time;
			if (bounded && t >= bound)
				break;
			/* The handler reads its event in this buffer (now
			 * cur); the last event's buffer takes its place in the
			 * ring, free for a push. */
			*r = w->cur;
			w->cur = ev;
			w->nr = n - 1;
			lp = lps[ev->dst];
			lp->now = t;
			rc = lp->event(lp, ev);
			if (__builtin_expect(rc | h->attn, 0))
				goto rare;
		} else if (!bounded && n == KB_RING_BANDS) {
			kb_band *b = &w->band[1];
			uint64_t slot = b->head;
			kb_event *ev = ev_at(h, slot);

			t = b->time;
			if (slot == b->tail) {
				/* the later bands down one, and the end's time
				 * with them */
				memmove(b, b + 1, w->nb-- * sizeof(*b));
				/* The last band's last: the ring takes what the
				 * handler pushes (the heap is empty while the
				 * loop runs from bands), so that while nr is
				 * KB_RING_BANDS there is a band to pop. */
				if (!w->nb)
					w->nr = 0;
			} else {
				b->head = ev->pad;
				if (slot == b->mid)
					b->mid = KB_BAND_NO_MID;
			}
			lp = lps[ev->dst];
			lp->now = t;
			rc = lp->event(lp, ev);
			evheap_release(h, slot);
		} else if (h->n) {
			const kb_evkey *k0 = h->key;
			uint64_t slot;

			t = k0->time;
			slot = k0->slot;
			if (bounded && t >= bound)
				break;
			lp = lps[k0->pair >> 32];
			/* Left as a hole, which a push fills with one sift (a
			 * pop and a push cost two), or which is filled after the
			 * handler; out at once where that costs no compare. */
			h->hole = 1;
			if (h->n <= HOLE_MIN)
				evheap_settle(h);
			else
				w->nr = KB_RING_HOLE;
			lp->now = t;
			rc = lp->event(lp, ev_at(h, slot));
			if (h->hole) {
				evheap_settle(h);
				w->nr = 0;
			}
			evheap_release(h, slot);
		} else {
			break;
		}
		if (__builtin_expect(rc | h->attn, 0)) {
rare:
			if (event_rare(w, lp, rc)) {
				left--;
				break;
			}
		}
		if (!bounded && *step_n)
			w->sim->cfg.on_step(w->sim->cfg.step_ctx);
		if (!--left)
			break;
	}
	if (w->nr == KB_RING_BANDS)
		w->nr = 0;
	reg_close(w);
	/* A sequential run's bands stay for its next loop when this one
	 * stopped for its budget (kb__worker_close): moving 64-96 events out
	 * of the heap and back every SEQ_BUDGET events was ~3% of the
	 * multi-PE run. */
	if (bounded || left || w->err)
		bands_close(w);
	w->events += budget - left;
	if (lp)
		w->last_time = lp->now;
}

void kb__worker_window(kb_worker *w, kb_time bound, uint64_t budget)
{
	worker_run(w, bound, budget, 1);
}

void kb__worker_run(kb_worker *w, uint64_t budget)
{
	worker_run(w, KB_TIME_INF, budget, 0);
}

void kb__worker_close(kb_worker *w)
{
	bands_close(w);
}

/* Moves delivered messages into heaps. Called after a barrier, when every
 * producer has finished, so the non-blocking dequeue never has to wait. */
void kb__worker_drain(kb_worker *w)
{
	for (size_t i = 0; i < w->n_lps; i++) {
		kb_lp *lp = w->members[i];
		kb_msgnode *n;

		if (cds_wfcq_empty(&lp->inbox_head, &lp->inbox_tail))
			continue;
		while ((n = pop_node(&lp->inbox_head, &lp->inbox_tail))) {
			if (evheap_push(&w->heap, &n->ev)) {
				w->alloc_failed = 1;
				atomic_store_explicit(&w->sim->failed, 1, memory_order_relaxed);
			}
			if (n->owner == w) {
				n->next_free = w->free_nodes;
				w->free_nodes = n;
			} else {
				/* Back to its owner: one-way traffic must not pile up here. */
				cds_wfcq_node_init(&n->node);
				msg_enqueue(&n->owner->ret_head, &n->owner->ret_tail, n);
			}
		}
	}
}

/* ---- the sim object ---- */

kb_sim *kb__sim_create(const kb_sim_config *cfg, kb_error *err)
{
	kb_sim *sim = calloc(1, sizeof(*sim));

	if (!sim) {
		kb__err(err, KB_ENOMEM, "out of memory creating a simulation");
		return NULL;
	}
	sim->cfg = *cfg;
	if (sim->cfg.lat_pe == 0 || sim->cfg.lat_cluster == 0 || sim->cfg.lat_global == 0) {
		kb__err(err, KB_EINVAL, "link latencies must be at least 1 ps (the lookahead)");
		free(sim);
		return NULL;
	}
	if (sim->cfg.par_threshold == 0)
		sim->cfg.par_threshold = 24;
	atomic_init(&sim->stop, 0);
	return sim;
}

/* Runs the type's final and frees a state the core allocated. */
static void free_state(const kb_lp_type *type, void *state)
{
	if (type->final)
		type->final(state);
	if (type->state_size)
		free(state);
}

uint32_t kb__sim_add_lp(kb_sim *sim, const kb_lp_type *type, void *arg, uint32_t pe,
			uint32_t cluster)
{
	void *state = type->state_size ? calloc(1, type->state_size) : arg;
	kb_lp *lp;

	if (!state)
		return UINT32_MAX;
	if (type->init && type->init(state, arg)) {
		free_state(type, state);
		return UINT32_MAX;
	}
	if (sim->n_lps == sim->cap_lps) {
		kb_lp **l = kb__grow(sim->lps, &sim->cap_lps, sizeof(*l), 16);

		if (!l) {
			free_state(type, state);
			return UINT32_MAX;
		}
		sim->lps = l;
	}
	if (posix_memalign((void **)&lp, 64, sizeof(*lp))) {
		free_state(type, state);
		return UINT32_MAX;
	}
	memset(lp, 0, sizeof(*lp));
	__cds_wfcq_init(&lp->inbox_head, &lp->inbox_tail);
	lp->id = (uint32_t)sim->n_lps;
	lp->self_pair = (uint64_t)lp->id << 32 | lp->id;
	lp->pe = pe;
	lp->cluster = cluster;
	lp->type = type;
	lp->event = type->event;
	lp->state = state;
	lp->sim = sim;
	sim->lps[sim->n_lps++] = lp;
	return lp->id;
}

void *kb__sim_lp_state(kb_sim *sim, uint32_t id)
{
	return id < sim->n_lps ? sim->lps[id]->state : NULL;
}

uint32_t kb__sim_lp_count(const kb_sim *sim)
{
	return (uint32_t)sim->n_lps;
}

const kb_sim_stats *kb__sim_stats(const kb_sim *sim)
{
	return &sim->stats;
}

void kb__sim_request_stop(kb_sim *sim)
{
	atomic_store(&sim->stop, 1);
}

/* Cores this process may run on (affinity mask, else online CPUs). */
static unsigned usable_cores(void)
{
	long n;
#ifdef CPU_COUNT
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
#endif
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

uint64_t kb__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Shortest links between workers: the global window, and per worker the
 * shortest link out (what its horizon is stretched by). */
static void take_min(kb_time *m, kb_time l)
{
	if (l < *m)
		*m = l;
}

/* The shortest link out of each worker in O(LPs), where the LPs lie in
 * (cluster, pe) order and each worker holds one run of them, as place_lps
 * and kb__sim_regroup place them: then the LPs a worker links to nearest
 * are at the ends of its run. Returns 0 (nothing set) otherwise, or
 * without memory, for the pairwise scan (which took minutes at 65536
 * LPs). */
static int link_latencies_runs(kb_sim *sim)
{
	size_t n = sim->n_lps, *cs, *ce;
	kb_lp *const *l = sim->lps;

	for (size_t i = 1; i < n; i++)
		if (l[i]->cluster < l[i - 1]->cluster ||
		    (l[i]->cluster == l[i - 1]->cluster && l[i]->pe < l[i - 1]->pe) ||
		    l[i]->worker < l[i - 1]->worker)
			return 0;
	cs = malloc((n ? n : 1) * sizeof(*cs)); /* first LP of i's cluster */
	ce = malloc((n ? n : 1) * sizeof(*ce)); /* last LP of i's cluster */
	if (!cs || !ce) {
		free(cs);
		free(ce);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		cs[i] = i && l[i]->cluster == l[i - 1]->cluster ? cs[i - 1] : i;
	for (size_t i = n; i-- > 0;)
		ce[i] = i + 1 < n && l[i]->cluster == l[i + 1]->cluster ? ce[i + 1] : i;
	sim->window = KB_TIME_INF;
	for (size_t a = 0, b; a < n; a = b) {
		kb_worker *w = l[a]->worker;
		kb_time m = KB_TIME_INF;

		for (b = a + 1; b < n && l[b]->worker == w; b++)
			;
		/* Before the run: [0, a). Sorted, so a pair on one PE exists iff
		 * a-1 and a share it; on one cluster but two PEs iff the first LP
		 * of a's cluster and the last of it in the run differ in PE; on
		 * two clusters iff LP 0 and the run's last do. */
		if (a > 0) {
			size_t e = ce[a] < b - 1 ? ce[a] : b - 1;

			if (l[a - 1]->cluster == l[a]->cluster) {
				if (l[a - 1]->pe == l[a]->pe)
					take_min(&m, sim->cfg.lat_pe);
				if (l[cs[a]]->pe != l[e]->pe)
					take_min(&m, sim->cfg.lat_cluster);
			}
			if (l[0]->cluster != l[b - 1]->cluster)
				take_min(&m, sim->cfg.lat_global);
		}
		/* After the run: [b, n), the mirror image. */
		if (b < n) {
			size_t s = cs[b - 1] > a ? cs[b - 1] : a;

			if (l[b]->cluster == l[b - 1]->cluster) {
				if (l[b]->pe == l[b - 1]->pe)
					take_min(&m, sim->cfg.lat_pe);
				if (l[s]->pe != l[ce[b]]->pe)
					take_min(&m, sim->cfg.lat_cluster);
			}
			if (l[a]->cluster != l[n - 1]->cluster)
				take_min(&m, sim->cfg.lat_global);
		}
		w->out_lat = m;
		take_min(&sim->window, m);
	}
	free(cs);
	free(ce);
	return 1;
}

static void link_latencies(kb_sim *sim)
{
	size_t n = sim->n_lps;

	for (unsigned i = 0; i < sim->n_workers; i++)
		sim->workers[i].out_lat = KB_TIME_INF;
	if (link_latencies_runs(sim))
		return;
	sim->window = KB_TIME_INF;
	for (size_t i = 1; i < n; i++) {
		kb_worker *wi = sim->lps[i]->worker;

		for (size_t j = 0; j < i; j++) {
			kb_worker *wj = sim->lps[j]->worker;
			kb_time l;

			if (wi == wj)
				continue;
			l = kb__lp_link_latency(sim->lps[i], sim->lps[j]->id);
			if (l < wi->out_lat)
				wi->out_lat = l;
			if (l < wj->out_lat)
				wj->out_lat = l;
			if (l < sim->window)
				sim->window = l;
		}
	}
}

/* A worker whose every PE has an LP with a horizon hook (PEs whole on
 * workers) may look further ahead than its shortest link. */
static int collect_horizons(kb_sim *sim, const size_t *pe_index)
{
	size_t n = sim->n_lps, first = 0;

	for (unsigned i = 0; i < sim->n_workers; i++)
		sim->workers[i].covered = 1;
	while (first < n) {
		size_t end = first;
		int hooked = 0;

		while (end < n && pe_index[end] == pe_index[first])
			hooked |= sim->lps[end++]->type->horizon != NULL;
		if (!hooked)
			sim->lps[first]->worker->covered = 0;
		for (size_t i = first; hooked && i < end; i++) {
			kb_lp *lp = sim->lps[i];
			kb_worker *w = lp->worker;

			if (!lp->type->horizon)
				continue;
			if (w->n_hlps % 8 == 0) {
				kb_lp **h = realloc(w->hlps, (w->n_hlps + 8) * sizeof(*h));

				if (!h)
					return KB_ENOMEM;
				w->hlps = h;
			}
			w->hlps[w->n_hlps++] = lp;
		}
		first = end;
	}
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (sim->workers[i].covered)
			sim->horizons = 1;
	return KB_OK;
}

/* Worker count and LP placement. With fewer workers than LPs, whole PEs
 * stay on one worker (partitioning on the long PE-to-PE links, as SST
 * does), so the window is the PE-to-PE latency, or longer where the model
 * gives horizons; a worker with no PE would idle, so there are at most as
 * many workers as PEs. With a worker per LP (--threads 0, or N >= LPs)
 * the window is the engine-to-engine latency. Auto: a few workers per
 * core, at most one per PE (sequential on one core or one PE); busy
 * threads are never more than cores, whatever the worker count. */
static int place_lps(kb_sim *sim, kb_error *err)
{
	size_t n = sim->n_lps, n_pes = 0;
	unsigned nw;
	int per_lp;
	uint32_t last_pe = UINT32_MAX, last_cl = UINT32_MAX;
	size_t *pe_index = calloc(n ? n : 1, sizeof(*pe_index));

	if (!pe_index)
		return kb__err(err, KB_ENOMEM, "out of memory placing LPs");
	for (size_t i = 0; i < n; i++) {
		if (sim->lps[i]->pe != last_pe || sim->lps[i]->cluster != last_cl)
			n_pes++;
		last_pe = sim->lps[i]->pe;
		last_cl = sim->lps[i]->cluster;
		pe_index[i] = n_pes - 1;
	}
	sim->n_pes = (unsigned)n_pes;
	sim->ncpu = usable_cores();
	if (sim->cfg.threads == KB_SIM_THREADS_AUTO) {
		/* A few workers per core: the threads share them out window by
		 * window, which evens out uneven PEs and the coordinator's op_log
		 * work; no more, as every window visits every worker. */
		nw = sim->ncpu < 2 || n_pes < 2 ? 1 : AUTO_WORKERS_PER_CORE * sim->ncpu;
		if (nw > n_pes)
			nw = (unsigned)n_pes;
	} else
		nw = sim->cfg.threads <= 0 ? (unsigned)n : (unsigned)sim->cfg.threads;
	per_lp = nw >= n && nw > 1;
	if (!per_lp && sim->cfg.threads > 1) {
		/* N threads: N of them run, on a few workers each, as auto's do
		 * (N workers of whole PEs would leave a thread idle whenever
		 * its PEs have less work in a window than the other's). */
		if (sim->ncpu > (unsigned)sim->cfg.threads)
			sim->ncpu = (unsigned)sim->cfg.threads;
		nw = AUTO_WORKERS_PER_CORE * (unsigned)sim->cfg.threads;
	}
	if (per_lp)
		nw = (unsigned)(n ? n : 1);
	else if (nw > n_pes)
		nw = (unsigned)(n_pes ? n_pes : 1);
	if (posix_memalign((void **)&sim->workers, 64, nw * sizeof(*sim->workers)))
		sim->workers = NULL;
	if (sim->workers)
		memset(sim->workers, 0, nw * sizeof(*sim->workers));
	if (!sim->workers) {
		free(pe_index);
		return kb__err(err, KB_ENOMEM, "out of memory creating workers");
	}
	sim->n_workers = nw;
	for (size_t i = 0; i < n; i++) {
		size_t wi = per_lp ? i : pe_index[i] * nw / n_pes;

		sim->lps[i]->worker = &sim->workers[wi];
	}
	link_latencies(sim);
	/* Horizons answer for whole PEs: with a worker per LP, only where every
	 * PE is one LP. */
	sim->per_lp = per_lp;
	sim->pe_index = pe_index;
	if ((!per_lp || n_pes == n) && nw > 1 && collect_horizons(sim, pe_index))
		return kb__err(err, KB_ENOMEM, "out of memory placing LPs");
	return KB_OK;
}

/* The send shortcut (kb_lp local_lo, local_n): where every LP is on one
 * worker and no link is longer than the engine-to-engine one (one PE, or
 * all latencies equal, as in the synthetic model), each LP may skip the
 * destination's worker and link for a delay of at least that; else, where
 * a worker holds a PE whole (its LPs are consecutive: place_lps counts PEs
 * that way), a send within the PE with at least the engine-to-engine
 * latency may, which is what a decode run's sends almost all are, also a
 * sequential run of many PEs (a shortcut over every LP with the longest
 * link, between clusters, let none of them through: send_far took 6% of
 * such a run). */
static void set_shortcuts(kb_sim *sim)
{
	size_t n = sim->n_lps;
	int one_pe = 1, one_cluster = 1, one_worker = 1;
	kb_time lat;

	for (size_t i = 1; i < n; i++) {
		const kb_lp *a = sim->lps[0], *b = sim->lps[i];

		one_worker &= b->worker == a->worker;
		one_cluster &= b->cluster == a->cluster;
		one_pe &= b->cluster == a->cluster && b->pe == a->pe;
	}
	lat = sim->cfg.lat_pe;
	if (!one_pe && sim->cfg.lat_cluster > lat)
		lat = sim->cfg.lat_cluster;
	if (!one_cluster && sim->cfg.lat_global > lat)
		lat = sim->cfg.lat_global;
	for (size_t i = 0, j; i < n; i = j) {
		const kb_lp *first = sim->lps[i];
		int whole = 1;

		for (j = i + 1; j < n && sim->lps[j]->pe == first->pe &&
				sim->lps[j]->cluster == first->cluster; j++)
			whole &= sim->lps[j]->worker == first->worker;
		int all = one_worker && lat == sim->cfg.lat_pe;
		kb_time l = sim->cfg.lat_pe;

		for (size_t k = i; k < j; k++) {
			kb_lp *lp = sim->lps[k];

			lp->local_lo = all ? 0 : (uint32_t)i;
			lp->local_n = l > UINT32_MAX ? 0 : all ? (uint32_t)n :
				      whole ? (uint32_t)(j - i) : 0;
			lp->local_lat = l > UINT32_MAX ? 0 : (uint32_t)l;
		}
	}
}

/* A ring of size events (kb_worker), empty: its buffers, and the one
 * the running event takes. Only while no loop runs. */
static int ring_init(kb_worker *w, uint32_t size)
{
	kb_event *b = malloc((size + 1) * sizeof(*b));

	if (!b)
		return KB_ENOMEM;
	free(w->rbuf);
	w->rbuf = b;
	for (uint32_t i = 0; i < size; i++)
		w->ring[i] = &b[i];
	w->cur = &b[size];
	w->room = size - 1;
	w->nr = KB_RING_OFF;
	return KB_OK;
}

/* Room for one more LP on a worker. */
static int worker_room(kb_worker *w)
{
	kb_lp **m;

	if (w->n_lps < w->cap_lps)
		return KB_OK;
	if (!(m = kb__grow(w->members, &w->cap_lps, sizeof(*m), 8)))
		return KB_ENOMEM;
	w->members = m;
	return KB_OK;
}

/* Moves each pending event to the heap of its LP's worker, after LPs
 * changed workers. Each event stays in exactly one heap, also when
 * memory runs out (the destroy then discards each once). */
static int rehome_events(kb_sim *sim)
{
	int rc = KB_OK;

	for (unsigned k = 0; k < sim->n_workers; k++) {
		kb_worker *w = &sim->workers[k];
		kb_evheap *h = &w->heap;
		size_t keep = 0, i;

		for (i = 0; i < h->n; i++) {
			kb_evkey *x = &h->key[i];
			kb_worker *to = sim->lps[x->pair >> 32]->worker;

			if (to == w)
				h->key[keep++] = *x;
			else if (evheap_push(&to->heap, ev_at(h, x->slot))) {
				rc = KB_ENOMEM; /* it and the rest stay here */
				break;
			} else
				evheap_release(h, x->slot);
		}
		if (i < h->n) /* (h->key may be NULL: no event ever) */
			memmove(h->key + keep, h->key + i, (h->n - i) * sizeof(*h->key));
		h->n = keep + (h->n - i);
		if (rc)
			return rc;
	}
	/* The pushes above kept the heaps they went to in order; the kept
	 * events lost theirs. */
	for (unsigned k = 0; k < sim->n_workers; k++)
		evheap_heapify(&sim->workers[k].heap);
	return KB_OK;
}

/* Re-partitions the LPs between windows, every inbox drained (messages
 * wait in heaps only), bands closed: PEs whole, spread over the first
 * `groups` workers as place_lps spreads them (groups = n_pes: a worker
 * each; the others stay empty), with the links and horizons of that
 * partition; or every LP on worker 0 (groups 1), for the run to go on as
 * the sequential executor does. Workers keep their counts and node
 * pools. Which worker runs an LP never changes results. */
int kb__sim_regroup(kb_sim *sim, unsigned groups)
{
	for (unsigned i = 0; i < sim->n_workers; i++) {
		sim->workers[i].n_lps = 0;
		sim->workers[i].n_hlps = 0;
		sim->workers[i].covered = 0;
	}
	for (size_t i = 0; i < sim->n_lps; i++) {
		kb_lp *lp = sim->lps[i];
		kb_worker *w = &sim->workers[groups > 1 ? sim->pe_index[i] * groups / sim->n_pes : 0];

		if (worker_room(w))
			return KB_ENOMEM;
		lp->worker = w;
		w->members[w->n_lps++] = lp;
	}
	if (rehome_events(sim))
		return KB_ENOMEM;
	/* Workers of one LP had small rings; each now holds a PE or more. */
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (sim->workers[i].n_lps && sim->workers[i].room != KB_RING - 1 &&
		    ring_init(&sim->workers[i], KB_RING))
			return KB_ENOMEM;
	set_shortcuts(sim);
	sim->per_lp = 0;
	sim->horizons = 0;
	if (groups <= 1)
		return KB_OK;
	link_latencies(sim);
	return collect_horizons(sim, sim->pe_index);
}

static int build_workers(kb_sim *sim, kb_error *err)
{
	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_worker *w = &sim->workers[i];

		w->index = i;
		w->sim = sim;
		w->band[1].time = KB_TIME_INF;   /* no bands: their end */
		if (ring_init(w, sim->per_lp ? 2 : KB_RING))
			return kb__err(err, KB_ENOMEM, "out of memory building workers");
		__cds_wfcq_init(&sim->workers[i].ret_head, &sim->workers[i].ret_tail);
	}
	for (size_t i = 0; i < sim->n_lps; i++) {
		kb_worker *w = sim->lps[i]->worker;

		if (worker_room(w))
			return kb__err(err, KB_ENOMEM, "out of memory building workers");
		w->members[w->n_lps++] = sim->lps[i];
	}
	return KB_OK;
}

/* Deadlock: nothing pending, yet some LP has unfinished work. */
static int check_quiescence(kb_sim *sim, kb_error *err)
{
	char buf[512], msg[700] = "";
	size_t used = 0;
	int stuck = 0;

	for (size_t i = 0; i < sim->n_lps; i++) {
		kb_lp *lp = sim->lps[i];

		if (!lp->type->pending || !lp->type->pending(lp, buf, sizeof(buf)))
			continue;
		if (stuck++ < 3 && used < sizeof(msg))
			used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%spe%u.%s %s",
						 stuck > 1 ? "; " : "", lp->pe, lp->type->name, buf);
	}
	if (!stuck)
		return KB_OK;
	return kb__err(err, KB_EDEADLOCK,
		       "deadlock at t=%llu ps: nothing is pending, but %s%s",
		       (unsigned long long)sim->stats.end_time, msg,
		       stuck > 3 ? " (and more)" : "");
}

static int start_lps(kb_sim *sim, kb_error *err)
{
	for (size_t i = 0; i < sim->n_lps; i++) {
		kb_lp *lp = sim->lps[i];

		int rc = lp->type->start ? lp->type->start(lp) : KB_OK;

		if (rc && !lp->worker->err)
			kb__lp_fail(lp, rc, "start failed: %s", kb_strerror(rc));
		if (lp->worker->err) {
			kb__err_copy(err, &lp->worker->error);
			return lp->worker->err;
		}
	}
	return KB_OK;
}

int kb__sim_run(kb_sim *sim, kb_error *err)
{
	int rc;

	if (sim->ran)
		return kb__err(err, KB_ESTATE, "a simulation runs only once");
	sim->ran = 1;
	rc = place_lps(sim, err);
	if (!rc)
		rc = build_workers(sim, err);
	if (!rc)
		set_shortcuts(sim);
	/* A slab of message nodes per worker before the threads start, when
	 * there are workers to send to: one worker (a sequential run) sends
	 * none, and its slab cost it 24 KB of page faults (issue 13). Made
	 * here, not at a worker's first message: TSan cannot see liburcu's
	 * atomic append, and a slab made mid-run by whichever thread runs
	 * the worker gave it more producer-producer reports to make. */
	for (unsigned i = 0; !rc && sim->n_workers > 1 && i < sim->n_workers; i++)
		if (kb__worker_pool_init(&sim->workers[i]))
			rc = kb__err(err, KB_ENOMEM, "out of memory for message nodes");
	if (!rc)
		rc = start_lps(sim, err);
	if (rc)
		return rc;
	sim->stats.workers = sim->n_workers;
	sim->stats.window = sim->window;
	rc = sim->n_workers == 1 ? kb__exec_sequential(sim, err) : kb__exec_parallel(sim, err);
	for (unsigned i = 0; i < sim->n_workers; i++)
		sim->stats.events += sim->workers[i].events;
	if (!rc)
		rc = check_quiescence(sim, err);
	return rc;
}

/* Events a stopped run never delivered: let their type free what they own. */
static void discard_inbox(kb_lp *lp)
{
	kb_msgnode *n;

	while ((n = pop_node(&lp->inbox_head, &lp->inbox_tail))) {
		if (lp->type->discard)
			lp->type->discard(&n->ev);
	}
}

static void discard_heap(kb_sim *sim, const kb_evheap *h)
{
	for (size_t i = 0; i < h->n; i++) {
		const kb_lp_type *type = sim->lps[h->key[i].pair >> 32]->type;

		if (type->discard)
			type->discard(ev_at(h, h->key[i].slot));
	}
}

void kb__sim_destroy(kb_sim *sim)
{
	if (!sim)
		return;
	for (size_t i = 0; i < sim->n_lps; i++)
		discard_inbox(sim->lps[i]);
	for (unsigned i = 0; i < sim->n_workers; i++)
		discard_heap(sim, &sim->workers[i].heap);
	for (size_t i = 0; i < sim->n_lps; i++) {
		free_state(sim->lps[i]->type, sim->lps[i]->state);
		free(sim->lps[i]);
	}
	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb__worker_pool_free(&sim->workers[i]);
		evheap_free(&sim->workers[i].heap);
		free(sim->workers[i].rbuf);
		free(sim->workers[i].members);
		free(sim->workers[i].hlps);
	}
	free(sim->workers);
	free(sim->lps);
	free(sim->pe_index);
	free(sim);
}
