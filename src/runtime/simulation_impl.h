/* What the bench layer reads of a simulation besides the public API. */
#ifndef KB_RUNTIME_SIMULATION_IMPL_H
#define KB_RUNTIME_SIMULATION_IMPL_H

#include "kernbench/simulation.h"
#include "model/memstore.h"
#include "model/topology.h"

kb_memstore *kb__simulation_mem(kb_simulation *s);
const kb_topo_params *kb__simulation_params(const kb_simulation *s);

#endif
