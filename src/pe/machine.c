/* Builds the PEs of a machine as LPs, PE-major (op_log order at equal times). */
#include "pe/machine.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

const char *const kb__eng_names[KB_ENG_COUNT] = {
	"cpu", "sched", "dma", "tcm", "gemm", "math", "ipcq", "lp",
};

const char *kb__eng_name(int eng)
{
	return eng >= 0 && eng < KB_ENG_COUNT ? kb__eng_names[eng] : "?";
}

const char *kb__eng_channel(int eng, const kb_oplog_record *r)
{
	if (eng == KB_ENG_DMA)
		return strcmp(r->op, "dma_write") == 0 ? "dma_write" : "dma_read";
	if (eng == KB_ENG_IPCQ)
		return strcmp(r->op, "recv") == 0 ? "ipcq_recv" : "ipcq_send";
	return kb__eng_name(eng);
}

int kb__pe_after_fail(kb_lp *lp, const kb_machine *m, double cycles, const char *what,
		      const char *keys)
{
	return kb__lp_fail(lp, KB_ERANGE,
			   "simulated time would pass 2^63 ps: %s takes %.6g cycles at "
			   "clock_freq_ghz = %g (set by %s and clock_freq_ghz)",
			   what, cycles, m->cost.clock_ghz, keys);
}

/* Staging slots reserve TCM for in-flight tiles: a, b and out tiles in fp32 size. */
uint64_t kb__machine_staging_bytes(const kb_topo_params *tp)
{
	return tp->sched.max_inflight_tiles *
	       (tp->gemm.tile_m * tp->gemm.tile_k + tp->gemm.tile_k * tp->gemm.tile_n +
		tp->gemm.tile_m * tp->gemm.tile_n) * 4;
}

/* A PE: one LP of each type, in kb_eng order. */
static const kb_lp_type *const pe_lp_types[KB_PE_LPS] = {
	[KB_ENG_CPU] = &kb__cpu_type,
	[KB_ENG_SCHED] = &kb__sched_type,
	[KB_ENG_DMA] = &kb__engine_types[KB_ENG_DMA],
	[KB_ENG_TCM] = &kb__engine_types[KB_ENG_TCM],
	[KB_ENG_GEMM] = &kb__engine_types[KB_ENG_GEMM],
	[KB_ENG_MATH] = &kb__engine_types[KB_ENG_MATH],
	[KB_ENG_IPCQ] = &kb__ipcq_type,
};

int kb__machine_create(kb_machine **out, const kb_topo_params *tp, uint32_t n_pes, kb_sim *sim,
		       kb_memstore *mem, kb_oplog *log, kb_error *err)
{
	kb_machine *m = calloc(1, sizeof(*m));
	uint32_t per_cluster = tp->pes_per_cluster;
	int rc = KB_OK;

	*out = NULL;
	if (!m)
		return kb__err(err, KB_ENOMEM, "out of memory building the machine");
	m->tp = tp;
	m->cost = (kb_cost_model){ tp->cost.fixed_cycles, tp->cost.r_cycles_per_byte,
				   tp->cost.max_composite_logical_bytes, tp->clock_freq_ghz };
	kb__clock_init(&m->clock, tp->clock_freq_ghz);
	m->mem = mem;
	m->n_pes = n_pes;
	m->sim = sim;
	m->staging_slots = tp->sched.max_inflight_tiles > 64 ? 64 : (uint32_t)tp->sched.max_inflight_tiles;
	m->tcm_user_bytes = tp->mem.tcm_bytes - kb__machine_staging_bytes(tp);
	m->pes = calloc(n_pes, sizeof(*m->pes));
	if (!m->pes) {
		free(m);
		return kb__err(err, KB_ENOMEM, "out of memory building the machine");
	}
	*out = m;
	for (uint32_t p = 0; !rc && p < n_pes; p++) {
		kb_pe_state *ps = calloc(1, sizeof(*ps));

		if (!ps)
			return kb__err(err, KB_ENOMEM, "out of memory building pe%u", p);
		ps->pe = p;
		ps->cluster = p / per_cluster;
		ps->m = m;
		m->pes[p] = ps;
		for (int e = 0; !rc && e < KB_PE_LPS; e++) {
			kb_pe_lp_arg arg = { ps, e };
			uint32_t id = kb__pe_lp(p, e);

			/* One lane per LP, merged in LP-id order (PE-major); made
			 * first, so that the LP's init can keep it. */
			if (log && !(ps->lane[e] = kb__oplog_lane(log, id)))
				rc = kb__err(err, KB_ENOMEM, "out of memory building pe%u", p);
			/* The sim owns the LP's state from here (its type's final). */
			else if (kb__sim_add_lp(sim, pe_lp_types[e], &arg, p, ps->cluster) != id)
				rc = kb__err(err, KB_ENOMEM, "out of memory building pe%u.%s", p,
					     kb__eng_name(e));
			else
				ps->lp_state[e] = kb__sim_lp_state(sim, id);
		}
	}
	return rc;
}

void kb__machine_destroy(kb_machine *m)
{
	if (!m)
		return;
	for (uint32_t p = 0; p < m->n_pes; p++) {
		kb_pe_state *ps = m->pes[p];

		if (!ps)
			continue;
		free(ps);
	}
	free(m->pes);
	free(m);
}
