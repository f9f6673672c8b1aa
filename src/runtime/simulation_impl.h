/* What the bench layer reads of a simulation besides the public API. */
#ifndef KB_RUNTIME_SIMULATION_IMPL_H
#define KB_RUNTIME_SIMULATION_IMPL_H

#include "kernbench/simulation.h"
#include "model/memstore.h"
#include "model/topology.h"
#include "kernbench/bench.h"
#include "sim/sim.h"

kb_memstore *kb__simulation_mem(kb_simulation *s);
/* The executor's figures of a finished run into res (windows, workers, exec). */
void kb__result_exec(kb_result *res, const kb_sim_stats *st);
const kb_topo_params *kb__simulation_params(const kb_simulation *s);

#endif
