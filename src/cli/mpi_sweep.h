/*
 * `kernbench sweep` under MPI (built with ./configure --with-mpi).
 *
 * The library stays MPI-free: every rank runs the same command line, builds
 * the same kb_sweep (so point indices mean the same everywhere) and runs the
 * points it is given with its own pool of -j threads, each point as a
 * one-point kb_sweep (the point's bench, each swept key with the point's
 * single value), which is exactly what the single-process sweep runs for
 * that point. Rank 0 hands out point indices dynamically, also runs points
 * itself, gathers each finished row (status, error text, the kb_result
 * scalar figures and the op_log hash) and passes it, in point order, to the
 * same row callback as the single-process sweep. Protocol and failure
 * handling: mpi_sweep.c; the thread pool and the wire format: mpi_pool.c.
 */
#ifndef KB_CLI_MPI_SWEEP_H
#define KB_CLI_MPI_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/sweep.h"
#include "kernbench/topology.h"

/* ---- one point, as every rank runs it ---------------------------------- */

typedef struct cli_mpi_point_spec {
	kb_sweep *s;               /* the whole sweep: decodes indices (kb_sweep_point) */
	const kb_topology *topo;   /* base topology of every point */
	size_t n_keys;             /* swept keys: n_params --param keys, then --set keys */
	size_t n_params;
	const char *const *keys;
	int threads, data;         /* of each point */
} cli_mpi_point_spec;

/* A finished point as sent to rank 0: this fixed part, then err_len bytes of
 * error text and a NUL. Ranks run the same binary on the same architecture. */
typedef struct cli_mpi_wire_row {
	uint64_t index;
	int32_t status, threads, data;
	uint32_t workers, pes, err_len;
	uint64_t sim_time_ps, events, records, commands, dispatch_ps, tiles;
	double dispatch_per_tile_ns, wall_s, events_per_s, max_abs_err, max_rel_err;
	char bench[64];
	char oplog_sha256[65];
	char error[];
} cli_mpi_wire_row;

/* Bytes of a wire row, its error text included. */
size_t cli_mpi_wire_size(const cli_mpi_wire_row *w);

/* A pool of threads running points (no MPI calls: only the main thread of a
 * rank talks to MPI). */
typedef struct cli_mpi_pool cli_mpi_pool;

int cli_mpi_pool_start(cli_mpi_pool **out, const cli_mpi_point_spec *spec, unsigned jobs);
/* Queues point index (NULL when memory runs out: the pool is then failed). */
void cli_mpi_pool_push(cli_mpi_pool *p, size_t index);
/* A finished row (malloc'd, the caller frees it), or NULL when none is ready. */
cli_mpi_wire_row *cli_mpi_pool_pop(cli_mpi_pool *p);
/* Points queued or running. */
size_t cli_mpi_pool_busy(cli_mpi_pool *p);
/* Forgets the queued points that have not started. */
void cli_mpi_pool_drop_queued(cli_mpi_pool *p);
/* Sleeps until a row is finished or ns nanoseconds have passed. */
void cli_mpi_pool_wait(cli_mpi_pool *p, long ns);
/* Nonzero when a point could not be run at all (out of memory). */
int cli_mpi_pool_failed(cli_mpi_pool *p);
/* Decodes point index into malloc'd copies of its bench and values
 * (values: n_keys entries); 0 or a kb_status. */
int cli_mpi_pool_decode(cli_mpi_pool *p, size_t index, char **bench, char **values);
/* Stops the threads (after the running points) and frees the pool. */
void cli_mpi_pool_destroy(cli_mpi_pool *p);

/* ---- MPI --------------------------------------------------------------- */

typedef struct cli_mpi_ctx cli_mpi_ctx;

/*
 * Starts MPI when this process was started by an MPI launcher (mpirun,
 * mpiexec, srun: found from the environment) or KERNBENCH_MPI=1;
 * KERNBENCH_MPI=0 never starts it. *out is NULL when MPI is not used.
 * Returns 0 or an exit status (message printed).
 */
int cli_mpi_sweep_start(cli_mpi_ctx **out);
/* This rank, and whether there are several ranks (else: the plain sweep). */
int cli_mpi_sweep_rank(const cli_mpi_ctx *m);
int cli_mpi_sweep_parallel(const cli_mpi_ctx *m);
/* Points this rank runs at once: -j N, or (0) the cores of the node shared
 * by the ranks on it. */
unsigned cli_mpi_sweep_jobs(const cli_mpi_ctx *m, unsigned requested);
/* Whether rank 0 should draw progress: stderr (or mpirun's) is a terminal,
 * or KERNBENCH_PROGRESS=1. */
int cli_mpi_sweep_progress_wanted(void);

/*
 * Set-up agreement. Rank 0, after parsing, building and opening the output,
 * calls cli_mpi_sweep_setup_root with stop nonzero when the command ends there
 * (help, usage or set-up error); the others wait in cli_mpi_sweep_setup_wait
 * and end quietly when told to stop. Then every rank builds the sweep and
 * calls cli_mpi_sweep_setup_done with its own status: a failure anywhere ends
 * the command everywhere (rank 0 names the rank). Each returns 0 or an
 * exit status.
 */
int cli_mpi_sweep_setup_root(cli_mpi_ctx *m, int stop, unsigned jobs);
int cli_mpi_sweep_setup_wait(cli_mpi_ctx *m, int *stop);
int cli_mpi_sweep_setup_done(cli_mpi_ctx *m, int status, unsigned jobs);

/*
 * Rank 0: runs the sweep over every rank and calls on_row in point order,
 * exactly as kb_sweep_run would (skip[i] nonzero: point i is not run; skip
 * may be NULL). Returns 0, or 1 after printing why the sweep stopped (the
 * rows delivered before stay).
 */
int cli_mpi_sweep_run(cli_mpi_ctx *m, const cli_mpi_point_spec *spec, unsigned jobs, size_t total,
		      const unsigned char *skip, kb_sweep_cb on_row, void *payload);
/* Other ranks: run the points rank 0 hands out until it says stop. */
int cli_mpi_sweep_work(cli_mpi_ctx *m, const cli_mpi_point_spec *spec, unsigned jobs);

/* Ends MPI (NULL: nothing); returns status. */
int cli_mpi_sweep_end(cli_mpi_ctx *m, int status);

#endif
