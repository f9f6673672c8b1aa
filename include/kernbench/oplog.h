/*
 * op_log records as an embedding program receives them.
 *
 * Thread rules: the callback is called on the thread that runs the
 * simulation (the caller of kb_simulation_run or kb_bench_run), in the
 * op_log's total order.
 */
#ifndef KERNBENCH_OPLOG_H
#define KERNBENCH_OPLOG_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_oplog_record {
	uint64_t t0_ps;        /* start, picoseconds */
	uint64_t t1_ps;        /* end, picoseconds */
	uint32_t pe;           /* global PE index (LP index for the synthetic model) */
	const char *eng;       /* "cpu", "sched", "dma", "tcm", "gemm", "math", "ipcq", "lp" */
	const char *op;        /* stage kind: "dispatch", "dma_read", "gemm", "rmax", ... */
	uint64_t cmd;          /* command id, per PE */
	const char *kind;      /* dispatch records: command kind; otherwise NULL */
	int64_t lbytes;        /* dispatch records: logical bytes; otherwise -1 */
	int64_t bytes;         /* records that move data: bytes; otherwise -1 */
	const char *json;      /* the record's JSON line, without the newline; NOT NUL-terminated: use json_len */
	size_t json_len;
	/* sizeof(kb_oplog_record) of the library that filled the record, so
	 * the struct can grow: a field added later comes after this one and
	 * is there only when size covers it (offsetof + sizeof <= size). */
	size_t size;
} kb_oplog_record;

/* Receives each record; return 0 to go on, nonzero to fail the run. */
typedef int (*kb_oplog_cb)(const kb_oplog_record *rec, void *payload);

#ifdef __cplusplus
}
#endif
#endif
