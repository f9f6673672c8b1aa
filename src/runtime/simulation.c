/*
 * kb_simulation: a machine built from a topology, HBM tensors, launched
 * kernels, one run. Everything is built at kb_simulation_run, so a
 * simulation that fails to set up writes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/err.h"
#include "base/memlimit.h"
#include "base/str.h"
#include "base/threadlimit.h"
#include "kernbench/simulation.h"
#include "model/memstore.h"
#include "model/topology.h"
#include "oplog/oplog.h"
#include "pe/machine.h"
#include "runtime/kernel.h"
#include "runtime/oplog_pump.h"
#include "runtime/result.h"
#include "runtime/simulation_impl.h"

typedef struct launch {
	kb_kernel_fn fn;
	void *args;
	uint32_t first, n;
} launch;

struct kb_simulation {
	kb_topology *topo;
	const kb_topo_params *tp;
	kb_sim_options opt;
	char *oplog_path, *trace_path, *trace_metadata;
	uint32_t n_pes;
	kb_memstore *mem;
	launch *launches;
	size_t n_launches;
	int ran;
	uint32_t nonce;          /* random: tags this simulation's tensor handles */
	/* after the run */
	kb_sim_stats stats;
	kb_pe_figures *figs;
};

/* Host memory of a PE's engines, queues and op_log lanes, measured (about
 * 200 KiB with 4096 PEs), with room. */
#define PE_BYTES (256u << 10)

/* Refuses a machine whose PEs cannot fit in host memory before any is
 * built: each PE's state, its kernel's stack (mapped whole) and, in data
 * mode, its TCM with the written-byte map. */
static int check_memory(const kb_simulation *s, kb_error *err)
{
	uint64_t stack = s->opt.kernel_stack_bytes ? s->opt.kernel_stack_bytes
						   : KB_KERNEL_STACK_DEFAULT;
	uint64_t per = kb__add_sat(PE_BYTES, stack), tcm = s->tp->mem.tcm_bytes;
	char why[160];

	if (s->opt.data)
		per = kb__add_sat(per, tcm + tcm / 8);
	snprintf(why, sizeof(why), "%u PEs (%llu bytes each%s)", s->n_pes,
		 (unsigned long long)per, s->opt.data ? ", TCM in data mode included" : "");
	return kb__mem_need(kb__mul_sat(s->n_pes, per), why, err);
}

KB_API int kb_simulation_create(kb_simulation **out, const kb_topology *topo,
				const kb_sim_options *opt, kb_error *err)
{
	kb_simulation *s;
	kb_sim_options dflt = KB_SIM_OPTIONS_INIT;
	uint64_t total;
	int rc, oom = 0;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_simulation_create: out is NULL");
	*out = NULL;
	if (!opt)
		opt = &dflt;
	if (opt->threads < KB_THREADS_AUTO || opt->threads > 4096)
		return kb__err(err, KB_ERANGE,
			       "threads = %d: must be KB_THREADS_AUTO (-1), 0 (one per engine), 1, or up to 4096",
			       opt->threads);
	if (opt->kernel_stack_bytes && (opt->kernel_stack_bytes < KB_KERNEL_STACK_MIN ||
					opt->kernel_stack_bytes > ((size_t)1 << 32)))
		return kb__err(err, KB_ERANGE,
			       "kernel_stack_bytes = %zu: must be 0 (the default, 1 MiB) or %zu..%zu",
			       opt->kernel_stack_bytes, KB_KERNEL_STACK_MIN, (size_t)1 << 32);
	s = calloc(1, sizeof(*s));
	if (!s)
		return kb__err(err, KB_ENOMEM, "out of memory creating a simulation");
	rc = topo ? kb_topology_clone(&s->topo, topo, err) : kb_topology_default(&s->topo, err);
	if (rc)
		goto fail;
	s->tp = kb__topology_params(s->topo);
	s->opt = *opt;
	/* A handle from another simulation (or a destroyed one) must not pass
	 * for one of ours: tags come from the OS's random source, not from a
	 * counter (no global state) or an address (addresses are reused). */
	if (getrandom(&s->nonce, sizeof(s->nonce), GRND_NONBLOCK) != sizeof(s->nonce))
		s->nonce = (uint32_t)(((uintptr_t)s >> 4) ^ (uintptr_t)time(NULL) * 2654435761u);
	s->oplog_path = kb__strdup_opt(opt->oplog_path, &oom);
	s->trace_path = kb__strdup_opt(opt->trace_path, &oom);
	s->trace_metadata = kb__strdup_opt(opt->trace_metadata, &oom);
	if (oom) {
		/* Not a run without its op_log or trace file. */
		rc = kb__err(err, KB_ENOMEM, "out of memory creating a simulation");
		goto fail;
	}
	total = (uint64_t)s->tp->clusters * s->tp->pes_per_cluster;
	s->n_pes = opt->pes ? opt->pes : (uint32_t)total;
	if (s->n_pes > total) {
		rc = kb__err(err, KB_ERANGE,
			     "%u PEs requested but the topology has %llu (clusters x pes_per_cluster)",
			     s->n_pes, (unsigned long long)total);
		goto fail;
	}
	rc = check_memory(s, err);
	if (!rc)
		rc = kb__mem_create(&s->mem, s->tp->mem.hbm_bytes, s->n_pes, s->tp->mem.tcm_bytes,
				    opt->data, err);
	if (rc)
		goto fail;
	*out = s;
	return KB_OK;
fail:
	kb_simulation_destroy(s);
	return rc;
}

KB_API void kb_simulation_destroy(kb_simulation *s)
{
	if (!s)
		return;
	kb__mem_destroy(s->mem);
	kb_topology_destroy(s->topo);
	free(s->launches);
	free(s->figs);
	free(s->oplog_path);
	free(s->trace_path);
	free(s->trace_metadata);
	free(s);
}

KB_API uint32_t kb_simulation_pes(const kb_simulation *s)
{
	return s ? s->n_pes : 0;
}

KB_API int kb_simulation_alloc(kb_simulation *s, kb_dtype dt, int rank, const int64_t *shape,
			       int zero, uint64_t *addr, kb_error *err)
{
	uint64_t n = 1;

	kb_error_clear(err);
	if (!s || !addr || !shape)
		return kb__err(err, KB_EINVAL, "kb_simulation_alloc: NULL argument");
	if (!kb_dtype_size(dt))
		return kb__err(err, KB_EINVAL, "kb_simulation_alloc: unknown dtype %d", (int)dt);
	if (rank < 1 || rank > KB_TL_MAX_RANK)
		return kb__err(err, KB_EINVAL, "kb_simulation_alloc: rank %d is not in 1..%d", rank,
			       KB_TL_MAX_RANK);
	for (int i = 0; i < rank; i++) {
		if (shape[i] <= 0 || (uint64_t)shape[i] > (UINT64_C(1) << 40) / n)
			return kb__err(err, KB_ERANGE, "kb_simulation_alloc: dimension %d = %lld is not in 1..2^40 (or the tensor is enormous)",
				       i, (long long)shape[i]);
		n *= (uint64_t)shape[i];
	}
	return kb__mem_hbm_alloc(s->mem, n * kb_dtype_size(dt), zero, addr, err);
}

KB_API int kb_simulation_upload(kb_simulation *s, uint64_t addr, const void *src, size_t bytes,
				kb_error *err)
{
	kb_error_clear(err);
	if (!s || (!src && bytes))
		return kb__err(err, KB_EINVAL, "kb_simulation_upload: NULL argument");
	return kb__mem_upload(s->mem, addr, src, bytes, err);
}

KB_API int kb_simulation_download(kb_simulation *s, uint64_t addr, void *dst, size_t bytes,
				  kb_error *err)
{
	kb_error_clear(err);
	if (!s || (!dst && bytes))
		return kb__err(err, KB_EINVAL, "kb_simulation_download: NULL argument");
	return kb__mem_download(s->mem, addr, dst, bytes, err);
}

KB_API int kb_simulation_launch(kb_simulation *s, kb_kernel_fn fn, void *args, uint32_t first_pe,
				uint32_t n_pes, kb_error *err)
{
	launch *l;

	kb_error_clear(err);
	if (!s || !fn)
		return kb__err(err, KB_EINVAL, "kb_simulation_launch: NULL simulation or kernel");
	if (s->ran)
		return kb__err(err, KB_ESTATE, "kb_simulation_launch: the simulation has already run");
	if (n_pes == 0 || first_pe >= s->n_pes || n_pes > s->n_pes - first_pe)
		return kb__err(err, KB_ERANGE, "kb_simulation_launch: PEs %u..%u are not in 0..%u",
			       first_pe, first_pe + n_pes - 1, s->n_pes - 1);
	for (size_t i = 0; i < s->n_launches; i++)
		if (first_pe < s->launches[i].first + s->launches[i].n &&
		    s->launches[i].first < first_pe + n_pes)
			return kb__err(err, KB_EINVAL, "kb_simulation_launch: PEs %u..%u already run a kernel",
				       first_pe, first_pe + n_pes - 1);
	l = realloc(s->launches, (s->n_launches + 1) * sizeof(*l));
	if (!l)
		return kb__err(err, KB_ENOMEM, "out of memory");
	s->launches = l;
	s->launches[s->n_launches++] = (launch){ fn, args, first_pe, n_pes };
	return KB_OK;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* With kernel_threads, a thread per kernel instance: refused before the
 * first starts (and before the op_log file is touched) when they cannot all
 * start, instead of a failure at the one too many. */
static int kernel_threads_fit(const kb_simulation *s, kb_error *err)
{
	char why[128];
	uint64_t n = 0;

	if (!s->opt.kernel_threads)
		return KB_OK;
	for (size_t i = 0; i < s->n_launches; i++)
		n += s->launches[i].n;
	snprintf(why, sizeof(why), "kernel_threads = %d (a thread per kernel instance)",
		 s->opt.kernel_threads);
	return kb__threads_fit(n, why, "run the kernels as coroutines (kernel_threads = 0) or "
			       "on fewer PEs, or raise the limit", NULL, err);
}

/* How many commands a kernel runs ahead of its PE_CPU (at most the
 * stream's 256). Queued commands leave the cache before PE_SCHEDULER reads
 * them, so shorter is faster; a parallel run's horizons look into the
 * stream, so there it is a trade between window length and misses. */
#define SEQUENTIAL_LOOKAHEAD 16
#define PARALLEL_LOOKAHEAD 48

static int attach_kernels(kb_simulation *s, kb_machine *m, kb_error *err)
{
	for (size_t i = 0; i < s->n_launches; i++) {
		const launch *l = &s->launches[i];

		for (uint32_t k = 0; k < l->n; k++) {
			uint32_t pe = l->first + k;
			kb_tl_config cfg = {
				.pe = pe, .program_id = k, .num_programs = l->n, .n_pes = s->n_pes,
				.cost = m->cost, .tcm_bytes = m->tcm_user_bytes,
				.hbm_bytes = s->tp->mem.hbm_bytes,
				.tag = s->nonce + pe * 2654435761u,
				.timing_only = !m->mem,
			};
			kb_kernel_run *run;
			int rc = kb__kernel_create(&run, l->fn, l->args, &cfg, s->opt.kernel_stack_bytes,
						   s->opt.kernel_threads, err);

			if (rc)
				return rc;
			/* One worker (one thread, or one PE) asks for no horizon:
			 * a short stream. Decode opt2 at S_kv=65536 (composites of
			 * ~4 KB): 232k misses of a 512 KB L2 with 256 queued, 56k
			 * with 16 (cachegrind); task-clock 0.83x. With more workers,
			 * 48: more, shorter windows, but the 8-32 PEs of a thread no
			 * longer queue megabytes (doc/performance.md). Topped up
			 * from 24 rather than from empty, so a horizon always sees
			 * 24-48 commands, not 0-48: opt2 H_kv=8 at --threads 2 runs
			 * 421 windows instead of 715, opt3 H_kv=8 P=4 C=4 132
			 * instead of 196. */
			if (!s->opt.kernel_threads && (s->opt.threads == 1 || s->n_pes == 1)) {
				kb__kernel_lookahead(run, SEQUENTIAL_LOOKAHEAD);
			} else if (!s->opt.kernel_threads) {
				kb__kernel_lookahead(run, PARALLEL_LOOKAHEAD);
				kb__kernel_low_water(run, PARALLEL_LOOKAHEAD / 2);
			}
			m->pes[pe]->source = (kb_cmd_source){ kb__kernel_next, kb__kernel_peek, run,
							      kb__kernel_ring(run) };
		}
	}
	return KB_OK;
}

void kb__result_exec(kb_result *res, const kb_sim_stats *st)
{
	res->windows = st->windows;
	res->parallel_windows = st->parallel_windows;
	res->workers = st->workers;
	res->exec.threads = st->threads ? st->threads : 1;
	res->exec.window_ps = st->window == KB_TIME_INF ? 0 : st->window;
	res->exec.ns_events = st->ns_events;
	res->exec.ns_barrier = st->ns_barrier;
	res->exec.ns_next = st->ns_next;
	res->exec.ns_drain = st->ns_drain;
	res->exec.ns_oplog = st->ns_oplog;
	res->exec.ns_wall = st->ns_wall;
	res->exec.gathered = st->gathered;
	res->alone_events = st->alone_events;
	res->exec_switches = st->switches;
}

/* Fails with KB_ERANGE when a summed figure would pass 2^63 (it is written
 * as a JSON integer): each PE's dispatch time fits, all of them may not. */
static int fill_result(kb_simulation *s, const kb_machine *m, kb_result *res, double wall,
		       kb_error *err)
{
	size_t nb = 0;
	uint64_t loop_ps = 0;

	res->sim_time_ps = s->stats.end_time;
	res->events = s->stats.events;
	kb__result_exec(res, &s->stats);
	res->threads = s->opt.threads;
	res->data = s->opt.data;
	res->pes = s->n_pes;
	res->wall_s = wall;
	res->events_per_s = wall > 0 ? (double)res->events / wall : 0;
	res->tiles = 0;
	res->dispatch_per_tile_ns = NAN;
	res->dispatch_kernel_per_tile_ns = NAN;
	res->max_abs_err = NAN;
	res->max_rel_err = NAN;
	res->busy = calloc((size_t)s->n_pes * KB_PE_LPS, sizeof(*res->busy));
	for (uint32_t p = 0; p < s->n_pes; p++) {
		const kb_pe_figures *f = &m->pes[p]->fig;

		res->commands += f->commands;
		if (kb__time_add(&res->dispatch_ps, f->busy_ps[KB_ENG_CPU])) {   /* kb_pe_figures */
			free(res->busy);
			res->busy = NULL;
			return kb__err(err, KB_ERANGE,
				       "the dispatch time of all %u PEs together passes 2^63 ps "
				       "(pe_cost_model.fixed_cycles, pe_cost_model.r_cycles_per_byte, "
				       "clock_freq_ghz)", s->n_pes);
		}
		for (int e = 0; res->busy && e < KB_PE_LPS; e++)
			res->busy[nb++] = (kb_engine_busy){ p, kb__eng_name(e), f->busy_ps[e] };
		if (m->pes[p]->source.ctx) {
			uint64_t t, l;

			kb__kernel_tiles(m->pes[p]->source.ctx, &t, &l);
			res->tiles += t;
			loop_ps += l;  /* below the summed dispatch_ps, checked above */
		}
	}
	res->n_busy = nb;
	/* Declared by the kernel (kb_tl_tile_loop_begin/end); else absent. */
	if (res->tiles) {
		res->dispatch_per_tile_ns = (double)loop_ps / (double)res->tiles / 1000.0;
		res->dispatch_kernel_per_tile_ns = (double)res->dispatch_ps / (double)res->tiles / 1000.0;
	}
	return KB_OK;
}

KB_API int kb_simulation_run(kb_simulation *s, kb_result *res, kb_error *err)
{
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_sim *sim = NULL;
	kb_machine *m = NULL;
	kb_sim_config cfg = { 0 };
	kb_oplog_pump pump;
	uint64_t records = 0;
	char sha[65];
	double t0;
	int rc;

	kb_error_clear(err);
	if (!s)
		return kb__err(err, KB_EINVAL, "kb_simulation_run: NULL simulation");
	if (s->ran)
		return kb__err(err, KB_ESTATE, "a simulation runs only once");
	if (res && (rc = kb__result_begin(res, "kb_simulation_run", err)))
		return rc;
	s->ran = 1;
	rc = kernel_threads_fit(s, err);
	if (rc)
		return rc;
	oo.path = s->oplog_path;
	oo.trace_path = s->trace_path;
	oo.trace_metadata = s->trace_metadata;
	oo.callback = s->opt.on_record;
	oo.payload = s->opt.payload;
	oo.tracks = kb__eng_names;
	oo.n_tracks = KB_ENG_COUNT;
	oo.channel = kb__eng_channel;
	rc = kb__oplog_create(&log, &oo, err);
	if (rc)
		return rc;
	_Static_assert(KB_THREADS_AUTO == KB_SIM_THREADS_AUTO, "one meaning of auto");
	cfg.threads = s->opt.threads;
	cfg.lat_pe = kb__cycles_to_ps((double)s->tp->link.engine_latency_cycles, s->tp->clock_freq_ghz);
	cfg.lat_cluster = kb__cycles_to_ps((double)s->tp->link.intra_cluster_latency_cycles, s->tp->clock_freq_ghz);
	cfg.lat_global = kb__cycles_to_ps((double)s->tp->link.inter_cluster_latency_cycles, s->tp->clock_freq_ghz);
	kb__oplog_pump_attach(&pump, log, &cfg);
	sim = kb__sim_create(&cfg, err);
	rc = sim ? KB_OK : (err ? err->code : KB_ENOMEM);
	if (!rc)
		rc = kb__machine_create(&m, s->tp, s->n_pes, sim, kb__mem_has_data(s->mem) ? s->mem : NULL,
					log, err);
	if (!rc)
		rc = attach_kernels(s, m, err);
	for (uint32_t p = 0; !rc && p < s->n_pes; p++)
		if (m->pes[p]->source.ctx)
			rc = kb__kernel_start(m->pes[p]->source.ctx, err);
	t0 = now_s();
	if (!rc)
		rc = kb__sim_run(sim, err);
	for (uint32_t p = 0; m && p < s->n_pes; p++)
		if (m->pes[p])
			kb__kernel_stop(m->pes[p]->source.ctx);
	{
		kb_error ferr;
		int frc;

		/* A failed run leaves no op_log or trace cut mid-record. */
		if (rc)
			kb__oplog_discard(log);
		frc = kb__oplog_finish(log, sha, &records, &ferr);
		if (!rc && frc) {
			kb__err_copy(err, &ferr);
			rc = frc;
		}
	}
	if (!rc && res) {
		kb_result full = KB_RESULT_INIT; /* filled in full, then handed over within res->size */

		s->stats = *kb__sim_stats(sim);
		kb__result_init(&full);
		rc = fill_result(s, m, &full, now_s() - t0, err);
		memcpy(full.oplog_sha256, sha, sizeof(sha));
		full.records = records;
		full.exec.ns_oplog_serial = kb__oplog_sink_ns(log);
		if (rc)
			kb_result_clear(&full);
		else
			kb__result_deliver(res, &full);
	}
	for (uint32_t p = 0; m && p < s->n_pes; p++)
		if (m->pes[p])
			kb__kernel_destroy(m->pes[p]->source.ctx);
	kb__sim_destroy(sim);
	kb__machine_destroy(m);
	kb__oplog_destroy(log);
	return rc;
}

kb_memstore *kb__simulation_mem(kb_simulation *s)
{
	return s->mem;
}

const kb_topo_params *kb__simulation_params(const kb_simulation *s)
{
	return s->tp;
}
