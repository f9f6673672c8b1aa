/* A machine: the PEs of a topology as LPs of one simulation. */
#ifndef KB_PE_MACHINE_H
#define KB_PE_MACHINE_H

#include "pe/pe.h"

int kb__machine_create(kb_machine **out, const kb_topo_params *tp, uint32_t n_pes, kb_sim *sim,
		       kb_memstore *mem, kb_oplog *log, kb_error *err);
/* Frees the machine; the LPs' states go with the simulation (destroy it
 * first: their final callbacks may read the PE). */
void kb__machine_destroy(kb_machine *m);
uint64_t kb__machine_staging_bytes(const kb_topo_params *tp);

#endif
