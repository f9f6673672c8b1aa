#include "model/memstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/memlimit.h"

#define HBM_ALIGN 256u

/* Words of a written bitmap covering `bytes` (one bit per 2 bytes, rounded up). */
static size_t bm_words(uint64_t bytes)
{
	return (size_t)(bytes / 128 + 1);
}

typedef struct hbm_block {
	uint64_t addr, bytes;
	uint8_t *data;
	uint64_t *written;       /* one bit per 2 bytes (the smallest element) */
} hbm_block;

typedef struct tcm_bank {
	uint8_t *data;
	uint64_t *written;
} tcm_bank;

struct kb_memstore {
	uint64_t hbm_bytes, hbm_next, tcm_bytes;
	uint32_t n_pes;
	int data;
	hbm_block *blocks;       /* sorted by address (bump allocation) */
	size_t n_blocks, cap_blocks;
	tcm_bank *tcm;
};

int kb__mem_create(kb_memstore **out, uint64_t hbm_bytes, uint32_t n_pes, uint64_t tcm_bytes,
		   int data, kb_error *err)
{
	kb_memstore *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return kb__err(err, KB_ENOMEM, "out of memory creating the memory store");
	m->hbm_bytes = hbm_bytes;
	m->hbm_next = HBM_ALIGN;  /* address 0 stays invalid: it catches NULL-like refs */
	m->tcm_bytes = tcm_bytes;
	m->n_pes = n_pes;
	m->data = data;
	if (data) {
		m->tcm = calloc(n_pes, sizeof(*m->tcm));
		if (!m->tcm)
			goto oom;
		for (uint32_t i = 0; i < n_pes; i++) {
			m->tcm[i].data = malloc(tcm_bytes);
			m->tcm[i].written = calloc(bm_words(tcm_bytes), sizeof(uint64_t));
			if (!m->tcm[i].data || !m->tcm[i].written)
				goto oom;
		}
	}
	*out = m;
	return KB_OK;
oom:
	kb__mem_destroy(m);
	return kb__err(err, KB_ENOMEM, "out of memory for %u PEs x %llu bytes of TCM", n_pes,
		       (unsigned long long)tcm_bytes);
}

void kb__mem_destroy(kb_memstore *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_blocks; i++) {
		free(m->blocks[i].data);
		free(m->blocks[i].written);
	}
	for (uint32_t i = 0; m->tcm && i < m->n_pes; i++) {
		free(m->tcm[i].data);
		free(m->tcm[i].written);
	}
	free(m->tcm);
	free(m->blocks);
	free(m);
}

int kb__mem_has_data(const kb_memstore *m)
{
	return m->data;
}

/*
 * The host bytes of an HBM tensor. Tensors of 2 MiB or more are aligned to
 * 2 MiB and offered to transparent huge pages: a data-mode run streams
 * them tile by tile (DMA_READ of K and V), and with 4 KiB pages every 16 KiB
 * tile crossed four pages, each a TLB miss and a stop for the hardware
 * prefetcher (perf: the loads of K/V tiles were the largest share of the
 * numbers' time). Without MADV_HUGEPAGE (or if the kernel says no) it is
 * the same memory in small pages. free() releases either. Zeroed tensors
 * (outputs) stay with calloc, which touches no page until it is written.
 */
enum { HUGE_PAGE = 2 << 20 };

static void *hbm_bytes_alloc(uint64_t bytes, int zero)
{
	void *p = NULL;

	if (zero) /* calloc's pages stay untouched until written */
		return calloc(1, (size_t)bytes);
	if (bytes < HUGE_PAGE)
		return malloc((size_t)bytes);
	if (posix_memalign(&p, HUGE_PAGE, (size_t)bytes))
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, (size_t)bytes, MADV_HUGEPAGE); /* advice: refusal changes nothing */
#endif
	return p;
}

int kb__mem_hbm_alloc(kb_memstore *m, uint64_t bytes, int zero, uint64_t *addr, kb_error *err)
{
	uint64_t size = (bytes + HBM_ALIGN - 1) / HBM_ALIGN * HBM_ALIGN;
	hbm_block *b;

	if (bytes == 0 || size < bytes || m->hbm_next > m->hbm_bytes || size > m->hbm_bytes - m->hbm_next)
		return kb__err(err, KB_ERANGE,
			       "HBM exhausted: %llu bytes requested, %llu of memory.hbm_bytes = %llu free",
			       (unsigned long long)bytes,
			       (unsigned long long)(m->hbm_bytes - m->hbm_next),
			       (unsigned long long)m->hbm_bytes);
	if (m->n_blocks == m->cap_blocks) {
		hbm_block *nb = kb__grow(m->blocks, &m->cap_blocks, sizeof(*nb), 16);

		if (!nb)
			return kb__err(err, KB_ENOMEM, "out of memory");
		m->blocks = nb;
	}
	if (m->data) {
		/* Data mode holds every HBM byte on the host too, with a bit of
		 * "written" map per byte: refuse what cannot fit, up front. */
		uint64_t held = m->hbm_next - HBM_ALIGN + bytes;
		char why[128];
		int rc;

		snprintf(why, sizeof(why), "data mode: HBM tensors of %llu bytes in all",
			 (unsigned long long)held);
		rc = kb__mem_need(held + held / 8, why, err);
		if (rc)
			return rc;
	}
	b = &m->blocks[m->n_blocks];
	memset(b, 0, sizeof(*b));
	b->addr = m->hbm_next;
	b->bytes = bytes;
	if (m->data) {
		b->data = hbm_bytes_alloc(bytes, zero);
		b->written = calloc(bm_words(bytes), sizeof(uint64_t));
		if (!b->data || !b->written) {
			free(b->data);
			free(b->written);
			return kb__err(err, KB_ENOMEM, "out of host memory for a %llu-byte HBM tensor",
				       (unsigned long long)bytes);
		}
		if (zero)
			memset(b->written, 0xff, bm_words(bytes) * sizeof(uint64_t));
	}
	m->n_blocks++;
	m->hbm_next += size;
	*addr = b->addr;
	return KB_OK;
}

static hbm_block *find_block(kb_memstore *m, uint64_t addr, uint64_t bytes)
{
	size_t lo = 0, hi = m->n_blocks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->blocks[mid].addr + m->blocks[mid].bytes <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->n_blocks && m->blocks[lo].addr <= addr &&
	    bytes <= m->blocks[lo].bytes - (addr - m->blocks[lo].addr))
		return &m->blocks[lo];
	return NULL;
}

/*
 * The written bitmaps are arrays of 64-bit words, so marking or checking a
 * row touches one word per 128 bytes rather than one bit at a time (the
 * per-bit loops were 29% of a data-mode decode run). Words are accessed
 * atomically (relaxed): PEs on other threads may mark neighbouring ranges
 * that share an edge word.
 */
static uint64_t word_mask(uint64_t from, uint64_t to)
{
	/* Bits [from, to) of one word, 0 <= from < to <= 64. */
	uint64_t hi = to == 64 ? ~UINT64_C(0) : (UINT64_C(1) << to) - 1;

	return hi & ~((UINT64_C(1) << from) - 1);
}

static void bits_set(uint64_t *bm, uint64_t from, uint64_t to)
{
	uint64_t w = from / 64, last = to / 64;

	if (from >= to)
		return;
	if (w == last) {
		__atomic_fetch_or(&bm[w], word_mask(from % 64, to % 64), __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_or(&bm[w], word_mask(from % 64, 64), __ATOMIC_RELAXED);
	for (w++; w < last; w++)
		__atomic_store_n(&bm[w], ~UINT64_C(0), __ATOMIC_RELAXED);
	if (to % 64)
		__atomic_fetch_or(&bm[last], word_mask(0, to % 64), __ATOMIC_RELAXED);
}

static int word_has(const uint64_t *bm, uint64_t w, uint64_t mask)
{
	return (__atomic_load_n(&bm[w], __ATOMIC_RELAXED) & mask) == mask;
}

static int bits_all(const uint64_t *bm, uint64_t from, uint64_t to)
{
	uint64_t w = from / 64, last = to / 64;

	if (from >= to)
		return 1;
	if (w == last)
		return word_has(bm, w, word_mask(from % 64, to % 64));
	if (!word_has(bm, w, word_mask(from % 64, 64)))
		return 0;
	for (w++; w < last; w++)
		if (!word_has(bm, w, ~UINT64_C(0)))
			return 0;
	return to % 64 == 0 || word_has(bm, last, word_mask(0, to % 64));
}

/* Resolves a region to its bank: data base, written bitmap, offset of addr. */
static int resolve(kb_memstore *m, const kb_region *r, uint8_t **data, uint64_t **bm,
		   uint64_t *off, const char *what, kb_error *err)
{
	uint64_t span = r->rows ? (r->rows - 1) * r->pitch + r->row_bytes : 0;
	const char *sp = r->space == KB_MEM_HBM ? "HBM" : "TCM";

	if (r->align > 1 && (r->addr % r->align || r->pitch % r->align))
		return kb__err(err, KB_EMEM, "%s: misaligned %s address 0x%llx for %u-byte elements",
			       what, sp, (unsigned long long)r->addr, r->align);
	if (r->space == KB_MEM_HBM) {
		hbm_block *b = find_block(m, r->addr, span);

		if (!b)
			return kb__err(err, KB_EMEM,
				       "%s: HBM range 0x%llx + %llu bytes is not inside one allocated tensor",
				       what, (unsigned long long)r->addr, (unsigned long long)span);
		*data = b->data;
		*bm = b->written;
		*off = r->addr - b->addr;
		return KB_OK;
	}
	if (r->pe >= m->n_pes || r->addr > m->tcm_bytes || span > m->tcm_bytes - r->addr)
		return kb__err(err, KB_EMEM, "%s: TCM range 0x%llx + %llu bytes is outside pe%u's TCM (%llu bytes)",
			       what, (unsigned long long)r->addr, (unsigned long long)span, r->pe,
			       (unsigned long long)m->tcm_bytes);
	*data = m->tcm[r->pe].data;
	*bm = m->tcm[r->pe].written;
	*off = r->addr;
	return KB_OK;
}

int kb__mem_read(kb_memstore *m, const kb_region *r, const void **base, const char *what,
		 kb_error *err)
{
	uint8_t *data;
	uint64_t *bm;
	uint64_t off;
	int rc = resolve(m, r, &data, &bm, &off, what, err);

	if (rc)
		return rc;
	for (uint64_t i = 0; i < r->rows; i++) {
		uint64_t o = off + i * r->pitch;

		if (!bits_all(bm, o / 2, (o + r->row_bytes + 1) / 2))
			return kb__err(err, KB_EMEM,
				       "%s: read of %s bytes never written at 0x%llx (row %llu of %llu)",
				       what, r->space == KB_MEM_HBM ? "HBM" : "TCM",
				       (unsigned long long)(r->addr + i * r->pitch),
				       (unsigned long long)i, (unsigned long long)r->rows);
	}
	*base = data + off;
	return KB_OK;
}

int kb__mem_write(kb_memstore *m, const kb_region *r, void **base, const char *what,
		  kb_error *err)
{
	uint8_t *data;
	uint64_t *bm;
	uint64_t off;
	int rc = resolve(m, r, &data, &bm, &off, what, err);

	if (rc)
		return rc;
	for (uint64_t i = 0; i < r->rows; i++) {
		uint64_t o = off + i * r->pitch;

		bits_set(bm, o / 2, (o + r->row_bytes + 1) / 2);
	}
	*base = data + off;
	return KB_OK;
}

int kb__mem_upload(kb_memstore *m, uint64_t addr, const void *src, size_t bytes, kb_error *err)
{
	kb_region r = { KB_MEM_HBM, 0, addr, 1, bytes, bytes, 1 };
	void *p;
	int rc;

	if (!m->data)
		return kb__err(err, KB_ESTATE, "upload needs data mode");
	rc = kb__mem_write(m, &r, &p, "upload", err);
	if (!rc)
		memcpy(p, src, bytes);
	return rc;
}

int kb__mem_download(kb_memstore *m, uint64_t addr, void *dst, size_t bytes, kb_error *err)
{
	kb_region r = { KB_MEM_HBM, 0, addr, 1, bytes, bytes, 1 };
	const void *p;
	int rc;

	if (!m->data)
		return kb__err(err, KB_ESTATE, "download needs data mode");
	rc = kb__mem_read(m, &r, &p, "download", err);
	if (!rc)
		memcpy(dst, p, bytes);
	return rc;
}
