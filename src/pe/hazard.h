/*
 * PE_SCHEDULER's hazard test (DDD §8, ADR-0065 A4): command c conflicts
 * with f when c writes a handle f reads or writes, or reads one f writes.
 *
 * The exact test compares handle ids pairwise. A signature (one bit per
 * handle id, from a multiplicative hash of it, for the reads and for the
 * writes) answers most questions without that: ids that meet set the same
 * bit, so signatures that do not meet prove no conflict; signatures that
 * meet say nothing (two ids may share a bit) and the exact test decides.
 */
#ifndef KB_PE_HAZARD_H
#define KB_PE_HAZARD_H

#include <stdint.h>

#include "pe/cmd.h"

static inline int kb__hazard_has(const uint64_t *v, uint32_t n, uint64_t x)
{
	for (uint32_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

static inline int kb__hazard_overlaps(const uint64_t *a, uint32_t na, const uint64_t *b,
				      uint32_t nb)
{
	for (uint32_t i = 0; i < na; i++)
		if (kb__hazard_has(b, nb, a[i]))
			return 1;
	return 0;
}

/* The exact test: does c conflict with f? */
static inline int kb__hazard_conflicts(const kb_cmd *c, const kb_cmd *f)
{
	return kb__hazard_overlaps(c->writes, c->n_writes, f->writes, f->n_writes) ||
	       kb__hazard_overlaps(c->writes, c->n_writes, f->reads, f->n_reads) ||
	       kb__hazard_overlaps(c->reads, c->n_reads, f->writes, f->n_writes);
}

typedef struct kb_hazard_sig {
	uint64_t r, w;           /* one bit per handle read / written */
} kb_hazard_sig;

/* The low 6 bits of the id: handle ids are handed out one after another,
 * so the handles of nearby commands (those in flight together) get
 * different bits, as a multiplicative hash gave them, for one instruction
 * an id (x86's shift takes its count modulo 64, so the mask costs none)
 * instead of three. Which bit an id gets decides only how often the
 * exact test runs, never its answer. */
static inline uint64_t kb__hazard_bit(uint64_t id)
{
	return UINT64_C(1) << (id & 63);
}

/* b with id's bit set. On x86-64 one bts, which takes its bit index
 * modulo 64 as kb__hazard_bit does: the compiler makes the shift three
 * instructions (a 1 to load, the shift, the or), seven an id in all with
 * the loop's. */
static inline uint64_t kb__hazard_set(uint64_t b, uint64_t id)
{
#if defined(__x86_64__)
	__asm__("btsq %1, %0" : "+r"(b) : "r"(id) : "cc");
	return b;
#else
	return b | kb__hazard_bit(id);
#endif
}

static inline uint64_t kb__hazard_bits(const uint64_t *ids, uint32_t n)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < n; i++)
		b = kb__hazard_set(b, ids[i]);
	return b;
}

static inline kb_hazard_sig kb__hazard_sign(const kb_cmd *c)
{
	return (kb_hazard_sig){ kb__hazard_bits(c->reads, c->n_reads),
				kb__hazard_bits(c->writes, c->n_writes) };
}

/* 0: a command signed c conflicts with no command signed f. 1: it may. */
static inline int kb__hazard_may_conflict(kb_hazard_sig c, kb_hazard_sig f)
{
	return ((c.w & (f.w | f.r)) | (c.r & f.w)) != 0;
}

#endif
