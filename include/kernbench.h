/*
 * kernbench: a deterministic, multithreaded simulator of an AI accelerator
 * whose processing elements sit next to HBM. This umbrella header includes
 * the whole public API; see api.md and threadsafety.md
 * in the installed documentation (share/doc/kernbench).
 */
#ifndef KERNBENCH_H
#define KERNBENCH_H

#include "kernbench/version.h"
#include "kernbench/common.h"
#include "kernbench/topology.h"
#include "kernbench/oplog.h"
#include "kernbench/bench.h"
#include "kernbench/sweep.h"
#include "kernbench/simulation.h"
#include "kernbench/registry.h"
#include "kernbench/tl.h"
#include "kernbench/json.h"

#endif
