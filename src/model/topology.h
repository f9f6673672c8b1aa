/*
 * Internal view of a topology: the validated, typed parameters the
 * simulator reads. Filled only by src/model/topology.c, whose schema table
 * maps every JSON key to one field here.
 */
#ifndef KB_MODEL_TOPOLOGY_H
#define KB_MODEL_TOPOLOGY_H

#include <stdint.h>

#include "kernbench/topology.h"

/* pe.scheduler.policy: how PE_SCHEDULER admits commands (src/pe/sched.c). */
typedef enum kb_sched_policy { KB_SCHED_STRICT_FIFO = 0, KB_SCHED_RW_AWARE } kb_sched_policy;

typedef struct kb_topo_params {
	double clock_freq_ghz;
	uint32_t clusters, pes_per_cluster;
	struct {
		double fixed_cycles, r_cycles_per_byte;
		uint64_t max_composite_logical_bytes;
	} cost;
	struct {
		uint64_t engine_latency_cycles, intra_cluster_latency_cycles,
			inter_cluster_latency_cycles;
		double intra_cluster_bytes_per_cycle, inter_cluster_bytes_per_cycle;
	} link;
	struct {
		uint64_t hbm_bytes, tcm_bytes;
	} mem;
	struct {
		uint64_t setup_cycles;
		double bytes_per_cycle;
	} dma;
	struct {
		uint64_t latency_cycles;
		double bytes_per_cycle;
	} tcm;
	struct {
		uint64_t macs_per_cycle, fill_cycles, tile_m, tile_n, tile_k;
	} gemm;
	struct {
		uint64_t vector_width;
	} math;
	struct {
		uint64_t max_inflight_tiles;
	} sched;
	struct {
		uint32_t policy;     /* kb_sched_policy */
	} scheduler;
	struct {
		uint64_t setup_cycles;
	} ipcq;
} kb_topo_params;

/*
 * The validated parameters of t; valid until t is modified or destroyed.
 * Any thread; same sharing rule as the kb_topology it reads.
 */
const kb_topo_params *kb__topology_params(const kb_topology *t);

#endif
