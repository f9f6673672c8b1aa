/*
 * The op_log side of the core's window hook (kb_sim_config.on_window):
 * the core says when records are final, the pump seals and writes them.
 * Records buffered in the lanes are written once more than a few thousand
 * wait, so memory holds only a bounded tail; which records go when never
 * changes the bytes (the op_log merges in a fixed total order).
 *
 * Thread rules: the callbacks run on the executor's coordinating thread,
 * as kb_sim_config says.
 */
#ifndef KB_RUNTIME_OPLOG_PUMP_H
#define KB_RUNTIME_OPLOG_PUMP_H

#include "oplog/oplog.h"
#include "sim/sim.h"

typedef struct kb_oplog_pump {
	kb_oplog *log;
} kb_oplog_pump;

/* Points cfg's window hook at a pump over log (log may be NULL: no hook). */
void kb__oplog_pump_attach(kb_oplog_pump *p, kb_oplog *log, kb_sim_config *cfg);

#endif
