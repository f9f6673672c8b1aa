#include "oplog/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "oplog/oplog.h"

struct kb_trace {
	FILE *f;
	char *path;
	int first;
	/* PEs whose process/thread names were already written (bitmap per engine). */
	uint8_t *seen;
	size_t seen_cap;
	int closed;
};

int kb__trace_open(kb_trace **out, const char *path, kb_error *err)
{
	kb_trace *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return kb__err(err, KB_ENOMEM, "out of memory opening the trace");
	t->path = strdup(path);
	t->f = fopen(path, "w");
	if (!t->path || !t->f) {
		int rc = kb__err(err, KB_EIO, "cannot write trace '%s': %s", path, strerror(errno));

		if (t->f)
			fclose(t->f);
		free(t->path);
		free(t);
		return rc;
	}
	setvbuf(t->f, NULL, _IOFBF, 1 << 20);
	t->first = 1;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", t->f);
	*out = t;
	return KB_OK;
}

static int eng_index(const char *eng)
{
	for (int i = 0; i < KB_ENG_COUNT; i++)
		if (strcmp(kb__eng_name(i), eng) == 0)
			return i;
	return KB_ENG_COUNT - 1;
}

/* Picoseconds as microseconds with six decimals: exact, no floating point. */
static void print_us(FILE *f, uint64_t ps)
{
	fprintf(f, "%" PRIu64 ".%06" PRIu64, ps / 1000000u, ps % 1000000u);
}

static void sep(kb_trace *t)
{
	if (!t->first)
		fputs(",\n", t->f);
	t->first = 0;
}

static int name_thread(kb_trace *t, uint32_t pe, int eng)
{
	if (pe >= t->seen_cap) {
		size_t cap = t->seen_cap ? t->seen_cap : 64;
		uint8_t *s;

		while (cap <= pe)
			cap *= 2;
		s = realloc(t->seen, cap);
		if (!s)
			return -1;
		memset(s + t->seen_cap, 0, cap - t->seen_cap);
		t->seen = s;
		t->seen_cap = cap;
	}
	if (!t->seen[pe]) {
		sep(t);
		fprintf(t->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
			",\"args\":{\"name\":\"pe%" PRIu32 "\"}}", pe, pe);
	}
	if (!(t->seen[pe] & (1u << eng))) {
		sep(t);
		fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRIu32
			",\"tid\":%d,\"args\":{\"name\":\"%s\"}}", pe, eng, kb__eng_name(eng));
		t->seen[pe] |= (uint8_t)(1u << eng);
	}
	return 0;
}

int kb__trace_record(kb_trace *t, const kb_oplog_record *r)
{
	int eng = eng_index(r->eng);

	if (name_thread(t, r->pe, eng))
		return -1;
	sep(t);
	fprintf(t->f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":", r->op, r->eng);
	print_us(t->f, r->t0_ps);
	fputs(",\"dur\":", t->f);
	print_us(t->f, r->t1_ps - r->t0_ps);
	fprintf(t->f, ",\"pid\":%" PRIu32 ",\"tid\":%d,\"args\":%.*s}", r->pe, eng,
		(int)r->json_len, r->json);
	return ferror(t->f) ? -1 : 0;
}

int kb__trace_close(kb_trace *t)
{
	int rc = 0;

	if (t->closed)
		return 0;
	t->closed = 1;
	fputs("\n]}\n", t->f);
	if (ferror(t->f))
		rc = -1;
	if (fclose(t->f) == EOF)
		rc = -1;
	return rc;
}

const char *kb__trace_path(const kb_trace *t)
{
	return t->path;
}

void kb__trace_free(kb_trace *t)
{
	if (!t)
		return;
	free(t->seen);
	free(t->path);
	free(t);
}
