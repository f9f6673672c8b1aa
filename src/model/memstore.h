/*
 * The memory store of data mode: HBM (host tensors, allocated by a bump
 * allocator) and each PE's TCM. Every access is checked: an address out of
 * range or misaligned for its dtype, or a read of bytes never written, is
 * an error naming the address and the operation; nothing reads garbage.
 *
 * Concurrency: engines of different PEs access HBM from different threads
 * in a run. Kernels order conflicting accesses by commands and messages,
 * which carry the happens-before; the written-bytes bitmaps are updated
 * atomically because neighbouring tensors may share a bitmap byte.
 */
#ifndef KB_MODEL_MEMSTORE_H
#define KB_MODEL_MEMSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"

typedef struct kb_memstore kb_memstore;

typedef enum kb_mspace { KB_MEM_HBM = 0, KB_MEM_TCM = 1 } kb_mspace;

/* data: whether TCM/HBM bytes exist (timing mode keeps only the allocator). */
int kb__mem_create(kb_memstore **out, uint64_t hbm_bytes, uint32_t n_pes, uint64_t tcm_bytes,
		   int data, kb_error *err);
void kb__mem_destroy(kb_memstore *m);
int kb__mem_has_data(const kb_memstore *m);

/* Allocates HBM (256-byte aligned); zero fills it and marks it written. */
int kb__mem_hbm_alloc(kb_memstore *m, uint64_t bytes, int zero, uint64_t *addr, kb_error *err);

/* A 2-D strided region: rows x row_bytes, rows `pitch` bytes apart. */
typedef struct kb_region {
	kb_mspace space;
	uint32_t pe;
	uint64_t addr;
	uint64_t rows, row_bytes, pitch;
	unsigned align;          /* element size: addresses must be multiples */
} kb_region;

/* Base pointer of a region after checking range and alignment; for reads
 * also that every byte was written. `what` names the operation. */
int kb__mem_read(kb_memstore *m, const kb_region *r, const void **base, const char *what,
		 kb_error *err);
/* Same for writes; marks the bytes written. */
int kb__mem_write(kb_memstore *m, const kb_region *r, void **base, const char *what,
		  kb_error *err);

/* Host upload/download of whole byte ranges of HBM. */
int kb__mem_upload(kb_memstore *m, uint64_t addr, const void *src, size_t bytes, kb_error *err);
int kb__mem_download(kb_memstore *m, uint64_t addr, void *dst, size_t bytes, kb_error *err);

#endif
