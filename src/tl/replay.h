/*
 * Composite replay: a decode kernel lowers the same composite, with the
 * same recipe, op names, shapes, dtypes and spaces, thousands of times;
 * only the handles (ids and addresses) differ. The first full lowering of
 * such a composite is remembered as a template; a later call whose key
 * matches it gets the template's ops and digest copied into its command
 * with the ids and addresses of its own handles, its scratch allocated in
 * the same order, and the same hazard sets (issue 13). Everything the full
 * lowering validates follows from the key, so a hit cannot fail a check
 * the full lowering would have made; anything unusual (an invalid handle,
 * out_hbm, more than a template holds) takes the full lowering.
 */
#ifndef KB_TL_REPLAY_H
#define KB_TL_REPLAY_H

#include "tl/tl_int.h"

/* A replayable call has at most KB_RKEY_CALLS recipe calls and as many
 * epilogue ops, which bounds its key: per recipe call a name and up to
 * KB_TL_MAX_ARGS named handles of 1 + rank words; per epilogue op the same
 * and KB_TL_MAX_EXTRAS named scalars. */
#define KB_RKEY_CALLS 4
#define KB_RKEY_HANDLE_WORDS (1 + KB_TL_MAX_RANK)
#define KB_RKEY_WORDS \
	(4 + (KB_TL_MAX_EXTRAS + 1) + KB_RKEY_CALLS * (KB_TL_MAX_ARGS * KB_RKEY_HANDLE_WORDS + 1) + \
	 3 * KB_RKEY_HANDLE_WORDS + \
	 KB_RKEY_CALLS * (1 + KB_TL_MAX_ARGS * KB_RKEY_HANDLE_WORDS + 1 + KB_TL_MAX_EXTRAS + 1))
#define KB_RKEY_NAMES \
	(1 + KB_TL_MAX_EXTRAS + KB_RKEY_CALLS * (1 + KB_TL_MAX_ARGS) + \
	 KB_RKEY_CALLS * (1 + KB_TL_MAX_ARGS + KB_TL_MAX_EXTRAS))
#define KB_RKEY_HANDLES (2 * KB_RKEY_CALLS * KB_TL_MAX_ARGS + 3)
#define KB_REPLAY_ALLOCS 16

/* What a composite call is, as far as its lowering goes: every count,
 * flag and scalar, each handle's rank, dtype, space and shape and which
 * earlier handle it repeats (words); its names, compared as strings; the
 * distinct handles in the order first named. */
typedef struct kb_rkey {
	int ok;                  /* 0: not replayable (take the full lowering) */
	uint32_t nw, nn, nh;
	uint64_t hash;
	uint64_t w[KB_RKEY_WORDS];
	const char *name[KB_RKEY_NAMES];
	/* and room after them for a replay's allocations: its hazard sets
	 * index both as one array (a copy of the key's was a memcpy call a
	 * replay) */
	kb_hslot *h[KB_RKEY_HANDLES + KB_REPLAY_ALLOCS];
	kb_tl_tensor *out;       /* the call's out (its result when given) */
} kb_rkey;

/* What a full lowering produced, handed to kb__replay_save before emit. */
typedef struct kb_replay_src {
	const kb_cmd *cmd;       /* n_ops, n_rw, lbytes, dig and ops set */
	uint32_t max_ops, cap_ids;
	kb_hslot *alloc[KB_REPLAY_ALLOCS];    /* in allocation order */
	kb_tl_tensor *alloc_t[KB_REPLAY_ALLOCS];
	uint32_t n_alloc;
	int alloc_over;          /* more allocations than alloc holds */
	kb_tl_tensor *result;
	kb_hslot *const *reads, *const *rw, *const *writes;
	uint32_t n_reads, n_rw, n_writes;
} kb_replay_src;

typedef struct kb_replay kb_replay;

/* Builds d's key (k->ok 0 when d is not replayable). */
void kb__replay_key(kb_tl *tl, const kb_tl_composite_desc *d, kb_rkey *k);
/* Lowers and emits d by a template matching k: 1 when one did, with the
 * call's result in *res (NULL when it failed, the error recorded as the
 * full lowering records it); 0 when none matches. */
int kb__replay_run(kb_replay **rp, kb_tl *tl, kb_rkey *k, kb_tl_tensor **res);
/* Lowers and emits d like the last call its template replayed by key
 * (kb__replay_snap), without building d's key: 1 when one did, *res as
 * kb__replay_run's, k's handles and out set; 0 when none is like it. */
int kb__replay_like(kb_replay **rp, kb_tl *tl, const kb_tl_composite_desc *d, kb_rkey *k,
		    kb_tl_tensor **res);
/* After kb__replay_run found d's template by its key k: remembers d for
 * kb__replay_like, where it is a call that can be (replay.c's tpl_snap). */
void kb__replay_snap(kb_replay *r, kb_tl *tl, const kb_tl_composite_desc *d, const kb_rkey *k);
/* Remembers a successful full lowering of the call keyed k. */
void kb__replay_save(kb_replay **rp, const kb_rkey *k, const kb_replay_src *s);
void kb__replay_free(kb_replay *r);

/*
 * One-op MATH composites: a MATH head on a (and b), with neither prologue,
 * epilogue, head extras nor out_hbm; decode opt3 lowers seven a tile. A
 * template of these costs what their lowering does (a key of every word,
 * the ops copied and patched), so they have a path of their own: the
 * head's name by address and each handle's rank, dtype, space and shape,
 * compared in place with what a full lowering of the call found valid;
 * the command written from the handles (issue 13).
 */
static inline int kb__replay_math_call(const kb_tl_composite_desc *d)
{
	/* an epilogue first: the calls that are not one (a decode's GEMMs
	 * and its l update) mostly have one, and stop at the first test */
	return !d->n_epilogue && d->a && !d->n_prologue && !d->out_hbm && !d->extras[0].name;
}

/* Lowers and emits d (kb__replay_math_call) like a full lowering of a
 * call that matched it: 1 when one did, *res as kb__replay_run's; 0 when
 * none matches. */
int kb__replay_math(kb_replay **rp, kb_tl *tl, const kb_tl_composite_desc *d, kb_tl_tensor **res);
/* Remembers c, the command a full lowering of d (kb__replay_math_call)
 * made, before its emit: 1 when it is a one-op MATH command (kept, or
 * not kept after thrashing), 0 when not one. */
int kb__replay_math_save(kb_replay **rp, const kb_tl_composite_desc *d, const kb_cmd *c);

#endif
