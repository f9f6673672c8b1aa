/* The op_log side of the core's window hook. See oplog_pump.h. */
#include "runtime/oplog_pump.h"

#include "base/err.h"

/* Buffered records above which a window's records are written: about
 * 30 KB of text, merged while in cache (4096 was 15-20% slower on
 * sequential decode, issue 13); under the ~430 records of a sequential
 * window (exec.c's SEQ_BUDGET), so each window is written. */
#define FLUSH_RECORDS 256

/* Slices (about 1024 records each) the in-order sink may lag behind the
 * windows: a few windows' worth (one holds up to ~14 at the window cap),
 * ~4 MB of merged text. Past it the coordinator sinks between windows,
 * in series. */
#define LAG_SLICES 32

/* Sinks what earlier windows sealed: with busy, while the other threads
 * run the window (the sink is a pipeline stage: what it has not done
 * when they are done waits for the next window). */
static int pump_overlap(void *ctx, const atomic_uint *busy, kb_error *err)
{
	kb_oplog_pump *p = ctx;

	if (!busy)
		return kb__oplog_flush_sealed(p->log, err);
	return kb__oplog_sink(p->log, busy, 0, err);
}

static int pump_window(void *ctx, kb_time bound, unsigned flags, kb_error *err)
{
	kb_oplog_pump *p = ctx;
	int rc;

	if (flags & KB_WINDOW_LAST)
		return kb__oplog_flush(p->log, bound, err);   /* sealed records first */
	if (kb__oplog_buffered(p->log) <= FLUSH_RECORDS)
		return KB_OK;
	if (!(flags & KB_WINDOW_OVERLAP))
		return kb__oplog_flush(p->log, bound, err);
	/* Every buffered record ends before bound: seal them for the sink,
	 * which writes them while later windows run; bound what waits. */
	rc = kb__oplog_sink(p->log, NULL, LAG_SLICES, err);
	if (rc)
		return rc;
	if (kb__oplog_seal(p->log))
		return kb__err(err, KB_ENOMEM, "out of memory planning the op_log merge");
	return KB_OK;
}

/* Helper threads of a parallel window merge sealed slices first. */
static void pump_share(void *ctx)
{
	kb_oplog_pump *p = ctx;

	kb__oplog_share(p->log);
}

/* More threads merge a window's records: cut them finer. One thread runs
 * every LP (--threads 1, auto on one PE or one core, or a stretch of
 * auto's run): the records come in their final order, into one buffer
 * that is hashed as it is. Without memory for it, the lanes are merged as
 * in any run. Several again: each LP's records into its own lane. */
static void pump_threads(void *ctx, unsigned threads)
{
	kb_oplog_pump *p = ctx;

	kb__oplog_threads(p->log, threads);
	if (threads == 1)
		(void)kb__oplog_serial(p->log);
	else
		kb__oplog_parallel(p->log);
}

void kb__oplog_pump_attach(kb_oplog_pump *p, kb_oplog *log, kb_sim_config *cfg)
{
	p->log = log;
	cfg->on_window = log ? pump_window : NULL;
	cfg->on_overlap = log ? pump_overlap : NULL;
	cfg->on_share = log ? pump_share : NULL;
	cfg->on_threads = log ? pump_threads : NULL;
	cfg->hook_ctx = log ? p : NULL;
	cfg->step_n = NULL;
	cfg->on_step = NULL;
	cfg->step_ctx = NULL;
	if (log)
		kb__oplog_hash_steps(log, &cfg->step_n, &cfg->on_step, &cfg->step_ctx);
}
