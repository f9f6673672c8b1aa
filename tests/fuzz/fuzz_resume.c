/*
 * Fuzz target: resume files (issue 18 §4). The first byte picks the format
 * (even: CSV, odd: JSON Lines), the rest is the file, read back as the
 * output of a sweep over synthetic with events=10,20 and lps=1,2. Contracts
 * checked: a file is accepted or refused with a message (and, past the
 * header, the line that failed); what is kept ends at a line end inside
 * the file; every kept row is a whole line of the file, verified, at most
 * one per point; a second read of the kept part keeps the same rows.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep/sweep_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kb_sweep *the_sweep(void)
{
	static kb_sweep *s;
	kb_error err;

	if (s)
		return s;
	if (kb_sweep_create(&s, NULL, &err) || kb_sweep_add_bench(s, "synthetic", &err) ||
	    kb_sweep_add_param(s, "events", "10,20", &err) ||
	    kb_sweep_add_param(s, "lps", "1,2", &err)) {
		fprintf(stderr, "fuzz_resume: cannot build the sweep: %s\n", err.message);
		abort();
	}
	return s;
}

static void fail(const char *why)
{
	fprintf(stderr, "fuzz_resume: %s\n", why);
	abort();
}

static size_t parse(const char *text, size_t len, kb_sweep_format fmt, sweep_kept *rows,
		    size_t n, int *rc, kb_error *err)
{
	size_t keep = (size_t)-1;

	memset(rows, 0, n * sizeof(*rows));
	*rc = kb__sweep_resume_parse(the_sweep(), "f", text, len, fmt, 0, rows, &keep, err);
	return keep;
}

static void free_rows(sweep_kept *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kb_sweep_format fmt;
	sweep_kept rows[4], again[4];
	size_t n = kb_sweep_points(the_sweep()), keep, keep2, kept = 0;
	char *text;
	kb_error err;
	int rc, rc2;

	if (size == 0 || n != 4)
		return 0;
	fmt = data[0] % 2 ? KB_SWEEP_JSONL : KB_SWEEP_CSV;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	keep = parse(text, size - 1, fmt, rows, n, &rc, &err);
	if (rc && !err.message[0])
		fail("an error without a message");
	if (rc && err.code != rc)
		fail("the error's code is not the status returned");
	if (!rc) {
		if (keep > size - 1 || (keep > 0 && text[keep - 1] != '\n'))
			fail("the kept part does not end at a line end");
		for (size_t i = 0; i < n; i++) {
			size_t tl;

			if (!rows[i].present)
				continue;
			kept++;
			tl = strlen(rows[i].text);
			if (!tl || rows[i].text[tl - 1] != '\n' || !memmem(text, keep, rows[i].text, tl))
				fail("a kept row is not a whole line of the kept part");
			if (memchr(rows[i].text, '\0', tl))
				fail("a kept row holds a NUL");
		}
		/* The kept part alone is read the same. */
		keep2 = parse(text, keep, fmt, again, n, &rc2, &err);
		if (rc2 || keep2 != keep)
			fail("the kept part is not kept again");
		for (size_t i = 0; i < n; i++)
			if (again[i].present != rows[i].present ||
			    (rows[i].present && strcmp(again[i].text, rows[i].text) != 0))
				fail("the kept part gives other rows");
		free_rows(again, n);
	}
	(void)kept;
	free_rows(rows, n);
	free(text);
	return 0;
}
