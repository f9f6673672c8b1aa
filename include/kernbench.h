/*
 * kernbench: a deterministic, multithreaded simulator of an AI accelerator
 * whose processing elements sit next to HBM. This umbrella header includes
 * the whole public API; see doc/api.md and doc/threadsafety.md.
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
#include "kernbench/tl.h"
#include "kernbench/json.h"

#endif
