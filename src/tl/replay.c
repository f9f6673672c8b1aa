/* Composite replay (see replay.h). */
#include "tl/replay.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "num/math_op.h"
#include "tl/recipes.h"

#define N_TPL 16                 /* templates kept (opt3 lowers ten kinds a tile) */
_Static_assert(KB_RKEY_HANDLES + KB_REPLAY_ALLOCS <= 255, "patch handle indices are 8 bits");
#define N_SEEN 32
#define MAX_THRASH 64
#define TPL_MAX_OPS 16
#define TPL_MAX_PATCH (TPL_MAX_OPS * (KB_OP_MAX_OPERANDS + 1))
#define TPL_MAX_SET 64
#define TPL_MAX_ALL (KB_RKEY_HANDLES + KB_REPLAY_ALLOCS)
/* Templates and one-op MATH calls evicted while commands may still
 * point at their ops and digest (tpl.full, mcall.ref), kept until the
 * context ends: past this many, new ones keep no ops for commands to
 * point at (a kernel that cycles through more composites than N_TPL
 * makes few templates anyway). */
#define MAX_RETIRED 64

typedef struct tpl_alloc {
	kb_tview view;           /* its kb__tl_view_proto (kb__tl_new_tcm_view) */
	uint64_t size;           /* the TCM it takes: its bytes' kb__tcm_round */
} tpl_alloc;

/* A view to give a handle's id and address: its byte offset in the
 * command's ops (no op and operand to index at each replay), the handle
 * (the key's handles, then the allocations). */
typedef struct tpl_patch {
	uint16_t off;
	uint8_t h;
} tpl_patch;
_Static_assert(TPL_MAX_OPS * sizeof(kb_opspec) <= UINT16_MAX, "patch offsets are 16 bits");

/* A handle as a lowering read it (a one-op MATH call's, a snapshot's):
 * its shape, and its rank, space and dtype as the four bytes of its view
 * from rank on read them, but for the last (sig_eq). */
typedef struct msig {
	int64_t shape[KB_TL_MAX_RANK];
	uint32_t type;
} msig;

#define SNAP_POS (3 + 2 * KB_TL_MAX_ARGS)   /* the recipe's args, a, b, out, the epilogue op's args */
#define SNAP_NONE 0xffu

/*
 * The last call a template replayed by its key, where that call had at
 * most one recipe call and one epilogue op and only the library's own
 * names (decode opt3's three, opt2's two): what kb__replay_key read of it. A
 * later call with the very same names, flags, counts and scalars, whose
 * handles repeat at the same places and each is this one's or has its
 * rank, dtype, space and shape, has the same key: kb__replay_like checks
 * that in place, without building the key (~450 instructions a call)
 * and comparing it with each template's (issue 13).
 */
typedef struct tpl_snap {
	int ok;
	const char *op, *eop, *recipe;
	unsigned flags;
	kb_tl_scope scope;
	uint32_t n_pro, n_epi, n_ex, n_eex, n_pargs, n_args, n_pos;
	const char *ex_name[KB_TL_MAX_EXTRAS], *eex_name[KB_TL_MAX_EXTRAS], *arg_name[KB_TL_MAX_ARGS];
	const char *parg_name[KB_TL_MAX_ARGS];
	uint64_t ex_bits[KB_TL_MAX_EXTRAS], eex_bits[KB_TL_MAX_EXTRAS];
	const kb_tl_tensor *v[SNAP_POS];   /* each position's handle (NULL: absent) */
	uint8_t first[SNAP_POS];           /* first position with that handle; SNAP_NONE: absent */
	uint32_t gen[SNAP_POS];            /* its slot's generation, all 32 bits */
	msig sig[SNAP_POS];
} tpl_snap;

/*
 * A template: one allocation, its arrays sized to it and laid out in the
 * order a replay reads them (the key's words and names' addresses, the
 * allocations, patches and hazard sets, the digest, the ops), so that a
 * replay touches a few consecutive cache lines; templates whole, with
 * fixed-size arrays and the ops at ~420 bytes each, doubled opt3's L1
 * misses. The ops are packed: each op's header, output and operands, then
 * its extras, only as many operands and extras as it has.
 */
typedef struct tpl {
	uint32_t nw, nn, nh, n_alloc, n_patch;
	uint32_t n_rd, n_wait, n_wr;   /* set: see sets_distinct */
	uint32_t n_ops, n_rw;
	uint32_t room;           /* ids a replay's sets need: the larger of n_rd and n_wr */
	int result;              /* alloc that is the result; -1: the call's out */
	/* The allocations' TCM together where they are all scratch (no
	 * result among them) and two or more (temps_at_once); 0: not so. */
	uint64_t temps;
	uint64_t lbytes;
	uint64_t disp_ps;        /* its commands' dispatch ps (kb__tl_emit_ps); 0: not yet */
	const uint64_t *w;       /* the key's words */
	/* Each name's address where it is one of this library's own strings
	 * (read-only: the same address is the same text); NULL otherwise. */
	const char *const *fixed;
	const tpl_alloc *alloc;
	const tpl_patch *patch;
	const uint8_t *set;      /* the command's reads, then its writes (sets_distinct) */
	kb_cmd_dig *dig;
	const unsigned char *ops;
	const uint16_t *name_at; /* where each name starts in names */
	const char *names;       /* the names, each NUL-terminated, in order */
	/* The ops unpacked, as the full lowering's command has them (its
	 * views' ids and addresses that command's), or NULL: in a run
	 * without data memory (kb_tl_config.timing_only) a replay's command
	 * points at them and at dig instead of copying and patching them,
	 * ~450 instructions and 1-4 KB of block written a decode opt2
	 * command, which its scheduler then read back cold (issue 13). */
	const kb_opspec *full;
	int shared;              /* a command pointed at full: retire it, never free it while live */
	tpl_snap snap;           /* kb__replay_snap's; snap.ok 0: none */
} tpl;


#define N_MATH 32                /* opt3: seven a tile, a merge's more */

/* A one-op MATH call's op and digest for its commands to point at (as
 * tpl.full): a decode opt3 tile's seven wrote ~60 instructions each of
 * op fields, views and digest into their blocks. */
typedef struct mref {
	uint64_t dig[(sizeof(kb_cmd_dig) + sizeof(kb_opdig) + 7) / 8];   /* a kb_cmd_dig of one op */
	kb_opspec op;
} mref;

typedef struct mcall {
	uint16_t kind;           /* kb_math_kind */
	uint8_t n_in;            /* operands: a, or a and b */
	uint8_t auto_out;        /* no out given: a new TCM tensor like sig[2] */
	uint8_t fixed;           /* the name is the library's own for kind */
	uint8_t form;            /* bit 0: n_in 2, bit 1: auto_out (math_find's one test) */
	unsigned flags;
	msig sig[3];             /* a, b (n_in 2), out (given or made) */
	uint64_t out_size;       /* a made out's TCM: its bytes' kb__tcm_round */
	kb_tview out_view;       /* a made out's kb__tl_view_proto */
	const char *name[2];     /* operand names, as the full lowering set them */
	uint64_t lbytes;
	uint64_t disp_ps;        /* as tpl's */
	uint64_t dig[(sizeof(kb_cmd_dig) + sizeof(kb_opdig) + 7) / 8];   /* a kb_cmd_dig of one op */
	mref *ref;               /* NULL: none (see tpl.full) */
	int shared;              /* a command pointed at ref */
} mcall;

struct kb_replay {
	/* one-op MATH calls: their head names (by address) apart, scanned first */
	const char *mop[N_MATH];
	uint32_t mlast, mnext;
	uint64_t mfills, mhits;
	mcall m[N_MATH];
	uint64_t hash[N_TPL];    /* t[i]'s key hash */
	uint32_t last;           /* the template last replayed: a loop's next is the one after */
	tpl *t[N_TPL];           /* NULL: unused */
	uint32_t next;
	/* Keys seen once (their words' hash too): a template is made on the
	 * second full lowering of a key, so a kernel whose composites never
	 * repeat makes none. */
	uint64_t seen[N_SEEN];
	uint32_t next_seen;
	/* Templates made and replays: a kernel that cycles through more
	 * composites than N_TPL evicts each template before its next call;
	 * past MAX_THRASH fills with few replays it makes no more. */
	uint64_t fills, hits;
	uint64_t key_next, key_end;   /* dig_key's block: next key, its end */
	/* Evicted templates and MATH calls' mref that commands pointed at,
	 * freed with the context: a command may be in flight until the run
	 * ends. At most MAX_RETIRED when a shared one is made, so at most
	 * that and one per template and MATH call. */
	void *retired[MAX_RETIRED + N_TPL + N_MATH];
	uint32_t n_retired;
};

/* A context's replay state, made at its first template or one-op MATH
 * call: zeroed but for the MATH calls (m), each written when made, so
 * that a kernel's first calls touch only their own: a decode kernel
 * makes 7 to 12 of the 32, and calloc's zeroes were ~7 KB of fresh
 * memory a PE more (issue 13). An entry is read only below mfills. */
static kb_replay *replay_new(void)
{
	kb_replay *r = malloc(sizeof(*r));
	size_t end_m = offsetof(kb_replay, m) + sizeof(r->m);

	if (r) {
		memset(r, 0, offsetof(kb_replay, m));
		memset((char *)r + end_m, 0, sizeof(*r) - end_m);
	}
	return r;
}

/* Frees p, the memory of an evicted template or MATH call, or keeps it
 * to the end when a command pointed at it. */
static void retire(kb_replay *r, void *p, int shared)
{
	if (shared && r->n_retired < sizeof(r->retired) / sizeof(r->retired[0]))
		r->retired[r->n_retired++] = p;
	else if (!shared)
		free(p);
}

/* ---- keys ---- */

#define FNV_PRIME UINT64_C(0x100000001b3)

/* The key's size is bounded (KB_RKEY_WORDS, ...) for the calls
 * kb__replay_key accepts: no check per word. The hash covers the names'
 * addresses only, which tell most composites of a kernel apart; the words
 * are compared whole on a hash match. */
static inline void kw(kb_rkey *k, uint64_t x)
{
	k->w[k->nw++] = x;
}

static inline void kname(kb_rkey *k, const char *s)
{
	k->ok &= s != NULL;
	k->name[k->nn++] = s;
	k->hash = (k->hash ^ (uint64_t)(uintptr_t)s) * FNV_PRIME;
}

/* A handle: absent (NULL, where optional), or its rank, dtype, space and
 * shape and its index among the distinct handles named so far. */
static void khandle(kb_tl *tl, kb_rkey *k, const kb_tl_tensor *t, int optional)
{
	kb_hslot *h;
	uint64_t *w;
	uint32_t j;

	if (!t) {
		k->ok &= optional;
		kw(k, 0);
		return;
	}
	h = kb__tl_slot_find(tl, t);
	if (!h) {
		k->ok = 0;
		return;
	}
	for (j = 0; j < k->nh && k->h[j] != h; j++)
		;
	if (j == k->nh)
		k->h[k->nh++] = h;
	w = k->w + k->nw;
	w[0] = 1u | (uint64_t)h->view.rank << 8 | (uint64_t)h->view.dtype << 16 |
	       (uint64_t)h->view.space << 24 | (uint64_t)j << 32;
	for (int i = 0; i < h->view.rank; i++)
		w[1 + i] = (uint64_t)h->view.shape[i];
	k->nw += 1u + h->view.rank;
}

static void kargs(kb_tl *tl, kb_rkey *k, const kb_tl_arg *args)
{
	int n = 0;

	for (; n < KB_TL_MAX_ARGS && args[n].name && k->ok; n++) {
		kname(k, args[n].name);
		khandle(tl, k, args[n].t, 0);
	}
	kw(k, (uint64_t)n);
}

static void kextras(kb_rkey *k, const kb_tl_extra *ex)
{
	int n = 0;

	for (; n < KB_TL_MAX_EXTRAS && ex[n].name; n++) {
		uint64_t bits;

		memcpy(&bits, &ex[n].value, sizeof(bits));
		kname(k, ex[n].name);
		kw(k, bits);
	}
	kw(k, (uint64_t)n);
}

void kb__replay_key(kb_tl *tl, const kb_tl_composite_desc *d, kb_rkey *k)
{
	k->ok = 1;
	k->nw = k->nn = k->nh = 0;
	k->hash = UINT64_C(0xcbf29ce484222325);
	k->out = d->out;
	/* out_hbm's range is checked against its address: not from a key. */
	if (d->out_hbm || (d->n_prologue && !d->prologue) || (d->n_epilogue && !d->epilogue) ||
	    d->n_prologue > KB_RKEY_CALLS || d->n_epilogue > KB_RKEY_CALLS) {
		k->ok = 0;
		return;
	}
	kname(k, d->op);
	kw(k, d->flags);
	kw(k, (uint64_t)d->n_prologue);
	kw(k, (uint64_t)d->n_epilogue);
	kextras(k, d->extras);
	for (size_t i = 0; i < d->n_prologue && k->ok; i++) {
		kname(k, d->prologue[i].recipe);
		kargs(tl, k, d->prologue[i].args);
	}
	khandle(tl, k, d->a, 1);
	khandle(tl, k, d->b, 1);
	khandle(tl, k, d->out, 1);
	for (size_t i = 0; i < d->n_epilogue && k->ok; i++) {
		const kb_tl_op *e = &d->epilogue[i];

		kname(k, e->op);
		kw(k, (uint64_t)e->scope);
		kargs(tl, k, e->args);
		kextras(k, e->extras);
	}
}

/* ---- templates ---- */

/* Names as strings: a kernel may pass the same buffer with other text;
 * but not the same address of one of the library's strings, which a
 * kernel built with it passes (the linker merges equal literals). */
static int names_equal(const tpl *t, const kb_rkey *k)
{
	for (uint32_t i = 0; i < k->nn; i++)
		if (k->name[i] != t->fixed[i] && strcmp(k->name[i], t->names + t->name_at[i]) != 0)
			return 0;
	return 1;
}

/* Whether s is the address of one of the names the library itself
 * holds: op kinds, recipes and their operands, epilogue operands, extras. */
static int library_name(const char *s)
{
	static const char *const own[] = { "gemm", "other", "bias", "src_b", "src_c", "scale" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (s == own[i])
			return 1;
	for (int k = 0; k < KB_MATH_KIND_COUNT; k++)
		if (s == kb__math_kind_name((kb_math_kind)k))
			return 1;
	for (size_t i = 0; i < kb__recipe_count(); i++) {
		const kb_recipe *r = kb__recipe_get(i);

		if (s == r->name)
			return 1;
		for (int k = 0; k < KB_RECIPE_MAX_OPERANDS && r->operands[k].name; k++)
			if (s == r->operands[k].name)
				return 1;
	}
	return 0;
}

/* Templates in use: t[0..tpl_used) (made in turn, the oldest replaced). */
static inline uint32_t tpl_used(const kb_replay *r)
{
	return r->next < N_TPL ? r->next : N_TPL;
}

/* The template i after the last replayed, n = 1..tpl_used: a loop's next
 * call is the one after (only templates in use: a kernel of three
 * composites went round all sixteen entries per call). */
static inline uint32_t tpl_nth(const kb_replay *r, uint32_t n, uint32_t used)
{
	uint32_t i = r->last + n;   /* last < used, n <= used */

	return i < used ? i : i - used;
}

static tpl *find(kb_replay *r, const kb_rkey *k)
{
	uint32_t used = tpl_used(r);

	for (uint32_t n = 1; n <= used; n++) {
		uint32_t i = tpl_nth(r, n, used);
		tpl *t = r->t[i];

		if (r->hash[i] == k->hash && t && t->nw == k->nw && t->nn == k->nn &&
		    t->nh == k->nh && memcmp(t->w, k->w, k->nw * sizeof(k->w[0])) == 0 &&
		    names_equal(t, k)) {
			r->last = i;
			return t;
		}
	}
	return NULL;
}

/*
 * kb__cmd_sets for handles known distinct, as a template keeps them: c's
 * reads are hs[rd[i]], the first n_wait read-only (an implicit wait for
 * their producers), its writes hs[wr[i]]; then c is their last writer. Its
 * sets empty, with room for them (the full lowering's had). No search for
 * repeats but among producers (two handles may have one), which was most
 * of kb__cmd_sets' ~120 instructions a decode command (issue 13).
 */
static inline void sets_distinct(kb_cmd *c, kb_hslot *const *hs, const uint8_t *rd, uint32_t n_rd,
				 uint32_t n_wait, const uint8_t *wr, uint32_t n_wr)
{
	uint64_t fence = 0, sr = 0, sw = 0;
	uint32_t nd = 0;

	for (uint32_t i = 0; i < n_rd; i++) {
		const kb_hslot *h = hs[rd[i]];

		fence = h->fence > fence ? h->fence : fence;
		c->reads[i] = h->view.id;
		sr = kb__hazard_set(sr, h->view.id);
		if (i < n_wait && h->writer >= 0) {
			uint32_t j = 0;

			while (j < nd && c->deps[j] != (uint64_t)h->writer)
				j++;
			if (j == nd)
				c->deps[nd++] = (uint64_t)h->writer;
		}
	}
	/* the reads' producers are known: c is its writes' producer now */
	for (uint32_t i = 0; i < n_wr; i++) {
		kb_hslot *h = hs[wr[i]];

		fence = h->fence > fence ? h->fence : fence;
		c->writes[i] = h->view.id;
		sw = kb__hazard_set(sw, h->view.id);
		h->writer = (int64_t)c->id;
	}
	c->n_reads = n_rd;
	c->n_deps = nd;
	c->n_writes = n_wr;
	c->fence = fence;
	kb__tl_sig(c, sr, sw);
}

/* t's allocations, all recipe scratch (t->temps), at once where the
 * block at the cursor holds them all (kb__tcm_alloc_all): what
 * replay_tpl's loop makes of them one by one, in order, the TCM's
 * fast path and the scope's room test once, not per tensor (a decode
 * opt2 tile's five). In hs and tmp; -1: not so, nothing done. */
static inline int temps_at_once(kb_tl *tl, const tpl *t, kb_hslot **hs, kb_hslot *tmp)
{
	kb_scope *s = tl->scope;
	uint64_t off, fence;

	if (s->cap - s->n < 2 * (size_t)t->n_alloc ||
	    kb__tcm_alloc_all(&tl->tcm, t->temps, &off, &fence))
		return -1;
	for (uint32_t i = 0; i < t->n_alloc; i++) {
		hs[i] = kb__tl_temp_at(tl, s, off, t->alloc[i].size, fence, &tmp[i]);
		off += t->alloc[i].size;
	}
	return 0;
}

/* Lowers and emits the call whose key's handles k holds by template t;
 * its allocations go after them in k->h. */
static void replay_tpl(kb_tl *tl, tpl *t, kb_rkey *k, kb_tl_tensor **res)
{
	kb_hslot **hs = k->h, tmp[KB_REPLAY_ALLOCS];
	const unsigned char *from;
	int by_ref = t->full && tl->cfg.timing_only;
	kb_cmd *c;

	*res = NULL;
	/* In the full lowering's order: the command, then the allocations.
	 * Room for its own ops and sets only, not the full lowering's
	 * (kb_replay_src's max_ops, cap_ids): the block's ids and ops then follow the
	 * digest with no gaps of unused room between them, a line or two
	 * less a command to write and read (issue 13). deps has at most
	 * n_wait <= n_rd. */
	c = kb__tl_cmd_new_n(tl, KB_CMD_COMPOSITE, by_ref ? KB_CMD_OPS_ELSEWHERE : t->n_ops, t->room);
	if (!c)
		return;
	/* The result a handle, the others (recipe scratch no kernel can
	 * name) what the command needs of a handle only; scratch alone all
	 * at once where it can (then none is left to make here). */
	for (uint32_t i = t->temps && !temps_at_once(tl, t, hs + k->nh, tmp) ? t->n_alloc : 0;
	     i < t->n_alloc; i++) {
		kb_hslot *h = (int)i == t->result
			? kb__tl_new_tcm_view(tl, &t->alloc[i].view, t->alloc[i].size, res)
			: kb__tl_new_tcm_temp(tl, &t->alloc[i].view, t->alloc[i].size, &tmp[i]);

		if (!h) {
			kb__cmd_free(c);
			return;
		}
		hs[k->nh + i] = h;
	}
	if (t->result < 0)
		*res = k->out;
	if (by_ref) {
		/* the views' ids and addresses stale: nothing reads them; the
		 * header not zeroed (KB_CMD_OPS_ELSEWHERE): every field is
		 * written here, by kb__tl_cmd_new_n, the sets and the emit */
		c->ops = (kb_opspec *)(uintptr_t)t->full;
		c->dig = t->dig;
		t->shared = 1;
		goto sets;
	}
	/* Only what each op uses (as the full lowering writes it): an op is
	 * ~420 bytes, and copying them whole was 2% of decode opt2. */
	/* Operands and extras by the struct, not by memcpy: a call each of
	 * a variable size was ~25 instructions, twice an op (opt2's merge
	 * composite has ten); the packed template keeps them 8-aligned. */
	from = t->ops;
	for (uint32_t i = 0; i < t->n_ops; i++) {
		kb_opspec *to = &c->ops[i];
		/* the counts in locals: read back from *to, each store made
		 * the compiler load them again */
		uint32_t no = from[offsetof(kb_opspec, n_operands)], nx = from[offsetof(kb_opspec, n_extras)];
		const kb_operand *o;
		const kb_scalar *x;

		memcpy(to, from, offsetof(kb_opspec, operands));
		o = (const kb_operand *)(const void *)(from + offsetof(kb_opspec, operands));
		for (uint32_t j = 0; j < no; j++)
			to->operands[j] = o[j];
		x = (const kb_scalar *)(const void *)(o + no);
		for (uint32_t j = 0; j < nx; j++)
			to->extras[j] = x[j];
		from = (const unsigned char *)(x + nx);
	}
	for (uint32_t i = 0; i < t->n_patch; i++) {
		kb_tview *v = (kb_tview *)(void *)((char *)c->ops + t->patch[i].off);
		const kb_hslot *h = hs[t->patch[i].h];

		v->id = h->view.id;
		v->addr = h->view.addr;
	}
	kb__cmd_put_digest(c, t->dig, t->n_ops);
sets:
	c->n_ops = t->n_ops;
	c->n_rw = t->n_rw;
	c->lbytes = t->lbytes;
	sets_distinct(c, hs, t->set, t->n_rd, t->n_wait, t->set + t->n_rd, t->n_wr);
	/* its first replay works out what every other's dispatch takes */
	if (!t->disp_ps)
		t->disp_ps = kb__tl_disp_ps(tl, c);
	if (kb__tl_emit_ps(tl, c, t->disp_ps))
		*res = NULL;
}

int kb__replay_run(kb_replay **rp, kb_tl *tl, kb_rkey *k, kb_tl_tensor **res)
{
	tpl *t = *rp ? find(*rp, k) : NULL;

	if (!t)
		return 0;
	(*rp)->hits++;
	replay_tpl(tl, t, k, res);
	return 1;
}

/* ---- calls like a template's last (tpl_snap) ---- */

static inline uint64_t value_bits(double v)
{
	uint64_t b;

	memcpy(&b, &v, sizeof(b));
	return b;
}

static inline int sig_eq(const msig *s, const kb_tview *v);
static void sig_set(msig *s, const kb_tview *v);

/* Keeps extras ex in kextras's order. */
static void snap_extras(const kb_tl_extra *ex, const char **name, uint64_t *bits, uint32_t *n)
{
	for (*n = 0; *n < KB_TL_MAX_EXTRAS && ex[*n].name; (*n)++) {
		name[*n] = ex[*n].name;
		bits[*n] = value_bits(ex[*n].value);
	}
}

static inline int extras_eq(const kb_tl_extra *ex, const char *const *name, const uint64_t *bits,
			    uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (ex[i].name != name[i] || value_bits(ex[i].value) != bits[i])
			return 0;
	return n == KB_TL_MAX_EXTRAS || !ex[n].name;
}

/* The handles of d (at most one recipe call and one epilogue op) in
 * kb__replay_key's order: the recipe's args, a, b, out, the epilogue
 * op's args. Inline: a call, its frame and v's stores and loads around
 * it were ~20 of snap_match's instructions, three a decode opt3 tile. */
static inline __attribute__((always_inline)) uint32_t call_handles(const kb_tl_composite_desc *d, const kb_tl_tensor **v)
{
	uint32_t n = 0;

	if (d->n_prologue)
		for (int i = 0; i < KB_TL_MAX_ARGS && d->prologue->args[i].name; i++)
			v[n++] = d->prologue->args[i].t;
	v[n++] = d->a;
	v[n++] = d->b;
	v[n++] = d->out;
	if (d->n_epilogue)
		for (int i = 0; i < KB_TL_MAX_ARGS && d->epilogue->args[i].name; i++)
			v[n++] = d->epilogue->args[i].t;
	return n;
}

void kb__replay_snap(kb_replay *r, kb_tl *tl, const kb_tl_composite_desc *d, const kb_rkey *k)
{
	tpl *t = r ? r->t[r->last] : NULL;
	tpl_snap *s;

	if (!t || d->n_prologue > 1 || d->n_epilogue > 1)
		return;
	s = &t->snap;
	s->ok = 0;
	/* the library's own names only: the same address is the same text */
	for (uint32_t i = 0; i < k->nn; i++)
		if (k->name[i] != t->fixed[i])
			return;
	s->op = d->op;
	s->flags = d->flags;
	s->n_epi = (uint32_t)d->n_epilogue;
	snap_extras(d->extras, s->ex_name, s->ex_bits, &s->n_ex);
	s->n_pro = (uint32_t)d->n_prologue;
	s->n_pargs = 0;
	if (d->n_prologue) {
		const kb_tl_recipe_call *rc = d->prologue;

		s->recipe = rc->recipe;
		while (s->n_pargs < KB_TL_MAX_ARGS && rc->args[s->n_pargs].name) {
			s->parg_name[s->n_pargs] = rc->args[s->n_pargs].name;
			s->n_pargs++;
		}
	}
	s->n_args = 0;
	if (d->n_epilogue) {
		const kb_tl_op *e = d->epilogue;

		s->eop = e->op;
		s->scope = e->scope;
		while (s->n_args < KB_TL_MAX_ARGS && e->args[s->n_args].name) {
			s->arg_name[s->n_args] = e->args[s->n_args].name;
			s->n_args++;
		}
		snap_extras(e->extras, s->eex_name, s->eex_bits, &s->n_eex);
	}
	s->n_pos = call_handles(d, s->v);
	for (uint32_t p = 0; p < s->n_pos; p++) {
		const kb_hslot *h;
		uint32_t f = 0;

		s->first[p] = SNAP_NONE;
		if (!s->v[p])
			continue;
		while (s->v[f] != s->v[p])
			f++;
		s->first[p] = (uint8_t)f;
		if (f == p) {
			if (!(h = kb__tl_slot_find(tl, s->v[p])))
				return;
			s->gen[p] = h->gen;
			sig_set(&s->sig[p], &h->view);
		}
	}
	s->ok = 1;
}

/* Whether d is like t's snapshot (tpl_snap), with k's handles and out
 * set as kb__replay_key would set them when it is. */
static int snap_match(kb_tl *tl, const tpl_snap *s, const kb_tl_composite_desc *d, kb_rkey *k)
{
	const kb_tl_tensor *v[SNAP_POS];
	uint32_t n = 0;
	uint16_t mark;

	if (d->op != s->op || d->flags != s->flags || d->n_epilogue != s->n_epi ||
	    d->n_prologue != s->n_pro || !extras_eq(d->extras, s->ex_name, s->ex_bits, s->n_ex))
		return 0;
	/* d's handles in call_handles' order, taken as their args' names
	 * are compared, not in a second walk over the args (call_handles):
	 * as many as the snapshot's positions (s->n_pos), its arg counts */
	if (s->n_pro) {
		const kb_tl_recipe_call *rc = d->prologue;

		if (!rc || rc->recipe != s->recipe)
			return 0;
		for (uint32_t i = 0; i < s->n_pargs; i++) {
			if (rc->args[i].name != s->parg_name[i])
				return 0;
			v[n++] = rc->args[i].t;
		}
		if (s->n_pargs < KB_TL_MAX_ARGS && rc->args[s->n_pargs].name)
			return 0;
	}
	v[n++] = d->a;
	v[n++] = d->b;
	v[n++] = d->out;
	if (s->n_epi) {
		const kb_tl_op *e = d->epilogue;

		if (!e || e->op != s->eop || e->scope != s->scope ||
		    !extras_eq(e->extras, s->eex_name, s->eex_bits, s->n_eex))
			return 0;
		for (uint32_t i = 0; i < s->n_args; i++) {
			if (e->args[i].name != s->arg_name[i])
				return 0;
			v[n++] = e->args[i].t;
		}
		if (s->n_args < KB_TL_MAX_ARGS && e->args[s->n_args].name)
			return 0;
	}
	k->nh = 0;
	/* Each handle's first position as the snapshot's: a repeat is its
	 * first position's handle; a first one is none of those before,
	 * which the mark tells (a handle met before in this match has it:
	 * two live handle values of one slot cannot be, and an old mark
	 * that wrapped round to this one only makes the call miss). Where
	 * each position's first was searched for among those before, that
	 * was ~120 instructions of decode opt2's second composite. */
	mark = ++tl->mark ? tl->mark : ++tl->mark;   /* 0: a slot's first */
	for (uint32_t p = 0; p < n; p++) {
		uint32_t f = s->first[p];
		kb_hslot *h;

		if (!v[p] || f == SNAP_NONE) {
			if (v[p] || f != SNAP_NONE)
				return 0;
			continue;
		}
		if (f < p) {
			if (v[f] != v[p])
				return 0;
			continue;   /* a repeat: checked where it first came */
		}
		/* The same handle (live, and not a slot reused 2^16 times
		 * since, which a handle's value cannot tell) has the same view. */
		if (!(h = kb__tl_slot_find(tl, v[p])) || h->mark == mark ||
		    ((v[p] != s->v[p] || h->gen != s->gen[p]) && !sig_eq(&s->sig[p], &h->view)))
			return 0;
		h->mark = mark;
		k->h[k->nh++] = h;
	}
	k->out = d->out;
	return 1;
}

int kb__replay_like(kb_replay **rp, kb_tl *tl, const kb_tl_composite_desc *d, kb_rkey *k,
		    kb_tl_tensor **res)
{
	kb_replay *r = *rp;
	uint32_t used;

	if (!r || d->n_prologue > 1 || d->out_hbm || d->n_epilogue > 1)
		return 0;
	used = tpl_used(r);
	for (uint32_t n = 1; n <= used; n++) {
		uint32_t i = tpl_nth(r, n, used);
		tpl *t = r->t[i];

		if (t && t->snap.ok && snap_match(tl, &t->snap, d, k)) {
			r->last = i;
			r->hits++;
			replay_tpl(tl, t, k, res);
			return 1;
		}
	}
	return 0;
}

/* Index of h among the key's handles and the allocations; -1: none. */
static int index_of(kb_hslot *const *all, uint32_t n, const kb_hslot *h)
{
	for (uint32_t i = 0; i < n; i++)
		if (all[i] == h)
			return (int)i;
	return -1;
}

static int id_index(kb_hslot *const *all, uint32_t n, uint64_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (all[i]->view.id == id)
			return (int)i;
	return -1;
}

/* Appends to the set to[0..*n) the indices of from's handles not in it
 * yet (as kb__cmd_sets leaves ids once, in order). -1: one is not in all. */
static int set_of(uint8_t *to, uint32_t *n, kb_hslot *const *from, uint32_t n_from,
		  kb_hslot *const *all, uint32_t n_all)
{
	for (uint32_t i = 0; i < n_from; i++) {
		int j = index_of(all, n_all, from[i]);
		uint32_t x = 0;

		if (j < 0)
			return -1;
		while (x < *n && to[x] != (uint8_t)j)
			x++;
		if (x == *n)
			to[(*n)++] = (uint8_t)j;
	}
	return 0;
}

/* The packed size of op (see tpl). */
static size_t packed_size(const kb_opspec *op)
{
	return offsetof(kb_opspec, operands) + op->n_operands * sizeof(kb_operand) +
	       op->n_extras * sizeof(kb_scalar);
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/*
 * Digest keys, unique in the process (contexts run on several threads):
 * a context takes them in blocks of 2^DIG_KEY_BITS, so that its own keys
 * are consecutive however many contexts take keys in between. A PE's
 * plan memo (plan.c) is direct-mapped by the key's low bits, and with
 * one counter for all contexts, a multi-PE decode's kernel (its MATH
 * keys at its first tile, its templates' at the second, other kernels'
 * keys between) had keys that met in one entry and replaced each other
 * for every command (opt3 H_kv=8 P=4 C=4 S_kv=16384: 6,350 plans and
 * their costs worked out anew for 25,048 commands, issue 13).
 */
#define DIG_KEY_BITS 20
static _Atomic uint64_t next_dig_block = 1;

static uint64_t dig_key(kb_replay *r)
{
	if (r->key_next == r->key_end) {
		uint64_t b = atomic_fetch_add_explicit(&next_dig_block, 1, memory_order_relaxed);

		r->key_next = b << DIG_KEY_BITS;
		r->key_end = r->key_next + (UINT64_C(1) << DIG_KEY_BITS);
	}
	return r->key_next++;
}

/* A template of the call keyed k, lowered as s says; NULL when s does
 * not fit one (or out of memory). */
static tpl *tpl_make(kb_replay *r, const kb_rkey *k, const kb_replay_src *s)
{
	/* ops for commands to point at, while retiring templates has room */
	size_t full = r->n_retired < MAX_RETIRED ? s->cmd->n_ops * sizeof(kb_opspec) : 0;
	const kb_cmd *c = s->cmd;
	kb_hslot *all[TPL_MAX_ALL];
	uint32_t n_all = k->nh + s->n_alloc, n_patch = 0;
	/* rw handles are in both sets */
	uint32_t n_set = s->n_reads + 2 * s->n_rw + s->n_writes;
	tpl_patch patch[TPL_MAX_PATCH];
	size_t names = 0, ops = 0, off, size;
	int result = -1;
	unsigned char *b;
	tpl *t;

	memcpy(all, k->h, k->nh * sizeof(all[0]));
	memcpy(all + k->nh, s->alloc, s->n_alloc * sizeof(all[0]));
	for (uint32_t i = 0; i < c->n_ops; i++) {
		const kb_opspec *op = &c->ops[i];

		for (int o = -1; o < op->n_operands; o++) {
			const kb_tview *v = o < 0 ? &op->out : &op->operands[o].t;
			int j;

			if (o < 0 && !v->id)
				continue;   /* an op without an output of its own */
			j = id_index(all, n_all, v->id);
			if (j < 0 || all[j]->view.addr != v->addr)
				return NULL;
			patch[n_patch++] = (tpl_patch){ (uint16_t)((const char *)v - (const char *)c->ops),
							 (uint8_t)j };
		}
		ops += packed_size(op);
	}
	if (s->result != k->out || !k->out) {
		for (uint32_t i = 0; i < s->n_alloc && result < 0; i++)
			if (s->alloc_t[i] == s->result)
				result = (int)i;
		if (result < 0)
			return NULL;
	}
	for (uint32_t i = 0; i < k->nn; i++)
		names += strlen(k->name[i]) + 1;
	if (names > UINT16_MAX || n_set > 3 * TPL_MAX_SET)
		return NULL;
	/* the header, then each array in the order a replay reads them */
	size = align8(sizeof(tpl)) + k->nw * sizeof(uint64_t) + k->nn * sizeof(char *) +
	       s->n_alloc * sizeof(tpl_alloc) + align8(n_patch * sizeof(tpl_patch) + n_set) +
	       kb__cmd_dig_size(c->n_ops) + ops + align8(k->nn * sizeof(uint16_t)) + align8(names) +
	       full;
	if (!(b = malloc(size)))
		return NULL;
	t = (tpl *)(void *)b;
	off = align8(sizeof(tpl));
	t->w = memcpy(b + off, k->w, k->nw * sizeof(uint64_t));
	off += k->nw * sizeof(uint64_t);
	{
		const char **fixed = (const char **)(void *)(b + off);

		for (uint32_t i = 0; i < k->nn; i++)
			fixed[i] = library_name(k->name[i]) ? k->name[i] : NULL;
		t->fixed = fixed;
		off += k->nn * sizeof(char *);
	}
	{
		tpl_alloc *al = (tpl_alloc *)(void *)(b + off);

		for (uint32_t i = 0; i < s->n_alloc; i++) {
			const kb_tview *v = &s->alloc[i]->view;

			kb__tl_view_proto(&al[i].view, KB_SPACE_TCM, (kb_dtype)v->dtype, v->rank,
					  v->shape);
			al[i].size = kb__tcm_round(s->alloc[i]->alloc_size);
		}
		t->alloc = al;
		off += s->n_alloc * sizeof(tpl_alloc);
	}
	t->patch = memcpy(b + off, patch, n_patch * sizeof(tpl_patch));
	off += n_patch * sizeof(tpl_patch);
	{
		/* kb__cmd_sets' sets: reads (a wait each), rw handles in reads
		 * and writes, writes; distinct handles have distinct ids */
		uint8_t *set = b + off, wr[3 * TPL_MAX_SET];

		t->n_rd = t->n_wr = 0;
		if (set_of(set, &t->n_rd, s->reads, s->n_reads, all, n_all)) {
			free(b);
			return NULL;
		}
		t->n_wait = t->n_rd;
		if (set_of(set, &t->n_rd, s->rw, s->n_rw, all, n_all) ||
		    set_of(wr, &t->n_wr, s->rw, s->n_rw, all, n_all) ||
		    set_of(wr, &t->n_wr, s->writes, s->n_writes, all, n_all) ||
		    t->n_rd > s->cap_ids || t->n_wr > s->cap_ids) {
			free(b);
			return NULL;
		}
		memcpy(set + t->n_rd, wr, t->n_wr);
		t->set = set;
		off = align8(off + n_set);
	}
	{
		kb_cmd_dig *dig = memcpy(b + off, c->dig, kb__cmd_dig_size(c->n_ops));

		/* Its replays share the digest: PE_SCHEDULER plans them alike. */
		dig->key = dig_key(r);
		t->dig = dig;
		off += kb__cmd_dig_size(c->n_ops);
	}
	t->ops = b + off;
	for (uint32_t i = 0; i < c->n_ops; i++) {
		const kb_opspec *op = &c->ops[i];
		size_t n = offsetof(kb_opspec, operands) + op->n_operands * sizeof(kb_operand);

		memcpy(b + off, op, n);
		off += n;
		memcpy(b + off, op->extras, op->n_extras * sizeof(kb_scalar));
		off += op->n_extras * sizeof(kb_scalar);
	}
	{
		uint16_t *at = (uint16_t *)(void *)(b + off);
		char *text = (char *)b + off + align8(k->nn * sizeof(uint16_t));
		size_t used = 0;

		for (uint32_t i = 0; i < k->nn; i++) {
			size_t len = strlen(k->name[i]) + 1;

			at[i] = (uint16_t)used;
			memcpy(text + used, k->name[i], len);
			used += len;
		}
		t->name_at = at;
		t->names = text;
		off += align8(k->nn * sizeof(uint16_t)) + align8(names);
	}
	/* whole, unused operands and extras too: kb_opspec's alignment is 8 */
	t->full = full ? memcpy(b + off, c->ops, full) : NULL;
	t->shared = 0;
	t->nw = k->nw;
	t->nn = k->nn;
	t->nh = k->nh;
	t->n_alloc = s->n_alloc;
	t->n_patch = n_patch;
	t->room = t->n_rd > t->n_wr ? t->n_rd : t->n_wr;
	if (!t->room)
		t->room = 1;
	t->n_ops = c->n_ops;
	t->n_rw = c->n_rw;
	t->result = result;
	t->temps = 0;
	if (result < 0 && s->n_alloc >= 2)
		for (uint32_t i = 0; i < s->n_alloc; i++)
			t->temps += t->alloc[i].size;
	t->lbytes = c->lbytes;
	t->disp_ps = 0;
	t->snap.ok = 0;
	return t;
}

void kb__replay_save(kb_replay **rp, const kb_rkey *k, const kb_replay_src *s)
{
	kb_replay *r = *rp;
	uint64_t full = k->hash;
	uint32_t i;
	int seen = 0;

	if (!k->ok || s->alloc_over || !s->cmd->dig || s->cmd->n_ops > TPL_MAX_OPS ||
	    k->nh + s->n_alloc > TPL_MAX_ALL)
		return;
	if (!r && !(r = *rp = replay_new()))
		return;
	if (r->fills >= MAX_THRASH && r->hits < 4 * r->fills)
		return;
	/* k->hash covers the names only (enough to find a template); a key
	 * seen is its words too: one shape after another is not a repeat. */
	for (i = 0; i < k->nw; i++)
		full = (full ^ k->w[i]) * FNV_PRIME;
	for (i = 0; i < N_SEEN && !seen; i++)
		seen = r->seen[i] == full;
	if (!seen) {
		r->seen[r->next_seen++ % N_SEEN] = full;
		return;
	}
	r->fills++;
	i = r->next++ % N_TPL;
	if (r->t[i])
		retire(r, r->t[i], r->t[i]->shared);
	r->t[i] = tpl_make(r, k, s);
	r->hash[i] = k->hash;
}

/* ---- one-op MATH calls ---- */

/* Every shape word, with no branch per word or loop by rank: a handle's
 * view is zero beyond its rank (kb__tl_view_proto), and so is a
 * signature (sig_set). A view that were not would only miss. Rank, space
 * and dtype, three bytes in a row, in one load of four, the fourth (the
 * view's padding) masked off: byte by byte they were half of sig_eq's
 * ~20 instructions a handle, three a decode MATH call. */
_Static_assert(KB_TL_MAX_RANK == 4, "sig_eq compares four shape words");
_Static_assert(offsetof(kb_tview, space) == offsetof(kb_tview, rank) + 1 &&
		       offsetof(kb_tview, dtype) == offsetof(kb_tview, rank) + 2 &&
		       offsetof(kb_tview, rank) + 4 <= sizeof(kb_tview),
	       "sig_eq reads rank, space and dtype as one word");

/* The word's first three bytes in memory, whatever the byte order. */
static inline uint32_t type_mask(void)
{
	static const unsigned char m[4] = { 0xff, 0xff, 0xff, 0 };
	uint32_t w;

	memcpy(&w, m, sizeof(w));
	return w;
}

static inline uint32_t type_word(const kb_tview *v)
{
	uint32_t w;

	memcpy(&w, &v->rank, sizeof(w));
	return w & type_mask();
}

static inline int sig_eq(const msig *s, const kb_tview *v)
{
	uint64_t x = (uint64_t)(s->shape[0] ^ v->shape[0]) | (uint64_t)(s->shape[1] ^ v->shape[1]) |
		     (uint64_t)(s->shape[2] ^ v->shape[2]) | (uint64_t)(s->shape[3] ^ v->shape[3]);

	return (x | (uint64_t)(s->type ^ type_word(v))) == 0;
}

static void sig_set(msig *s, const kb_tview *v)
{
	s->type = type_word(v);
	for (int i = 0; i < KB_TL_MAX_RANK; i++)
		s->shape[i] = i < v->rank ? v->shape[i] : 0;
}

/* The call a full lowering found valid with these very shapes, dtypes
 * and spaces: everything it checks (the name, the operand count, the
 * broadcast, out's shape, the plan's limits, the logical bytes' cap)
 * follows from them, and a handle repeated in a call changes only the
 * hazard sets, which are built as the full lowering builds them. */
/* Whether m, kept for r->mop[i], is d's call with a, b and o. */
static inline int math_is(const kb_replay *r, uint32_t i, const kb_tl_composite_desc *d,
			  uint32_t form, const kb_hslot *a, const kb_hslot *b, const kb_hslot *o)
{
	const mcall *m = &r->m[i];

	if (r->mop[i] != d->op || m->form != form || m->flags != d->flags ||
	    !sig_eq(&m->sig[0], &a->view) || (b && !sig_eq(&m->sig[1], &b->view)) ||
	    (o && !sig_eq(&m->sig[2], &o->view)))
		return 0;
	/* a kernel's own buffer may hold other text by now */
	return m->fixed || strcmp(d->op, kb__math_kind_name((kb_math_kind)m->kind)) == 0;
}

static mcall *math_find(kb_replay *r, const kb_tl_composite_desc *d, const kb_hslot *a,
			      const kb_hslot *b, const kb_hslot *o)
{
	/* from the one after the last found: a kernel calls them in turn,
	 * so that one first, without the loop's set-up */
	uint32_t used = r->mfills < N_MATH ? (uint32_t)r->mfills : N_MATH, i = r->mlast + 1;
	uint32_t form = (uint32_t)(b != NULL) | (uint32_t)(o == NULL) << 1;

	if (i < used && math_is(r, i, d, form, a, b, o)) {
		r->mlast = i;
		return &r->m[i];
	}
	i = r->mlast;
	for (uint32_t n = 0; n < used; n++) {
		i = i + 1 < used ? i + 1 : 0;
		if (math_is(r, i, d, form, a, b, o)) {
			r->mlast = i;
			return &r->m[i];
		}
	}
	return NULL;
}

int kb__replay_math(kb_replay **rp, kb_tl *tl, const kb_tl_composite_desc *d, kb_tl_tensor **res)
{
	kb_replay *r = *rp;
	kb_hslot *a, *b = NULL, *o = NULL;
	mcall *m;
	kb_opspec *op;
	kb_cmd *c;
	int by_ref;

	/* an invalid handle: the full lowering says which */
	if (!r || !(a = kb__tl_slot_find(tl, d->a)) || (d->b && !(b = kb__tl_slot_find(tl, d->b))) ||
	    (d->out && !(o = kb__tl_slot_find(tl, d->out))) || !(m = math_find(r, d, a, b, o)))
		return 0;
	r->mhits++;
	by_ref = m->ref && tl->cfg.timing_only;
	/* in the full lowering's order: the command, then the output; *res
	 * set on each way out, not cleared first (a store a call) */
	c = kb__tl_cmd_new_n(tl, KB_CMD_COMPOSITE, by_ref ? KB_CMD_OPS_ELSEWHERE : 1, 2);   /* sets of at most two */
	if (!c) {
		*res = NULL;
		return 1;
	}
	if (m->auto_out) {
		kb_tl_tensor *t = NULL;

		o = kb__tl_new_tcm_at(tl, &m->out_view, m->out_size, &t);
		if (!o) {
			kb__cmd_free(c);
			*res = NULL;
			return 1;
		}
		*res = t;
	} else {
		*res = d->out;
	}
	if (by_ref) {
		/* as a template's (replay_tpl): ids and addresses stale, and
		 * every field of the header written */
		c->ops = &m->ref->op;
		c->dig = (kb_cmd_dig *)(void *)m->ref->dig;
		m->shared = 1;
		goto sets;
	}
	op = &c->ops[0];
	op->kind = m->kind;
	op->scope = KB_SCOPE_KERNEL;
	op->n_operands = m->n_in;
	op->n_extras = 0;
	op->has_out = 1;
	op->trans_b = 0;
	op->operands[0].name = m->name[0];
	op->operands[0].t = a->view;
	if (b) {
		op->operands[1].name = m->name[1];
		op->operands[1].t = b->view;
	}
	op->out = o->view;
	kb__cmd_put_digest(c, (const kb_cmd_dig *)(const void *)m->dig, 1);
sets:
	c->n_ops = 1;
	c->n_rw = 0;
	c->lbytes = m->lbytes;
	/* read a (and b, when another handle), write o: sets_distinct's
	 * work for these two or three, without its loops */
	{
		uint64_t fence = a->fence > o->fence ? a->fence : o->fence;
		uint32_t nd = 0;

		c->reads[0] = a->view.id;
		if (a->writer >= 0)
			c->deps[nd++] = (uint64_t)a->writer;
		c->n_reads = 1;
		if (b && b != a) {
			fence = b->fence > fence ? b->fence : fence;
			c->reads[1] = b->view.id;
			if (b->writer >= 0 && !(nd && c->deps[0] == (uint64_t)b->writer))
				c->deps[nd++] = (uint64_t)b->writer;
			c->n_reads = 2;
		}
		c->writes[0] = o->view.id;
		o->writer = (int64_t)c->id;
		c->n_deps = nd;
		c->n_writes = 1;
		c->fence = fence;
		/* b's bit, also when b is a (one bit either way) */
		kb__tl_sig(c, kb__hazard_set(b ? kb__hazard_bit(b->view.id) : 0, a->view.id),
			   kb__hazard_bit(o->view.id));
	}
	if (!m->disp_ps)
		m->disp_ps = kb__tl_disp_ps(tl, c);
	if (kb__tl_emit_ps(tl, c, m->disp_ps))
		*res = NULL;
	return 1;
}

int kb__replay_math_save(kb_replay **rp, const kb_tl_composite_desc *d, const kb_cmd *c)
{
	const kb_opspec *op = c->n_ops == 1 ? &c->ops[0] : NULL;
	kb_replay *r = *rp;
	kb_cmd_dig *dig;
	mcall *m;
	uint32_t i;

	if (!op || op->kind == KB_OP_GEMM || !c->dig || c->n_rw || op->n_extras ||
	    op->n_operands != (d->b ? 2 : 1))
		return 0;
	if (!r && !(r = *rp = replay_new()))
		return 1;
	/* as templates (kb__replay_save): no more once they thrash */
	if (r->mfills >= MAX_THRASH && r->mhits < 4 * r->mfills)
		return 1;
	i = r->mnext++ % N_MATH;
	m = &r->m[i];
	if (r->mfills++ >= N_MATH && m->ref)   /* an entry made before */
		retire(r, m->ref, m->shared);
	m->ref = NULL;
	m->shared = 0;
	r->mop[i] = d->op;
	m->kind = op->kind;
	m->n_in = op->n_operands;
	m->auto_out = !d->out;
	m->form = (uint8_t)((op->n_operands == 2) | (!d->out) << 1);
	m->fixed = d->op == kb__math_kind_name((kb_math_kind)op->kind);
	m->flags = d->flags;
	for (int k = 0; k < op->n_operands; k++) {
		sig_set(&m->sig[k], &op->operands[k].t);
		m->name[k] = op->operands[k].name;
	}
	sig_set(&m->sig[2], &op->out);
	m->out_size = kb__tcm_round(kb__tview_bytes(&op->out));
	if (m->auto_out)
		kb__tl_view_proto(&m->out_view, KB_SPACE_TCM, (kb_dtype)op->out.dtype, op->out.rank,
				  op->out.shape);
	m->lbytes = c->lbytes;
	m->disp_ps = 0;
	dig = memcpy(m->dig, c->dig, kb__cmd_dig_size(1));
	/* its commands share the digest: PE_SCHEDULER plans them alike */
	dig->key = dig_key(r);
	/* ops for commands to point at, while retiring has room (tpl.full) */
	if (r->n_retired < MAX_RETIRED && (m->ref = malloc(sizeof(*m->ref)))) {
		memcpy(m->ref->dig, m->dig, sizeof(m->dig));
		m->ref->op = *op;
	}
	return 1;
}

void kb__replay_free(kb_replay *r)
{
	if (!r)
		return;
	for (int i = 0; i < N_TPL; i++)
		free(r->t[i]);
	for (uint64_t i = 0; i < N_MATH && i < r->mfills; i++)
		free(r->m[i].ref);
	for (uint32_t i = 0; i < r->n_retired; i++)
		free(r->retired[i]);
	free(r);
}
