#include "model/memstore.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define HBM_ALIGN 256u

typedef struct hbm_block {
	uint64_t addr, bytes;
	uint8_t *data;
	uint8_t *written;        /* one bit per 2 bytes (the smallest element) */
} hbm_block;

typedef struct tcm_bank {
	uint8_t *data;
	uint8_t *written;
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
			m->tcm[i].written = calloc(tcm_bytes / 16 + 1, 1);
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
		size_t cap = m->cap_blocks ? 2 * m->cap_blocks : 16;
		hbm_block *nb = realloc(m->blocks, cap * sizeof(*nb));

		if (!nb)
			return kb__err(err, KB_ENOMEM, "out of memory");
		m->blocks = nb;
		m->cap_blocks = cap;
	}
	b = &m->blocks[m->n_blocks];
	memset(b, 0, sizeof(*b));
	b->addr = m->hbm_next;
	b->bytes = bytes;
	if (m->data) {
		b->data = zero ? calloc(1, bytes) : malloc(bytes);
		b->written = calloc(bytes / 16 + 1, 1);
		if (!b->data || !b->written) {
			free(b->data);
			free(b->written);
			return kb__err(err, KB_ENOMEM, "out of host memory for a %llu-byte HBM tensor",
				       (unsigned long long)bytes);
		}
		if (zero)
			memset(b->written, 0xff, bytes / 16 + 1);
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

static int bit_get(const uint8_t *bm, uint64_t i)
{
	return (__atomic_load_n(&bm[i >> 3], __ATOMIC_RELAXED) >> (i & 7)) & 1;
}

static void bits_set(uint8_t *bm, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		__atomic_fetch_or(&bm[i >> 3], (uint8_t)(1u << (i & 7)), __ATOMIC_RELAXED);
}

static int bits_all(const uint8_t *bm, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		if (!bit_get(bm, i))
			return 0;
	return 1;
}

/* Resolves a region to its bank: data base, written bitmap, offset of addr. */
static int resolve(kb_memstore *m, const kb_region *r, uint8_t **data, uint8_t **bm,
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
	uint8_t *data, *bm;
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
	uint8_t *data, *bm;
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
