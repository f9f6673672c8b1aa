/*
 * The `tl` programming model: kernels are plain C functions that call these
 * operations on tensor handles; each operation becomes a PE command that
 * PE_CPU dispatches (paying FIXED + R * logical_bytes cycles) and the PE
 * pipeline executes.
 *
 * Handles carry a pending completion: a command that reads a handle whose
 * producer has not finished waits for it before dispatch (implicitly);
 * kb_tl_wait waits explicitly. Composite read/write hazards are tracked by
 * the scheduler in strict FIFO order by handle identity.
 *
 * Errors: an operation that fails validation returns NULL (or an error
 * code) and records the error in the context, naming the operation, its
 * ordinal in the kernel and the call site; every later operation is a
 * no-op, and the launch fails with that error. kb_tl_failed tells a kernel
 * that it may stop early.
 *
 * Thread rules: a kb_tl belongs to one kernel instance and is used only
 * from the kernel function it was passed to.
 */
#ifndef KERNBENCH_TL_H
#define KERNBENCH_TL_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_tl kb_tl;
/* A tensor handle. Opaque: its value encodes identity and generation, so a
 * stale or foreign handle is detected, never dereferenced. */
typedef struct kb_tl_tensor kb_tl_tensor;

typedef enum kb_tl_space { KB_TL_HBM = 0, KB_TL_TCM = 1 } kb_tl_space;
/* Repetition of an epilogue op; the default (0) of an epilogue op is
 * OUTPUT_TILE. */
typedef enum kb_tl_scope {
	KB_TL_SCOPE_DEFAULT = 0, KB_TL_KERNEL = 1, KB_TL_K_TILE = 2, KB_TL_OUTPUT_TILE = 3
} kb_tl_scope;

#define KB_TL_MAX_RANK 4
#define KB_TL_MAX_ARGS 6
#define KB_TL_MAX_EXTRAS 4

/* A named operand: {"other", h}. A NULL name ends a list. */
typedef struct kb_tl_arg {
	const char *name;
	kb_tl_tensor *t;
} kb_tl_arg;

/* A named scalar: {"scale", 0.125}. */
typedef struct kb_tl_extra {
	const char *name;
	double value;
} kb_tl_extra;

/* An epilogue op: kind ("add", "bias", "scale", "relu", "gelu", "exp", ...),
 * its scope (default: per output tile; KB_TL_KERNEL runs it once after the
 * tile loop, KB_TL_K_TILE inside the K loop), operands, extras. */
typedef struct kb_tl_op {
	const char *op;
	kb_tl_scope scope;
	kb_tl_arg args[KB_TL_MAX_ARGS];
	kb_tl_extra extras[KB_TL_MAX_EXTRAS];
} kb_tl_op;

/* A recipe call in a composite prologue: {"softmax_merge", {{"s",S},...}}. */
typedef struct kb_tl_recipe_call {
	const char *recipe;
	kb_tl_arg args[KB_TL_MAX_ARGS];
} kb_tl_recipe_call;

#define KB_TL_TRANS_B 1u   /* GEMM: b is stored (N, K) and used transposed */

/* A composite: a head op (`op` = "gemm" or a MATH kind) on a and b, an
 * optional prologue of recipes, optional epilogue ops, and an output:
 * `out` (a handle: HBM -> written back by DMA, TCM -> stays on chip),
 * `out_hbm` (nonzero: shorthand for an HBM ref at that address), or
 * neither (auto TCM scratch in the current scope). Returns the output. */
typedef struct kb_tl_composite_desc {
	const char *op;
	kb_tl_tensor *a;
	kb_tl_tensor *b;
	unsigned flags;
	kb_tl_tensor *out;
	uint64_t out_hbm;
	const kb_tl_recipe_call *prologue;
	size_t n_prologue;
	const kb_tl_op *epilogue;
	size_t n_epilogue;
	kb_tl_extra extras[KB_TL_MAX_EXTRAS];  /* head op scalars (e.g. "scale") */
} kb_tl_composite_desc;

/* ---- kernel identity ---- */
KB_API uint32_t kb_tl_program_id(const kb_tl *tl);
KB_API uint32_t kb_tl_num_programs(const kb_tl *tl);
/* Global PE index this instance runs on. */
KB_API uint32_t kb_tl_pe(const kb_tl *tl);
/* Nonzero once an operation has failed. */
KB_API int kb_tl_failed(const kb_tl *tl);
/* Bytes of TCM still free for this kernel. */
KB_API uint64_t kb_tl_tcm_free(const kb_tl *tl);

/* The per-tile figures of kb_simulation_run (kb_result.tiles,
 * dispatch_per_tile_ns, dispatch_kernel_per_tile_ns), the way the built-in
 * decode benches compute them: the commands issued between
 * kb_tl_tile_loop_begin and kb_tl_tile_loop_end count as the tile loop's,
 * and end adds `tiles` tiles. A kernel may declare several loops; the run
 * sums loops and tiles over all programs. An end without a begin counts
 * from the kernel's start (or the previous end). With no tiles declared the
 * result has tiles 0 and NaN per-tile figures. */
KB_API void kb_tl_tile_loop_begin(kb_tl *tl);
KB_API void kb_tl_tile_loop_end(kb_tl *tl, uint64_t tiles);

/* Every operation takes the call site (file, line) for its error messages;
 * use the macros below, which pass __FILE__ and __LINE__. */

/* A view of HBM memory at addr (no copy). */
KB_API kb_tl_tensor *kb_tl_ref_at(kb_tl *tl, uint64_t addr, kb_dtype dt, int rank,
				  const int64_t *shape, const char *file, int line);
/* Allocates a TCM tensor in the current scratch scope (uninitialised). */
KB_API kb_tl_tensor *kb_tl_alloc_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				    const char *file, int line);
/* Allocates a TCM tensor filled with a value (a MATH fill command). */
KB_API kb_tl_tensor *kb_tl_full_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				   double value, const char *file, int line);
/* DMA an HBM tensor into TCM: into dst when given (same shape), else a new
 * TCM tensor in the current scope. Returns the TCM handle. */
KB_API kb_tl_tensor *kb_tl_load_at(kb_tl *tl, kb_tl_tensor *src, kb_tl_tensor *dst,
				   const char *file, int line);
/* DMA a TCM tensor to an HBM tensor of the same shape. */
KB_API int kb_tl_store_at(kb_tl *tl, kb_tl_tensor *dst_hbm, kb_tl_tensor *src_tcm,
			  const char *file, int line);
/* a @ b into an auto TCM tensor (a composite with no epilogue). */
KB_API kb_tl_tensor *kb_tl_dot_at(kb_tl *tl, kb_tl_tensor *a, kb_tl_tensor *b, unsigned flags,
				  const char *file, int line);
KB_API kb_tl_tensor *kb_tl_composite_at(kb_tl *tl, const kb_tl_composite_desc *d,
					const char *file, int line);
/* Blocks the kernel (in simulated time) until t's producer has finished. */
KB_API int kb_tl_wait_at(kb_tl *tl, kb_tl_tensor *t, const char *file, int line);
/* Charges `cycles` of PE_CPU time directly (bypasses the cost formula). */
KB_API int kb_tl_cpu_overhead_at(kb_tl *tl, double cycles, const char *file, int line);
/* Scratch scopes: TCM allocated inside is released at the matching end;
 * handles created inside become invalid. */
KB_API int kb_tl_scope_begin_at(kb_tl *tl, const char *file, int line);
KB_API int kb_tl_scope_end_at(kb_tl *tl, const char *file, int line);
/* Releases handle t before its scope ends, so that a long loop's handles
 * (an HBM view per tile, say) do not pile up in an outer scope until it
 * ends: t becomes stale, and any later use of it, a second release
 * included, fails with KB_V_BAD_HANDLE naming that call site. TCM that t
 * owns is freed as at a scope end: its next user waits for every command
 * issued so far. Commands already issued on t are unaffected (their
 * hazards and pending completion are kept by the handle's identity, which
 * no new handle takes), so t may be released while its producer is still
 * pending. A handle of any open scope may be released, an outer one's
 * too; that scope's end then skips it. Beware of aliases: kb_tl_load into
 * dst and a composite with `out` return dst / out itself, so releasing
 * what they return releases that buffer. Returns KB_OK or KB_EVALIDATE. */
KB_API int kb_tl_release_at(kb_tl *tl, kb_tl_tensor *t, const char *file, int line);
/* Inter-PE queues (PE_IPCQ): send a TCM tensor to PE `dst_pe`'s queue
 * `tag`; receive into a TCM tensor from PE `src_pe` with `tag`. */
KB_API int kb_tl_send_at(kb_tl *tl, kb_tl_tensor *src, uint32_t dst_pe, uint32_t tag,
			 const char *file, int line);
KB_API int kb_tl_recv_at(kb_tl *tl, kb_tl_tensor *dst, uint32_t src_pe, uint32_t tag,
			 const char *file, int line);

/* Fails the run with the kernel's own message (a binding's exception, a
 * check of the kernel's own): the launch fails with KB_EVALIDATE, detail
 * KB_V_KERNEL, and a message naming the call site, the PE and `message`
 * (cut to fit kb_error.message). Every later operation is a no-op, as after
 * a validation error. Returns KB_EVALIDATE (also when already failed). */
KB_API int kb_tl_fail_at(kb_tl *tl, const char *message, const char *file, int line);

/* Rank and shape of a handle (0 / KB_EINVAL for a bad handle); its dtype and
 * space come from kb_tl_type. */
KB_API int kb_tl_shape(const kb_tl *tl, const kb_tl_tensor *t, int *rank, int64_t *shape);
/* Dtype and memory space of a handle (0 / KB_EINVAL for a bad handle);
 * either out-parameter may be NULL. */
KB_API int kb_tl_type(const kb_tl *tl, const kb_tl_tensor *t, kb_dtype *dtype, kb_tl_space *space);

#define kb_tl_ref(tl, addr, dt, rank, shape) kb_tl_ref_at(tl, addr, dt, rank, shape, __FILE__, __LINE__)
#define kb_tl_alloc(tl, dt, rank, shape) kb_tl_alloc_at(tl, dt, rank, shape, __FILE__, __LINE__)
#define kb_tl_full(tl, dt, rank, shape, v) kb_tl_full_at(tl, dt, rank, shape, v, __FILE__, __LINE__)
#define kb_tl_load(tl, src, dst) kb_tl_load_at(tl, src, dst, __FILE__, __LINE__)
#define kb_tl_store(tl, dst, src) kb_tl_store_at(tl, dst, src, __FILE__, __LINE__)
#define kb_tl_dot(tl, a, b, flags) kb_tl_dot_at(tl, a, b, flags, __FILE__, __LINE__)
#define kb_tl_composite(tl, d) kb_tl_composite_at(tl, d, __FILE__, __LINE__)
#define kb_tl_wait(tl, t) kb_tl_wait_at(tl, t, __FILE__, __LINE__)
#define kb_tl_cpu_overhead(tl, c) kb_tl_cpu_overhead_at(tl, c, __FILE__, __LINE__)
#define kb_tl_scope_begin(tl) kb_tl_scope_begin_at(tl, __FILE__, __LINE__)
#define kb_tl_scope_end(tl) kb_tl_scope_end_at(tl, __FILE__, __LINE__)
#define kb_tl_release(tl, t) kb_tl_release_at(tl, t, __FILE__, __LINE__)
#define kb_tl_send(tl, src, pe, tag) kb_tl_send_at(tl, src, pe, tag, __FILE__, __LINE__)
#define kb_tl_recv(tl, dst, pe, tag) kb_tl_recv_at(tl, dst, pe, tag, __FILE__, __LINE__)
#define kb_tl_fail(tl, message) kb_tl_fail_at(tl, message, __FILE__, __LINE__)

/* A kernel: called once per program instance. */
typedef void (*kb_kernel_fn)(kb_tl *tl, void *args);

#ifdef __cplusplus
}
#endif
#endif
