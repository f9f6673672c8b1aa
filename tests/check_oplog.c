/*
 * Tests of the op_log (src/oplog): the fixed key order and record order of
 * real runs, the SHA-256 over the file's bytes, streaming without memory
 * growth, write failures, the Chrome/Perfetto trace and the record callback.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/sha256.h"
#include "kernbench.h"
#include "oplog/oplog.h"
#include "suites.h"
#include "testutil.h"

static const char *const gemm128[] = { "M=128", "K=128", "N=128", NULL };
static const char *const decode4[] = { "H_kv=2", "P=2", "C=2", "S_kv=512", NULL };

/* ---- helpers ---------------------------------------------------------- */

typedef struct tmpfiles {
	char *dir;
	char path[8][4200];
	int n;
} tmpfiles;

static const char *tmp_path(tmpfiles *t, const char *name)
{
	if (!t->dir) {
		t->dir = kbt_tmpdir();
		ck_assert_ptr_nonnull(t->dir);
	}
	ck_assert_int_lt(t->n, 8);
	snprintf(t->path[t->n], sizeof(t->path[0]), "%s/%s", t->dir, name);
	return t->path[t->n++];
}

static void tmp_clean(tmpfiles *t)
{
	for (int i = 0; i < t->n; i++)
		unlink(t->path[i]);
	if (t->dir)
		rmdir(t->dir);
	free(t->dir);
	t->dir = NULL;
	t->n = 0;
}

/* Runs bench with params and options; asserts success. */
static void run_ok(const char *bench, const char *const *params, const kb_run_options *o,
		   kb_result *res)
{
	kb_params *p = NULL;
	kb_error err;
	int rc;

	ck_assert_int_eq(kb_params_create(&p, &err), 0);
	for (size_t i = 0; params && params[i]; i++)
		ck_assert_int_eq(kb_params_set_assignment(p, params[i], &err), 0);
	rc = kb_bench_run(bench, p, NULL, o, res, &err);
	ck_assert_msg(rc == 0, "%s: %s", bench, err.message);
	kb_params_destroy(p);
}

/* Runs bench expecting failure; returns the status, err filled. */
static int run_fail(const char *bench, const char *const *params, const kb_run_options *o,
		    kb_error *err)
{
	kb_params *p = NULL;
	kb_result res = KB_RESULT_INIT;
	int rc;

	ck_assert_int_eq(kb_params_create(&p, err), 0);
	for (size_t i = 0; params && params[i]; i++)
		ck_assert_int_eq(kb_params_set_assignment(p, params[i], err), 0);
	rc = kb_bench_run(bench, p, NULL, o, &res, err);
	kb_params_destroy(p);
	if (rc == 0)
		kb_result_clear(&res);
	return rc;
}

/* Splits a buffer into lines in place; returns the count. */
static size_t split_lines(char *buf, size_t len, char ***lines_out)
{
	size_t n = 0, cap = 1024;
	char **lines = malloc(cap * sizeof(*lines));

	ck_assert_ptr_nonnull(lines);
	ck_assert_msg(len == 0 || buf[len - 1] == '\n', "op_log does not end with a newline");
	for (char *p = buf; p < buf + len;) {
		char *nl = memchr(p, '\n', (size_t)(buf + len - p));

		ck_assert_ptr_nonnull(nl);
		*nl = '\0';
		if (n == cap) {
			cap *= 2;
			lines = realloc(lines, cap * sizeof(*lines));
			ck_assert_ptr_nonnull(lines);
		}
		lines[n++] = p;
		p = nl + 1;
	}
	*lines_out = lines;
	return n;
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, sizeof(d), d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int eng_order(const char *eng)
{
	static const char *const names[] = { "cpu", "sched", "dma", "tcm", "gemm", "math", "ipcq", "lp" };

	for (int i = 0; i < 8; i++)
		if (strcmp(eng, names[i]) == 0)
			return i;
	return -1;
}

static long peak_rss_kb(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/* ---- key order -------------------------------------------------------- */

/* Checks the contract keys of every line; returns the number of lines. */
static size_t check_keys(char **lines, size_t n)
{
	regex_t head, disp, bytes, tail;
	regmatch_t m;

	ck_assert_int_eq(regcomp(&head,
				 "^\\{\"t0\":[0-9]+,\"t1\":[0-9]+,\"pe\":[0-9]+,"
				 "\"eng\":\"(cpu|sched|dma|tcm|gemm|math|ipcq)\","
				 "\"op\":\"[a-z0-9_]+\",\"cmd\":[0-9]+",
				 REG_EXTENDED), 0);
	ck_assert_int_eq(regcomp(&disp, "^,\"kind\":\"[a-z0-9_]+\",\"lbytes\":[0-9]+", REG_EXTENDED), 0);
	ck_assert_int_eq(regcomp(&bytes, "^,\"bytes\":[0-9]+", REG_EXTENDED), 0);
	ck_assert_int_eq(regcomp(&tail, "^(\\}|,\"[a-z_0-9]+\":.*\\})$", REG_EXTENDED), 0);
	for (size_t i = 0; i < n; i++) {
		const char *l = lines[i], *rest;
		json_error_t jerr;
		json_t *j = json_loads(l, 0, &jerr), *t0, *t1;
		const char *eng, *op;

		ck_assert_msg(j != NULL, "line %zu does not parse (%s): %s", i + 1, jerr.text, l);
		ck_assert_msg(regexec(&head, l, 1, &m, 0) == 0, "line %zu: keys out of order: %s",
			      i + 1, l);
		rest = l + m.rm_eo;
		eng = json_string_value(json_object_get(j, "eng"));
		op = json_string_value(json_object_get(j, "op"));
		ck_assert_ptr_nonnull(eng);
		ck_assert_ptr_nonnull(op);
		if (strcmp(eng, "cpu") == 0 && strcmp(op, "dispatch") == 0) {
			ck_assert_msg(regexec(&disp, rest, 1, &m, 0) == 0,
				      "line %zu: dispatch without kind, lbytes after cmd: %s", i + 1, l);
			rest += m.rm_eo;
		} else {
			ck_assert_msg(!json_object_get(j, "kind") && !json_object_get(j, "lbytes"),
				      "line %zu: kind/lbytes on a non-dispatch record: %s", i + 1, l);
		}
		if (!strcmp(eng, "dma") || !strcmp(eng, "tcm") || !strcmp(eng, "ipcq")) {
			ck_assert_msg(regexec(&bytes, rest, 1, &m, 0) == 0,
				      "line %zu: data mover without bytes after cmd: %s", i + 1, l);
			rest += m.rm_eo;
		}
		ck_assert_msg(regexec(&tail, rest, 0, NULL, 0) == 0, "line %zu: bad tail '%s'", i + 1,
			      rest);
		t0 = json_object_get(j, "t0");
		t1 = json_object_get(j, "t1");
		ck_assert_msg(json_is_integer(t0) && json_is_integer(t1), "line %zu: t0/t1 not integers",
			      i + 1);
		ck_assert_msg(json_integer_value(t0) <= json_integer_value(t1), "line %zu: t0 > t1: %s",
			      i + 1, l);
		ck_assert(json_is_integer(json_object_get(j, "pe")));
		ck_assert(json_is_integer(json_object_get(j, "cmd")));
		json_decref(j);
	}
	regfree(&head);
	regfree(&disp);
	regfree(&bytes);
	regfree(&tail);
	return n;
}

/* Checks the total order: t1, then PE, then engine (cpu..ipcq). */
static void check_order(char **lines, size_t n)
{
	json_int_t pt1 = -1, ppe = -1;
	int peng = -1;

	for (size_t i = 0; i < n; i++) {
		json_t *j = json_loads(lines[i], 0, NULL);
		json_int_t t1, pe;
		int eng;

		ck_assert_ptr_nonnull(j);
		t1 = json_integer_value(json_object_get(j, "t1"));
		pe = json_integer_value(json_object_get(j, "pe"));
		eng = eng_order(json_string_value(json_object_get(j, "eng")));
		ck_assert_int_ge(eng, 0);
		ck_assert_msg(t1 > pt1 || (t1 == pt1 && (pe > ppe || (pe == ppe && eng >= peng))),
			      "line %zu out of order (t1 %lld pe %lld eng %d after t1 %lld pe %lld eng %d)",
			      i + 1, (long long)t1, (long long)pe, eng, (long long)pt1, (long long)ppe,
			      peng);
		pt1 = t1;
		ppe = pe;
		peng = eng;
		json_decref(j);
	}
}

/* Runs bench with an op_log file; returns its lines (buf owns them). */
static size_t log_lines(const char *bench, const char *const *params, int threads, tmpfiles *tf,
			kb_result *res, char **buf, char ***lines)
{
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	size_t len = 0, n;

	o.threads = threads;
	o.oplog_path = tmp_path(tf, "log.jsonl");
	run_ok(bench, params, &o, res);
	*buf = kbt_slurp(o.oplog_path, &len);
	ck_assert_ptr_nonnull(*buf);
	n = split_lines(*buf, len, lines);
	ck_assert_uint_eq(n, res->records);
	return n;
}

START_TEST(key_order_gemm)
{
	tmpfiles tf = { 0 };
	kb_result r = KB_RESULT_INIT;
	char *buf, **lines;
	size_t n = log_lines("gemm", gemm128, 1, &tf, &r, &buf, &lines);

	ck_assert_uint_gt(n, 10);
	check_keys(lines, n);
	free(lines);
	free(buf);
	kb_result_clear(&r);
	tmp_clean(&tf);
}
END_TEST

START_TEST(key_order_decode)
{
	tmpfiles tf = { 0 };
	kb_result r = KB_RESULT_INIT;
	char *buf, **lines;
	size_t n = log_lines("gqa_decode_opt2", decode4, 0, &tf, &r, &buf, &lines);

	ck_assert_uint_gt(n, 100);
	check_keys(lines, n);
	free(lines);
	free(buf);
	kb_result_clear(&r);
	tmp_clean(&tf);
}
END_TEST

/* ---- record order ----------------------------------------------------- */

START_TEST(record_order)
{
	static const struct {
		const char *bench;
		const char *const *params;
		int threads;
	} runs[] = {
		{ "gemm", gemm128, 1 },
		{ "gemm", gemm128, 0 },
		{ "gqa_decode_opt2", decode4, 1 },
		{ "gqa_decode_opt3", decode4, 2 },
		{ "gqa_decode_opt3", decode4, 0 },
	};

	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		tmpfiles tf = { 0 };
		kb_result r = KB_RESULT_INIT;
		char *buf, **lines;
		size_t n = log_lines(runs[k].bench, runs[k].params, runs[k].threads, &tf, &r, &buf,
				     &lines);

		check_order(lines, n);
		free(lines);
		free(buf);
		kb_result_clear(&r);
		tmp_clean(&tf);
	}
}
END_TEST

/* ---- hash ------------------------------------------------------------- */

START_TEST(sha256_of_file)
{
	static const struct {
		const char *bench;
		const char *const *params;
	} runs[] = {
		{ "gemm", gemm128 },
		{ "gqa_decode_opt2", decode4 },
	};

	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		tmpfiles tf = { 0 };
		kb_run_options o = KB_RUN_OPTIONS_INIT;
		kb_result with = KB_RESULT_INIT, without = KB_RESULT_INIT;
		char hex[65], *buf;
		size_t len = 0;

		o.threads = 1;
		o.oplog_path = tmp_path(&tf, "log.jsonl");
		run_ok(runs[k].bench, runs[k].params, &o, &with);
		buf = kbt_slurp(o.oplog_path, &len);
		ck_assert_ptr_nonnull(buf);
		sha256_hex(buf, len, hex);
		ck_assert_str_eq(hex, with.oplog_sha256);
		o.oplog_path = NULL;
		run_ok(runs[k].bench, runs[k].params, &o, &without);
		ck_assert_str_eq(without.oplog_sha256, with.oplog_sha256);
		ck_assert_uint_eq(without.records, with.records);
		free(buf);
		kb_result_clear(&with);
		kb_result_clear(&without);
		tmp_clean(&tf);
	}
}
END_TEST

/* An empty log hashes to the SHA-256 of no bytes. */
START_TEST(sha256_empty)
{
	kb_oplog *log = NULL;
	kb_error err;
	char hex[65];
	uint64_t records = 99;

	ck_assert_int_eq(kb__oplog_create(&log, NULL, &err), 0);
	ck_assert_ptr_nonnull(kb__oplog_lane(log, 0));
	ck_assert_int_eq(kb__oplog_finish(log, hex, &records, &err), 0);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	ck_assert_uint_eq(records, 0);
	kb__oplog_destroy(log);
}
END_TEST


/* The op_log's hash (base/sha256.c): whole blocks through the SHA-NI loop
 * where the CPU has it (its pieces in SSE or AVX encoding), else the
 * plain C rounds. Every path this machine has against the FIPS 180-2
 * examples, then against nettle alone over lengths 0 to 9000 fed in
 * pseudo-random pieces (partial blocks before, between and after runs of
 * whole ones), some of them half a block at a time (kb__sha256_spread). */
static void sha256_hex_of(int ni, const void *data, size_t n, char hex[65])
{
	kb_sha256 h;

	kb__sha256_init(&h);
	kb__sha256_set_ni(&h, ni);
	kb__sha256_update(&h, data, n);
	kb__sha256_hex(&h, hex);
}

START_TEST(sha256_paths)
{
	static const char *const msg[3] = {
		"abc", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", NULL
	};
	static const char *const want[3] = {
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
		"cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
	};
	static uint8_t buf[1000000];
	uint64_t x = UINT64_C(0x243f6a8885a308d3);
	char hex[65], ref[65];

	memset(buf, 'a', sizeof(buf));
	for (int ni = 0; ni <= kb__sha256_ni_available(); ni++)
		for (int k = 0; k < 3; k++) {
			sha256_hex_of(ni, msg[k] ? msg[k] : (const char *)buf,
				      msg[k] ? strlen(msg[k]) : sizeof(buf), hex);
			ck_assert_str_eq(hex, want[k]);
		}
	for (size_t i = 0; i < 9000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)(x >> 32);
	}
	for (size_t len = 0; len <= 9000; len += len < 300 ? 1 : 97) {
		sha256_hex(buf, len, ref); /* nettle's */
		for (int ni = 0; ni <= kb__sha256_ni_available(); ni++) {
			kb_sha256 h;
			size_t at = 0;

			kb__sha256_init(&h);
			kb__sha256_set_ni(&h, ni);
			ck_assert_int_eq(h.ni, ni);
			while (at < len) {
				size_t n;

				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				n = (size_t)(x % 4 == 0 ? x % 3000 : x % 200);
				if (n > len - at)
					n = len - at;
				if (x % 5 == 1) {
					/* half a block at a time, as a serial
					 * op_log's flushed bytes go between
					 * records: a few pieces, then the rest
					 * piece by piece or at once (from the
					 * middle of a block or its start) */
					kb_sha256_spread r;
					unsigned some = (unsigned)(x >> 40 & 15);

					kb__sha256_spread(&h, &r, buf + at, n);
					ck_assert(ni || !r.left);
					ck_assert_uint_le(r.left, n / 32);
					while (r.left && (some-- || x >> 50 & 1)) {
						size_t left = r.left;

						kb__sha256_piece(&r);
						ck_assert_uint_eq(r.left, left - 1);
					}
					kb__sha256_spread_end(&r);
					ck_assert_uint_eq(r.left, 0);
					at += n;
				} else {
					kb__sha256_update(&h, buf + at, n);
					at += n;
				}
			}
			kb__sha256_hex(&h, hex);
			ck_assert_msg(strcmp(hex, ref) == 0, "length %zu, ni %d: %s, nettle %s", len, ni,
				      hex, ref);
		}
	}
	/* As a serial op_log hashes: flushes of 60-95 KB (ragged ends),
	 * each spread and hashed piece by piece to its end, the last tail
	 * carried into the next spread. 1 MB, so that a state that went
	 * wrong between pieces shows whatever the lengths above missed. */
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)(x >> 32);
	}
	sha256_hex(buf, sizeof(buf), ref);
	for (int ni = 0; ni <= kb__sha256_ni_available(); ni++) {
		kb_sha256 h;
		size_t at = 0;

		kb__sha256_init(&h);
		kb__sha256_set_ni(&h, ni);
		while (at < sizeof(buf)) {
			kb_sha256_spread r;
			size_t n = 61440 + (size_t)(x % 36000);

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (n > sizeof(buf) - at)
				n = sizeof(buf) - at;
			kb__sha256_spread(&h, &r, buf + at, n);
			ck_assert(!ni || r.left >= 2 * ((n - 63) / 64));
			while (r.left)
				kb__sha256_piece(&r);
			at += n;
		}
		kb__sha256_hex(&h, hex);
		ck_assert_msg(strcmp(hex, ref) == 0, "1 MB in flushes, ni %d: %s, nettle %s", ni, hex, ref);
	}
}
END_TEST


/* The callback's copy of the one record a test emits, NUL-terminated: room
 * for the longest record the op_log formats (1024 bytes) and the NUL. */
#define ONE_RECORD 1025

static int keep_one(const kb_oplog_record *rec, void *payload)
{
	char *out = payload;

	ck_assert_uint_lt(rec->json_len, ONE_RECORD);
	memcpy(out, rec->json, rec->json_len);
	out[rec->json_len] = 0;
	return 0;
}

/* kb__oplog_emit_stage with r's times, op, cmd and bytes in st (by
 * value), and other ones in the record it is given: it must not read
 * those. */
static int emit_stage(kb_oplog_lane *lane, const kb_oplog_record *r, const kb_oplog_stage *st)
{
	kb_oplog_record junk = *r;
	kb_oplog_stage v = *st;

	v.t0_ps = r->t0_ps;
	v.t1_ps = r->t1_ps;
	v.op = r->op;
	v.cmd = r->cmd;
	v.bytes = r->bytes;
	junk.t0_ps = 3;
	junk.t1_ps = 4;
	junk.op = "junk";
	junk.cmd = 77;
	junk.bytes = 5;
	return kb__oplog_emit_stage(lane, &junk, v);
}

/* An engine stage's record (kb__oplog_emit_stage) is the record that
 * kb__oplog_emit writes with the fields step, n (when n >= 0) and operand
 * (when there is one), byte for byte: steps below and past 100, n absent,
 * 0 and large, operands absent, empty and in need of escapes, bytes
 * absent and present. */
static void one_record(int stage, const kb_oplog_record *r, const kb_oplog_stage *st,
		       char json[ONE_RECORD])
{
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_oplog_field f[3];
	kb_error err;
	char hex[65];
	int n = 0;

	oo.callback = keep_one;
	oo.payload = json;
	ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	f[n++] = KB_FIELD_U("step", st->step);
	if (st->n >= 0)
		f[n++] = KB_FIELD_I("n", st->n);
	if (st->operand)
		f[n++] = KB_FIELD_S("operand", st->operand);
	if (stage)
		ck_assert_int_eq(emit_stage(lane, r, st), 0);
	else
		ck_assert_int_eq(kb__oplog_emit(lane, r, f, n), 0);
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	kb__oplog_destroy(log);
}

START_TEST(stage_records)
{
	static const uint64_t steps[] = { 0, 9, 10, 99, 100, 12345, UINT64_MAX };
	static const int64_t ns[] = { -1, 0, 7, 4096, INT64_MAX };
	static const char *const operands[] = { NULL, "", "K", "q\"\\\n" };
	int checked = 0;

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (size_t k = 0; k < 4; k++) {
				kb_oplog_record r = { 850516250, 850612250, 0, "dma", "dma_read", 2052,
						      NULL, -1, k & 1 ? 2048 : -1, NULL, 0,
						      sizeof(kb_oplog_record) };
				kb_oplog_stage st = { .step = steps[i], .n = ns[j], .operand = operands[k] };
				char a[ONE_RECORD] = "", b[ONE_RECORD] = "";

				one_record(0, &r, &st, a);
				one_record(1, &r, &st, b);
				ck_assert_str_eq(b, a);
				ck_assert_ptr_nonnull(strstr(a, "\"step\":"));
				checked++;
			}
	ck_assert_int_eq(checked, 7 * 5 * 4);
}
END_TEST

/* Typed record fields: the op_log formats them after the fixed keys, in
 * order, numbers in full range and strings escaped. */

START_TEST(typed_fields)
{
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65], json[ONE_RECORD] = "";
	uint64_t records = 0;
	kb_oplog_record r = { 7, 1234567890123456789u, 3, "dma", "dma_read", 42, NULL, -1, 4096,
			      NULL, 0, sizeof(kb_oplog_record) };
	/* keys of every length the prefix copy treats apart: 5 to 17 bytes */
	kb_oplog_field f[9] = { KB_FIELD_U("step", 0), KB_FIELD_U("u", UINT64_MAX),
				KB_FIELD_I("n", INT64_MIN), KB_FIELD_S("operand", "q\"\\\n"),
				KB_FIELD_I("k", 99), KB_FIELD_U("ab", 1), KB_FIELD_U("abc", 2),
				KB_FIELD_U("abcdefghijkl", 3), KB_FIELD_U("abcdefghijklm", 4) };

	oo.callback = keep_one;
	oo.payload = json;
	ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	ck_assert_int_eq(kb__oplog_emit(lane, &r, f, 9), 0);
	ck_assert_int_eq(kb__oplog_finish(log, hex, &records, &err), 0);
	ck_assert_uint_eq(records, 1);
	ck_assert_str_eq(json, "{\"t0\":7,\"t1\":1234567890123456789,\"pe\":3,\"eng\":\"dma\","
			       "\"op\":\"dma_read\",\"cmd\":42,\"bytes\":4096,\"step\":0,"
			       "\"u\":18446744073709551615,\"n\":-9223372036854775808,"
			       "\"operand\":\"q\\\"\\\\\\u000a\",\"k\":99,\"ab\":1,\"abc\":2,"
			       "\"abcdefghijkl\":3,\"abcdefghijklm\":4}");
	kb__oplog_destroy(log);
}
END_TEST

/* Numbers at every power of ten (10^k - 1, 10^k, 10^k + 1, k = 0..19),
 * where the formatter's digit count and its eight-digit chunks change,
 * read back as printf writes them. */
typedef struct json_list {
	char text[128][128];
	int n;
} json_list;

static int keep_each(const kb_oplog_record *rec, void *payload)
{
	json_list *l = payload;

	ck_assert_int_lt(l->n, 128);
	ck_assert_uint_lt(rec->json_len, sizeof(l->text[0]));
	memcpy(l->text[l->n], rec->json, rec->json_len);
	l->text[l->n++][rec->json_len] = 0;
	return 0;
}

/* A fresh op_log whose records go to got (emptied), and its lane 0. */
static kb_oplog_lane *kept_lane(kb_oplog **log, json_list *got)
{
	kb_oplog_options oo = { 0 };
	kb_oplog_lane *lane;
	kb_error err;

	got->n = 0;
	oo.callback = keep_each;
	oo.payload = got;
	ck_assert_int_eq(kb__oplog_create(log, &oo, &err), 0);
	lane = kb__oplog_lane(*log, 0);
	ck_assert_ptr_nonnull(lane);
	return lane;
}

START_TEST(number_edges)
{
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65], want[128];
	uint64_t v[64], p = 1;
	int n = 0;
	static json_list got;

	for (int k = 0; k < 20; k++, p *= 10) {
		v[n++] = p - 1;
		v[n++] = p;
		v[n++] = p + 1;
	}
	v[n++] = UINT64_MAX;
	lane = kept_lane(&log, &got);
	for (int i = 0; i < n; i++) {
		kb_oplog_record r = { v[i], v[i], 0, "cpu", "x", v[i], NULL, -1, -1, NULL, 0, sizeof(kb_oplog_record) };
		kb_oplog_field f = KB_FIELD_U("u", v[i]);

		/* t1 must not decrease within a lane: the record's index. */
		r.t1_ps = (uint64_t)i;
		ck_assert_int_eq(kb__oplog_emit(lane, &r, &f, 1), 0);
	}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(got.n, n);
	for (int i = 0; i < n; i++) {
		snprintf(want, sizeof(want),
			 "{\"t0\":%llu,\"t1\":%d,\"pe\":0,\"eng\":\"cpu\",\"op\":\"x\",\"cmd\":%llu,\"u\":%llu}",
			 (unsigned long long)v[i], i, (unsigned long long)v[i], (unsigned long long)v[i]);
		ck_assert_str_eq(got.text[i], want);
	}
	kb__oplog_destroy(log);
}
END_TEST

/* Numbers of every length and sign against printf: the formatter writes
 * eight digits at a time with multiplies and shifts, so a wrong digit in
 * any position of any chunk, or a wrong leading-zero count, shows here.
 * Signed fields at -(10^k - 1), -10^k, -(10^k + 1) and INT64_MIN/MAX,
 * then pseudo-random values of random magnitude, as every numeric key. */
typedef struct number_check {
	uint64_t u[4096];
	int64_t i[4096];
	int n;
} number_check;

static void number_want(char *want, size_t size, const number_check *c, int k)
{
	if (c->i[k] >= 0)
		snprintf(want, size,
			 "{\"t0\":%" PRIu64 ",\"t1\":%d,\"pe\":%u,\"eng\":\"cpu\",\"op\":\"x\","
			 "\"cmd\":%" PRIu64 ",\"bytes\":%" PRId64 ",\"u\":%" PRIu64 ",\"i\":%" PRId64 "}",
			 c->u[k], k, (unsigned)(c->u[k] >> 40), c->u[k] / 3, c->i[k], c->u[k], c->i[k]);
	else
		snprintf(want, size,
			 "{\"t0\":%" PRIu64 ",\"t1\":%d,\"pe\":%u,\"eng\":\"cpu\",\"op\":\"x\","
			 "\"cmd\":%" PRIu64 ",\"u\":%" PRIu64 ",\"i\":%" PRId64 "}",
			 c->u[k], k, (unsigned)(c->u[k] >> 40), c->u[k] / 3, c->u[k], c->i[k]);
}

static int check_number(const kb_oplog_record *rec, void *payload)
{
	number_check *c = payload;
	char want[256];

	ck_assert_int_lt(c->n, 4096);
	number_want(want, sizeof(want), c, c->n);
	ck_assert_uint_eq(rec->json_len, strlen(want));
	ck_assert_int_eq(memcmp(rec->json, want, rec->json_len), 0);
	c->n++;
	return 0;
}

START_TEST(number_sweep)
{
	static number_check c;
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65];
	uint64_t x = UINT64_C(0x9e3779b97f4a7c15), p = 1;
	int n = 0;

	for (int k = 0; k < 19; k++, p *= 10) {
		c.i[n] = -(int64_t)(p - 1);
		c.i[n + 1] = -(int64_t)p;
		c.i[n + 2] = -(int64_t)(p + 1);
		for (int j = 0; j < 3; j++, n++)
			c.u[n] = p - 1 + (uint64_t)j;
	}
	c.i[n] = INT64_MIN;
	c.u[n++] = UINT64_MAX - 1;
	c.i[n] = INT64_MAX;
	c.u[n++] = 0;
	c.i[n] = 0;
	c.u[n++] = UINT64_C(10000000000000000000);
	while (n < 4096) {
		/* xorshift64, then a random shift: every magnitude */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		c.u[n] = x >> (x % 64);
		c.i[n] = (int64_t)(x * UINT64_C(0x2545f4914f6cdd1d)) >> ((x >> 6) % 64);
		n++;
	}
	c.n = 0;
	oo.callback = check_number;
	oo.payload = &c;
	ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	for (int k = 0; k < n; k++) {
		kb_oplog_record r = { c.u[k], (uint64_t)k, (uint32_t)(c.u[k] >> 40), "cpu", "x",
				      c.u[k] / 3, NULL, -1, c.i[k], NULL, 0, sizeof(kb_oplog_record) };
		kb_oplog_field f[2] = { KB_FIELD_U("u", c.u[k]), KB_FIELD_I("i", c.i[k]) };

		ck_assert_int_eq(kb__oplog_emit(lane, &r, f, 2), 0);
	}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(c.n, n);
	kb__oplog_destroy(log);
}
END_TEST

/* A record's two times: where t0 shares t1's multiple of 10^8 (9 and 10
 * digit times), the prefix is written once and both low chunks beside
 * each other, and under 10^8 both chunks without their leading zeros; at
 * every edge of that (t0 a multiple below, t0 past t1, t1 of 1 to 8, 9,
 * 10 and 11 digits, lows of 0 and 10^8 - 1) against printf. */
typedef struct time_check {
	uint64_t t0[8192], t1[8192];
	int n, bad;
} time_check;

static int check_times(const kb_oplog_record *rec, void *payload)
{
	time_check *c = payload;
	char want[160];

	if (c->n >= 8192)
		return 1;
	snprintf(want, sizeof(want),
		 "{\"t0\":%" PRIu64 ",\"t1\":%" PRIu64 ",\"pe\":0,\"eng\":\"cpu\",\"op\":\"x\",\"cmd\":7}",
		 c->t0[c->n], c->t1[c->n]);
	if (rec->json_len != strlen(want) || memcmp(rec->json, want, rec->json_len)) {
		if (!c->bad)
			fprintf(stderr, "time_pairs: got %.*s\n want %s\n", (int)rec->json_len,
				rec->json, want);
		c->bad++;
	}
	c->n++;
	return 0;
}

START_TEST(time_pairs)
{
	static time_check c;
	const uint64_t e8 = UINT64_C(100000000);
	/* t1 values, increasing (a lane's t1 never decreases) */
	const uint64_t t1s[] = { 0, 1, 9, 10, 99, 100, 12345, 999999, 1000000, 9999999, 10000000,
				 12345678, e8 - 1, e8, e8 + 1, 2 * e8 - 1, 2 * e8, 2 * e8 + 12345678,
				 9 * e8 + 99999999, 10 * e8, 10 * e8 + 1, 37 * e8 + 4200000,
				 99 * e8, 100 * e8 - 1, 100 * e8, 100 * e8 + 1, 999 * e8 + 99999999,
				 1000 * e8 + 5, 1234 * e8 + 7, 9999 * e8 + 99999999, 10000 * e8,
				 10000 * e8 + 1, 123456 * e8 + 3 };
	uint64_t x = UINT64_C(0x2545f4914f6cdd1d), last = 0;
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65];
	int n = 0;

	for (size_t k = 0; k < sizeof(t1s) / sizeof(t1s[0]); k++) {
		uint64_t t1 = t1s[k], lo = t1 % e8;
		const uint64_t t0s[] = { t1, t1 - 1, t1 - lo, t1 - lo - 1, t1 - lo + 1, 0, 1, 99, e8,
					 t1 + 1, t1 + e8, t1 - lo / 2, t1 / 2 };

		for (size_t j = 0; j < sizeof(t0s) / sizeof(t0s[0]); j++, n++) {
			c.t1[n] = t1;
			c.t0[n] = t0s[j];
		}
	}
	while (n < 8192) {
		/* random times of 9 and 10 digits, increasing; t0 mostly close */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (last < 50 * e8)
			last += x % (e8 / 64);
		c.t1[n] = last + e8;
		c.t0[n] = c.t1[n] - (x >> 8) % (x & 1 ? 1000 : 3 * e8);
		n++;
	}
	c.n = c.bad = 0;
	oo.callback = check_times;
	oo.payload = &c;
	ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	for (int k = 0; k < n; k++) {
		kb_oplog_record r = { c.t0[k], c.t1[k], 0, "cpu", "x", 7, NULL, -1, -1, NULL, 0,
				      sizeof(kb_oplog_record) };

		ck_assert_int_eq(kb__oplog_emit(lane, &r, NULL, 0), 0);
	}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(c.n, n);
	ck_assert_int_eq(c.bad, 0);
	kb__oplog_destroy(log);
}
END_TEST

/* Numbers at the end of the longest record (1024 bytes): the formatter
 * writes eight bytes per chunk past a number's end when there is room,
 * and must still be exact where there is not. A record one byte too long
 * fails with KB_ENOMEM; one that fits reads back whole. */

START_TEST(number_at_record_end)
{
	static char s[1100], want[1200], got[ONE_RECORD];
	static const uint64_t v[] = { 0, 7, 12345678, 123456789, UINT64_MAX };

	for (size_t vi = 0; vi < sizeof(v) / sizeof(v[0]); vi++)
		for (size_t len = 940; len < 1000; len++) {
			kb_oplog_options oo = { 0 };
			kb_oplog *log = NULL;
			kb_oplog_lane *lane;
			kb_error err;
			char hex[65];
			kb_oplog_record r = { 1, 2, 0, "cpu", "x", 3, NULL, -1, -1, NULL, 0,
					      sizeof(kb_oplog_record) };
			kb_oplog_field f[3] = { KB_FIELD_S("s", s), KB_FIELD_U("u", v[vi]),
						KB_FIELD_I("i", -(int64_t)(v[vi] >> 1)) };
			int rc, fits;

			memset(s, 'a', len);
			s[len] = 0;
			snprintf(want, sizeof(want),
				 "{\"t0\":1,\"t1\":2,\"pe\":0,\"eng\":\"cpu\",\"op\":\"x\",\"cmd\":3,"
				 "\"s\":\"%s\",\"u\":%" PRIu64 ",\"i\":%" PRId64 "}",
				 s, v[vi], -(int64_t)(v[vi] >> 1));
			fits = strlen(want) <= 1024;
			got[0] = 0;
			oo.callback = keep_one;
			oo.payload = got;
			ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
			lane = kb__oplog_lane(log, 0);
			ck_assert_ptr_nonnull(lane);
			rc = kb__oplog_emit(lane, &r, f, 3);
			ck_assert_int_eq(rc, fits ? KB_OK : KB_ENOMEM);
			rc = kb__oplog_finish(log, hex, NULL, &err);
			ck_assert_int_eq(rc, fits ? KB_OK : KB_ENOMEM);
			if (fits)
				ck_assert_str_eq(got, want);
			kb__oplog_destroy(log);
		}
}
END_TEST

/* A record's kind, kept in the lane's record forms with its lbytes:
 * more kinds than slots, some texts at two addresses, a kind that must be
 * escaped nowhere (kinds are written as they are), met in turns, each
 * record as formatted from scratch. */
START_TEST(kind_templates)
{
	static char kinds[12][24];
	static json_list got;
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65], want[160];
	int n = 0;

	for (int i = 0; i < 12; i++)
		snprintf(kinds[i], sizeof(kinds[i]), i < 10 ? "kind_%d" : "kind_%d_long_name", i % 10);
	lane = kept_lane(&log, &got);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 20; i++, n++) {
			kb_oplog_record r = { 5, (uint64_t)n, 0, "cpu", "dispatch", (uint64_t)i,
					      kinds[(i * 5 + round) % 12], (int64_t)n * 1000 - 7, -1,
					      NULL, 0, sizeof(kb_oplog_record) };

			ck_assert_int_eq(kb__oplog_emit(lane, &r, NULL, 0), 0);
		}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(got.n, n);
	n = 0;
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 20; i++, n++) {
			snprintf(want, sizeof(want),
				 "{\"t0\":5,\"t1\":%d,\"pe\":0,\"eng\":\"cpu\",\"op\":\"dispatch\","
				 "\"cmd\":%d,\"kind\":\"%s\",\"lbytes\":%d}",
				 n, i, kinds[(i * 5 + round) % 12], n * 1000 - 7);
			ck_assert_str_eq(got.text[n], want);
		}
	kb__oplog_destroy(log);
}
END_TEST

/* put_cmd keeps a lane's last cmd digits: records with the same cmd, one
 * more (across carries: 9, 99, 10^7 - 1), jumps down and up, 0, and ids
 * past its eight digits, each against printf. */
START_TEST(cmd_digits)
{
	static const uint64_t ids[] = { 0, 0, 1, 2, 9, 10, 10, 11, 19, 20, 99, 100, 101, 5, 6, 999,
					1000, 1009, 1010, 9999999, 10000000, 10000001, 99999999,
					100000000, 100000001, 99999998, 99999999, 7, 123456789012ULL,
					123456789013ULL, 8, 18446744073709551615ULL, 0, 1 };
	static json_list got;
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65], want[160];
	int n = (int)(sizeof(ids) / sizeof(ids[0]));

	/* three times: the lane's first records are formatted whole, the
	 * later ones copy its form (FORM_CACHE_AFTER) */
	lane = kept_lane(&log, &got);
	for (int i = 0; i < 3 * n; i++) {
		kb_oplog_record r = { 5, (uint64_t)i, 0, "math", "add", ids[i % n], NULL, -1, -1,
				      NULL, 0, sizeof(kb_oplog_record) };
		kb_oplog_stage st = { .step = 1, .n = 8 };

		ck_assert_int_eq(emit_stage(lane, &r, &st), 0);
	}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(got.n, 3 * n);
	for (int i = 0; i < 3 * n; i++) {
		snprintf(want, sizeof(want),
			 "{\"t0\":5,\"t1\":%d,\"pe\":0,\"eng\":\"math\",\"op\":\"add\",\"cmd\":%" PRIu64
			 ",\"step\":1,\"n\":8}",
			 i, ids[i % n]);
		ck_assert_str_eq(got.text[i], want);
	}
	kb__oplog_destroy(log);
}
END_TEST

/* The lane keeps each (pe, eng, op)'s middle text by the strings'
 * addresses (in its record forms): 40 kinds on two PEs, each met twice in
 * a cycle, must all read back as printf writes them. */
START_TEST(middle_templates)
{
	static char ops[40][12];
	static json_list got;
	kb_oplog *log = NULL;
	kb_oplog_lane *lane;
	kb_error err;
	char hex[65], want[128];
	int n = 0;

	for (int i = 0; i < 40; i++)
		snprintf(ops[i], sizeof(ops[i]), "op_%d", i * 7);
	lane = kept_lane(&log, &got);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 30; i++, n++) {
			kb_oplog_record r = { 5, (uint64_t)n, (uint32_t)(i % 2) * 1000, i % 3 ? "math" : "dma",
					      ops[(i * 11 + round) % 40], (uint64_t)i, NULL, -1, -1, NULL, 0,
					      sizeof(kb_oplog_record) };

			ck_assert_int_eq(kb__oplog_emit(lane, &r, NULL, 0), 0);
		}
	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	ck_assert_int_eq(got.n, n);
	n = 0;
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 30; i++, n++) {
			snprintf(want, sizeof(want),
				 "{\"t0\":5,\"t1\":%d,\"pe\":%d,\"eng\":\"%s\",\"op\":\"%s\",\"cmd\":%d}", n,
				 (i % 2) * 1000, i % 3 ? "math" : "dma", ops[(i * 11 + round) % 40], i);
			ck_assert_str_eq(got.text[n], want);
		}
	kb__oplog_destroy(log);
}
END_TEST

/* A lane keeps the forms of the records it meets (a record's text
 * around its cmd, by eng, op, pe and what its tail is a function of).
 * Families of 48 forms that differ in one part only (pe, eng, op, bytes,
 * step at and past 2^16, n, operands of 0 to 6 bytes, kind, lbytes, a
 * field's value, type and key, one field or two),
 * more than a lane's sets: some share a set, so a form found by less than
 * all it depends on reads back wrong. Engine stages, dispatches, records
 * without a kind, records with fields (whose tail is formatted each
 * time), drawn at random so that forms come back after others took their
 * places, times and cmds of every record its own; each against printf.
 * Twice: with a callback (every record through the lane's general path,
 * which keeps its fields) and into a file (emit's common path, which
 * must find no form without its tail). */
typedef struct form_check {
	char want[8192][192];
	int n, bad;
} form_check;

static int check_form(const kb_oplog_record *rec, void *payload)
{
	form_check *c = payload;

	if (c->n >= 8192)
		return 1;
	if (rec->json_len != strlen(c->want[c->n]) ||
	    memcmp(rec->json, c->want[c->n], rec->json_len)) {
		if (!c->bad)
			fprintf(stderr, "forms: got %.*s\n want %s\n", (int)rec->json_len,
				rec->json, c->want[c->n]);
		c->bad++;
	}
	c->n++;
	return 0;
}

/* The file's lines against c's wants (record_forms, stage_steps). */
static void check_form_file(form_check *c, const char *path)
{
	size_t len = 0, at = 0;
	char *buf = kbt_slurp(path, &len);

	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < 8192; i++) {
		size_t n = strlen(c->want[i]);

		ck_assert_msg(at + n < len && !memcmp(buf + at, c->want[i], n) && buf[at + n] == '\n',
			      "forms, line %d: want %s", i, c->want[i]);
		at += n + 1;
	}
	ck_assert_uint_eq(at, len);
	free(buf);
}

/* A log for a forms test's records into c: to a file (tf's name), or
 * to check_form through the callback; c emptied. */
static kb_oplog *forms_open(form_check *c, int to_file, tmpfiles *tf, const char *name, kb_oplog_options *oo)
{
	kb_oplog *log = NULL;
	kb_error err;

	c->n = c->bad = 0;
	memset(oo, 0, sizeof(*oo));
	if (to_file) {
		oo->path = tmp_path(tf, name);
	} else {
		oo->callback = check_form;
		oo->payload = c;
	}
	ck_assert_int_eq(kb__oplog_create(&log, oo, &err), 0);
	return log;
}

/* forms_open's log finished: its 8,192 records each as c wants. */
static void forms_close(kb_oplog *log, form_check *c, const kb_oplog_options *oo, tmpfiles *tf)
{
	kb_error err;
	char hex[65];

	ck_assert_int_eq(kb__oplog_finish(log, hex, NULL, &err), 0);
	if (oo->path)
		check_form_file(c, oo->path);
	else
		ck_assert_int_eq(c->n, 8192);
	ck_assert_int_eq(c->bad, 0);
	kb__oplog_destroy(log);
	tmp_clean(tf);
}

/* What printf makes of an engine stage's record r, st (its operand as
 * operand, escaped) into w, after what len bytes hold. */
static void stage_want(char *w, size_t room, int len, const kb_oplog_record *r, const kb_oplog_stage *st,
		       const char *operand)
{
	if (r->bytes >= 0)
		len += snprintf(w + len, room - (size_t)len, ",\"bytes\":%" PRId64, r->bytes);
	len += snprintf(w + len, room - (size_t)len, ",\"step\":%" PRIu64, st->step);
	if (st->n >= 0)
		len += snprintf(w + len, room - (size_t)len, ",\"n\":%" PRId64, st->n);
	if (st->operand)
		len += snprintf(w + len, room - (size_t)len, ",\"operand\":\"%s\"", operand);
	snprintf(w + len, room - (size_t)len, "}");
}

/* The start of what printf makes of r, up to its cmd, into w: its length. */
static int head_want(char *w, size_t room, const kb_oplog_record *r)
{
	return snprintf(w, room,
			"{\"t0\":%" PRIu64 ",\"t1\":%" PRIu64 ",\"pe\":%u,\"eng\":\"%s\","
			"\"op\":\"%s\",\"cmd\":%" PRIu64,
			r->t0_ps, r->t1_ps, r->pe, r->eng, r->op, r->cmd);
}

static void record_forms_run(int to_file)
{
	static form_check c;
	static char engs[48][8], ops[48][8], kinds[48][8], operands[48][8];
	uint64_t x = UINT64_C(0x9e3779b97f4a7c15), t1 = 5, cmd = 0;
	kb_oplog_options oo;
	kb_oplog *log;
	kb_oplog_lane *lane;
	tmpfiles tf = { 0 };

	for (int i = 0; i < 48; i++) {
		snprintf(engs[i], sizeof(engs[i]), "e%d", i);
		snprintf(ops[i], sizeof(ops[i]), "op%d", i);
		snprintf(kinds[i], sizeof(kinds[i]), "k%d", i);
		/* 1 to 6 bytes, the last one apart: each its own */
		snprintf(operands[i], sizeof(operands[i]), "%.*s%c", i % 6, "abcde", 'a' + i / 6);
	}
	snprintf(operands[1], sizeof(operands[1]), "q\"\\");
	log = forms_open(&c, to_file, &tf, "forms.jsonl", &oo);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	for (int i = 0; i < 8192; i++) {
		/* family (the part that varies) and member (its value) */
		unsigned fam, m, type;
		kb_oplog_record r = { 0, 0, 12, engs[3], ops[5], 0, NULL, -1, -1, NULL, 0,
				      sizeof(kb_oplog_record) };
		kb_oplog_stage st = { .step = 2, .n = 512 };
		kb_oplog_field fl[2] = { KB_FIELD_U("peer", i % 3), KB_FIELD_U("tag", 7) };
		int nf = 1;
		char *w = c.want[i];
		size_t room = sizeof(c.want[i]);
		int len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		fam = (unsigned)(x % 10);
		m = (unsigned)(x >> 8) % 48;
		type = (unsigned)(x >> 16) % 3;   /* stage, emit, emit with a field */
		if (fam >= 3 && fam <= 6)
			type = 0;                 /* the stage's parts */
		if (fam == 7 || fam == 8)
			type = 1 + type % 2;      /* kind and lbytes */
		if (fam == 9)
			type = 2;                 /* the fields */
		switch (fam) {
		case 0: r.pe = m * 97; break;
		case 1: r.eng = engs[m]; break;
		case 2: r.op = ops[m]; break;
		case 3: r.bytes = m ? (int64_t)(m - 1) * 12345 : -1; break;
		case 4: st.step = (m % 2 ? 65536 : 0) + m / 2 + (m > 40 ? 65536 : 0); break;
		case 5: st.n = m ? (int64_t)(m - 1) * 777 : -1; break;
		case 6: st.operand = m ? operands[m] : NULL; break;
		case 7: r.kind = m ? kinds[m] : NULL; break;
		case 8: r.kind = kinds[1]; r.lbytes = (int64_t)m * 13; break;
		default:
			/* a value as U64, the same as I64 (one text), negative,
			 * its bits as U64, another key, two fields, a string,
			 * and no field but a kind at the key's address (a
			 * static string too) with the value as lbytes */
			fl[0].v.u = m / 8;
			if (m % 8 == 1 || m % 8 == 2) {
				fl[0].type = KB_FIELD_I64;
				fl[0].v.i = m % 8 == 1 ? (int64_t)(m / 8) : -(int64_t)(m / 8) - 1;
			}
			if (m % 8 == 3)
				fl[0].v.u = (uint64_t)(-(int64_t)(m / 8) - 1);
			if (m % 8 == 4)
				fl[0] = fl[1];
			nf = m % 8 == 5 ? 2 : 1;
			if (m % 8 == 6)
				fl[0] = KB_FIELD_S("peer", m % 2 ? "s" : "t");
			if (m % 8 == 7) {
				type = 1;
				r.kind = fl[0].key;
				r.lbytes = (int64_t)(m / 8);
			}
			break;
		}
		t1 += x >> 60;
		cmd = x & 0x100 ? cmd + ((x >> 9) & 1) : (x >> 20) % 100000;
		r.t0_ps = t1 - (x >> 32) % 4096;
		r.t1_ps = t1;
		r.cmd = cmd;
		len = head_want(w, room, &r);
		if (type == 0) {
			stage_want(w, room, len, &r, &st, st.operand == operands[1] ? "q\\\"\\\\" : st.operand);
			ck_assert_int_eq(emit_stage(lane, &r, &st), 0);
			continue;
		}
		if (r.kind)
			len += snprintf(w + len, room - (size_t)len, ",\"kind\":\"%s\",\"lbytes\":%" PRId64,
					r.kind, r.lbytes);
		if (r.bytes >= 0)
			len += snprintf(w + len, room - (size_t)len, ",\"bytes\":%" PRId64, r.bytes);
		for (int k = 0; type == 2 && k < nf; k++) {
			const kb_oplog_field *g = &fl[k];
			const char *key = g->key_len == 8 ? "peer" : "tag";

			if (g->type == KB_FIELD_STR)
				len += snprintf(w + len, room - (size_t)len, ",\"%s\":\"%s\"", key, g->v.s);
			else if (g->type == KB_FIELD_I64)
				len += snprintf(w + len, room - (size_t)len, ",\"%s\":%" PRId64, key, g->v.i);
			else
				len += snprintf(w + len, room - (size_t)len, ",\"%s\":%" PRIu64, key, g->v.u);
		}
		snprintf(w + len, room - (size_t)len, "}");
		ck_assert_int_eq(kb__oplog_emit(lane, &r, type == 2 ? fl : NULL, type == 2 ? nf : 0), 0);
	}
	forms_close(log, &c, &oo, &tf);
}

START_TEST(record_forms)
{
	record_forms_run(0);
	record_forms_run(1);
}
END_TEST

/* A GEMM-like run (issue 13): one command's stages, each with its own
 * step, of a few ops in turn, through forms found by a long step's
 * digit count, whose digits each record writes over its form's. Steps 0
 * to 2,047 in order, then runs about each power of ten up to 10^9 (the
 * edges of every digit count; 10^8 and past keep no form) and steps past
 * 2^32 and up to 2^64 - 1; with and without bytes, n and an operand
 * around the step; each against printf. Into a file (the engines' path:
 * kb__oplog_emit_stage_fast, then _rare for a long step) and with a
 * callback (every record through the lane's general path). */
static void stage_steps_run(int to_file)
{
	static form_check c;
	static const char *const ops[] = { "dma_read", "dma_read", "gemm", "fetch", "store" };
	uint64_t t1 = 99000000;
	kb_oplog_options oo;
	kb_oplog *log;
	kb_oplog_lane *lane;
	tmpfiles tf = { 0 };

	log = forms_open(&c, to_file, &tf, "steps.jsonl", &oo);
	lane = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane);
	for (int i = 0; i < 8192; i++) {
		unsigned o = (unsigned)i % 5, j = (unsigned)i - 2048;
		uint64_t pow = 10;
		kb_oplog_record r = { 0, 0, 0, "dma", ops[o], (uint64_t)i / 1000, NULL, -1, -1, NULL, 0,
				      sizeof(kb_oplog_record) };
		kb_oplog_stage st = { .n = -1 };

		for (unsigned k = 0; k < (j / 32) % 9; k++)
			pow *= 10;
		st.step = i < 2048 ? (uint64_t)i : pow - 16 + j % 32;
		if (i >= 2048 && j % 97 == 0)
			st.step = j % 2 ? UINT64_MAX - j : (UINT64_C(1) << 32) + j;
		r.bytes = o == 0 ? 8192 : o == 1 ? 16384 : o == 3 ? 24576 : o == 4 ? 4096 * (i / 5 % 3 + 1) : -1;
		st.n = o == 2 ? 524288 : o == 4 ? i % 2 : -1;
		st.operand = o == 0 ? "a" : o == 1 ? "b" : NULL;
		t1 += 192000 + (uint64_t)(i % 7) * 1000;
		r.t0_ps = t1 - 192000;
		r.t1_ps = t1;
		stage_want(c.want[i], sizeof(c.want[i]), head_want(c.want[i], sizeof(c.want[i]), &r), &r, &st,
			   st.operand);
		ck_assert_int_eq(emit_stage(lane, &r, &st), 0);
	}
	forms_close(log, &c, &oo, &tf);
}

START_TEST(stage_steps)
{
	stage_steps_run(0);
	stage_steps_run(1);
}
END_TEST

/* A serial multi-PE run (issue 13): lanes of one engine on PEs whose
 * numbers have 1 to 6 digits, taking records in turns, so that a lane
 * mostly finds its form among another PE's lane's (form_shared), with
 * that PE's number in it to be changed: engine stages (short and long
 * steps, bytes, n, operands) and dispatches (kinds), each against
 * printf. Into a file and with a callback (the lanes' general path). */
static void shared_forms_run(int to_file)
{
	static form_check c;
	static const uint32_t pes[] = { 0, 7, 12, 123, 4095, 100000 };
	static const char *const engs[] = { "dma", "math", "cpu" };
	static const char *const ops[3][3] = { { "dma_read", "dma_write", "dma_read" },
					       { "add", "exp_diff", "rmax" },
					       { "dispatch", "dispatch", "dispatch" } };
	kb_oplog_options oo;
	kb_oplog *log;
	kb_oplog_lane *lane[18];
	tmpfiles tf = { 0 };

	log = forms_open(&c, to_file, &tf, "shared.jsonl", &oo);
	ck_assert_int_eq(kb__oplog_serial(log), 0);
	for (unsigned l = 0; l < 18; l++)
		ck_assert_ptr_nonnull(lane[l] = kb__oplog_lane(log, l));
	for (int i = 0; i < 8192; i++) {
		unsigned l = (unsigned)i % 18, e = l % 3, o = (unsigned)(i / 18) % 3;
		kb_oplog_record r = { 0, 0, pes[l / 3], engs[e], ops[e][o], (uint64_t)i / 40, NULL, -1, -1, NULL, 0,
				      sizeof(kb_oplog_record) };
		kb_oplog_stage st = { .step = o, .n = -1 };
		char *w = c.want[i];
		size_t room = sizeof(c.want[i]);
		int len;

		r.t1_ps = 1000 + (uint64_t)i * 977;
		r.t0_ps = r.t1_ps - 500;
		if (e == 0) {
			r.bytes = o == 1 ? 2048 : 16384;
			st.operand = o == 2 ? "v" : o == 0 ? "k" : NULL;
		} else if (e == 1) {
			st.n = o == 2 ? 8 : 512;
		} else {
			r.kind = o == 1 ? "composite" : "math";
			r.lbytes = 46 + o;
		}
		if (i % 7 == 3)
			st.step = 10 + (uint64_t)i % 2000;   /* long: its digits per record */
		len = head_want(w, room, &r);
		if (e == 2) {
			snprintf(w + len, room - (size_t)len, ",\"kind\":\"%s\",\"lbytes\":%" PRId64 "}", r.kind,
				 r.lbytes);
			ck_assert_int_eq(kb__oplog_emit(lane[l], &r, NULL, 0), 0);
			continue;
		}
		stage_want(w, room, len, &r, &st, st.operand);
		ck_assert_int_eq(emit_stage(lane[l], &r, &st), 0);
	}
	forms_close(log, &c, &oo, &tf);
}

START_TEST(shared_forms)
{
	shared_forms_run(0);
	shared_forms_run(1);
}
END_TEST

/* ---- streaming -------------------------------------------------------- */

#define STREAM_RECORDS 2000000u

START_TEST(streaming_unit)
{
	tmpfiles tf = { 0 };
	kb_oplog_options oo = { 0 };
	kb_oplog *log = NULL;
	kb_oplog_lane *lane[2];
	kb_error err;
	char hex[65], line[256];
	uint64_t records = 0, t1_prev = 0;
	size_t max_buf = 0, lines = 0;
	long rss0 = peak_rss_kb();
	FILE *f;

	oo.path = tmp_path(&tf, "stream.jsonl");
	ck_assert_int_eq(kb__oplog_create(&log, &oo, &err), 0);
	/* lanes created in reverse so the merge order (not creation order) counts */
	lane[1] = kb__oplog_lane(log, 1);
	lane[0] = kb__oplog_lane(log, 0);
	ck_assert_ptr_nonnull(lane[0]);
	ck_assert_ptr_nonnull(lane[1]);
	for (uint64_t i = 0; i < STREAM_RECORDS; i++) {
		/* two records per t1, lane 1 emitted first; t0 shrinks every 3rd */
		uint64_t t1 = 1000 + (i / 2) * 7;
		int l = (i % 2) ? 0 : 1;
		kb_oplog_record r = { t1 - (i % 3), t1, (uint32_t)l, "lp", "ev", i, NULL, -1, -1, NULL, 0, sizeof(kb_oplog_record) };

		/* plain ifs, not ck_assert: each Check assertion costs a write() */
		kb_oplog_field x = KB_FIELD_U("x", 1);

		if (kb__oplog_emit(lane[l], &r, &x, i % 5 ? 0 : 1))
			ck_abort_msg("kb__oplog_emit failed at record %llu", (unsigned long long)i);
		if (i % 1000 == 999) {
			size_t b;

			if (kb__oplog_flush(log, t1, &err))
				ck_abort_msg("kb__oplog_flush at record %llu: %s",
					     (unsigned long long)i, err.message);
			b = kb__oplog_buffered(log);
			if (b > max_buf)
				max_buf = b;
		}
	}
	ck_assert_msg(max_buf < 10000, "op_log buffered %zu records", max_buf);
	ck_assert_uint_lt(max_buf, 10);   /* only records at the last t1 stay */
	ck_assert_int_eq(kb__oplog_finish(log, hex, &records, &err), 0);
	ck_assert_uint_eq(records, STREAM_RECORDS);
	kb__oplog_destroy(log);
	ck_assert_msg(peak_rss_kb() - rss0 < 64 * 1024, "peak RSS grew by %ld kB",
		      peak_rss_kb() - rss0);

	f = fopen(tf.path[0], "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long t0, t1, cmd;
		unsigned pe;

		/* lane 0 (pe 0) first at each t1 although lane 1 was emitted first */
		if (sscanf(line, "{\"t0\":%llu,\"t1\":%llu,\"pe\":%u,\"eng\":\"lp\",\"op\":\"ev\",\"cmd\":%llu",
			   &t0, &t1, &pe, &cmd) != 4 ||
		    pe != lines % 2 || cmd != (lines % 2 ? lines - 1 : lines + 1) || t1 < t1_prev ||
		    t0 > t1)
			ck_abort_msg("line %zu wrong or out of order: %s", lines + 1, line);
		t1_prev = t1;
		lines++;
	}
	fclose(f);
	ck_assert_uint_eq(lines, STREAM_RECORDS);
	tmp_clean(&tf);
}
END_TEST

/* Sealed records merged in slices by several threads at once (the parallel
 * executor's op_log) give the same bytes, in the same order, as one thread
 * flushing by time bound. Lanes have ties across lanes at every t1 and
 * records of one lane at the same t1 too. */
#define SHARE_LANES 17
#define SHARE_ROUNDS 6
#define SHARE_PER_ROUND 30000u
#define SHARE_HELPERS 3

typedef struct share_count {
	uint64_t n, t1_prev;
	int out_of_order;
} share_count;

static int share_cb(const kb_oplog_record *rec, void *payload)
{
	share_count *c = payload;

	if (rec->t1_ps < c->t1_prev || rec->json_len < 10 || rec->json[0] != '{')
		c->out_of_order = 1;
	c->t1_prev = rec->t1_ps;
	c->n++;
	return 0;
}

static void *share_helper(void *arg)
{
	kb__oplog_share(arg);
	return NULL;
}

/* Emits round r's records (the same ones for both logs). */
static void share_emit(kb_oplog_lane **lane, unsigned r)
{
	for (uint64_t i = 0; i < SHARE_PER_ROUND; i++) {
		uint64_t k = (uint64_t)r * SHARE_PER_ROUND + i;
		unsigned l = (unsigned)((k * 7919u) % SHARE_LANES);
		uint64_t t1 = 100 + (k / 5) * 3;   /* five records per t1 */
		kb_oplog_record rec = { t1 - (k % 4), t1, l, "lp", "ev", k, NULL, -1, (int64_t)(k % 9), NULL, 0, sizeof(kb_oplog_record) };

		if (kb__oplog_emit(lane[l], &rec, NULL, 0))
			ck_abort_msg("kb__oplog_emit failed at record %llu", (unsigned long long)k);
	}
}

/* The two logs' lanes, created in reverse: the order is the lane's, not
 * creation's. */
static void share_lanes(kb_oplog *seq, kb_oplog *par, kb_oplog_lane **ls, kb_oplog_lane **lp)
{
	for (int l = SHARE_LANES - 1; l >= 0; l--) {
		ls[l] = kb__oplog_lane(seq, (uint32_t)l);
		lp[l] = kb__oplog_lane(par, (uint32_t)l);
		ck_assert_ptr_nonnull(ls[l]);
		ck_assert_ptr_nonnull(lp[l]);
	}
}

/* Round r's records into both logs; seq flushed by time bound. */
static void share_round(kb_oplog *seq, kb_oplog_lane **ls, kb_oplog_lane **lp, unsigned r)
{
	kb_time bound = 100 + ((uint64_t)(r + 1) * SHARE_PER_ROUND / 5) * 3;
	kb_error err;

	share_emit(ls, r);
	share_emit(lp, r);
	ck_assert_int_eq(kb__oplog_flush(seq, bound, &err), 0);
}

START_TEST(sealed_slices_shared)
{
	kb_oplog *seq = NULL, *par = NULL;
	kb_oplog_lane *ls[SHARE_LANES], *lp[SHARE_LANES];
	kb_oplog_options oo = { 0 };
	share_count cs = { 0 }, cp = { 0 };
	kb_error err;
	char hs[65], hp[65];
	uint64_t rs = 0, rp = 0;

	oo.callback = share_cb;
	oo.payload = &cs;
	ck_assert_int_eq(kb__oplog_create(&seq, &oo, &err), 0);
	oo.payload = &cp;
	ck_assert_int_eq(kb__oplog_create(&par, &oo, &err), 0);
	share_lanes(seq, par, ls, lp);
	for (unsigned r = 0; r < SHARE_ROUNDS; r++) {
		pthread_t th[SHARE_HELPERS];

		share_round(seq, ls, lp, r);
		/* every record of the round ends before bound: seal them all */
		ck_assert_int_eq(kb__oplog_flush_sealed(par, &err), 0);
		ck_assert_int_eq(kb__oplog_seal(par), 0);
		for (int h = 0; h < SHARE_HELPERS; h++)
			ck_assert_int_eq(pthread_create(&th[h], NULL, share_helper, par), 0);
		ck_assert_int_eq(kb__oplog_flush_sealed(par, &err), 0);
		for (int h = 0; h < SHARE_HELPERS; h++)
			pthread_join(th[h], NULL);
		ck_assert_uint_eq(cp.n, cs.n);
	}
	ck_assert_int_eq(kb__oplog_finish(seq, hs, &rs, &err), 0);
	ck_assert_int_eq(kb__oplog_finish(par, hp, &rp, &err), 0);
	ck_assert_uint_eq(rs, (uint64_t)SHARE_ROUNDS * SHARE_PER_ROUND);
	ck_assert_uint_eq(rp, rs);
	ck_assert_uint_eq(cp.n, rs);
	ck_assert_int_eq(cs.out_of_order, 0);
	ck_assert_int_eq(cp.out_of_order, 0);
	ck_assert_str_eq(hp, hs);
	kb__oplog_destroy(seq);
	kb__oplog_destroy(par);
}
END_TEST

/* The in-order sink as a pipeline stage that lags: sealed slices left
 * waiting across several seals (the window over at once, or a few kept)
 * are sunk later, in order, ahead of the newer ones: the same file bytes
 * and hash as one thread flushing by time bound. */
START_TEST(sealed_slices_lag)
{
	kb_oplog *seq = NULL, *par = NULL;
	kb_oplog_lane *ls[SHARE_LANES], *lp[SHARE_LANES];
	kb_oplog_options oo = { 0 };
	tmpfiles tf = { 0 };
	kb_error err;
	char hs[65], hp[65], *a, *b;
	uint64_t rs = 0, rp = 0;
	size_t la, lb, waited = 0;
	atomic_uint busy;

	oo.path = tmp_path(&tf, "seq.jsonl");
	ck_assert_int_eq(kb__oplog_create(&seq, &oo, &err), 0);
	oo.path = tmp_path(&tf, "par.jsonl");
	ck_assert_int_eq(kb__oplog_create(&par, &oo, &err), 0);
	/* 48 threads merge: a round's 30000 records in 48 slices, not 29 */
	kb__oplog_threads(par, 48);
	share_lanes(seq, par, ls, lp);
	for (unsigned r = 0; r < SHARE_ROUNDS; r++) {
		pthread_t th[SHARE_HELPERS];

		share_round(seq, ls, lp, r);
		/* at most 40 wait (the pump's bound), then seal behind them */
		ck_assert_int_eq(kb__oplog_sink(par, NULL, 40, &err), 0);
		ck_assert_uint_le(kb__oplog_waiting(par), 40);
		ck_assert_int_eq(kb__oplog_seal(par), 0);
		for (int h = 0; h < SHARE_HELPERS; h++)
			ck_assert_int_eq(pthread_create(&th[h], NULL, share_helper, par), 0);
		/* rounds 0, 2, 4: the window is over before the sink starts;
		 * else it sinks while the helpers merge, then stops */
		atomic_init(&busy, r % 2);
		ck_assert_int_eq(kb__oplog_sink(par, &busy, 0, &err), 0);
		for (int h = 0; h < SHARE_HELPERS; h++)
			pthread_join(th[h], NULL);
		if (r % 2)
			ck_assert_uint_eq(kb__oplog_waiting(par), 0);
		else
			ck_assert_uint_ge(kb__oplog_waiting(par), 48);
		waited += kb__oplog_waiting(par);
	}
	ck_assert_uint_gt(waited, 0);
	ck_assert_int_eq(kb__oplog_finish(seq, hs, &rs, &err), 0);
	ck_assert_int_eq(kb__oplog_finish(par, hp, &rp, &err), 0);
	ck_assert_uint_eq(rs, (uint64_t)SHARE_ROUNDS * SHARE_PER_ROUND);
	ck_assert_uint_eq(rp, rs);
	ck_assert_str_eq(hp, hs);
	a = kbt_slurp(tf.path[0], &la);
	b = kbt_slurp(tf.path[1], &lb);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(la, lb);
	ck_assert_int_eq(memcmp(a, b, la), 0);
	free(a);
	free(b);
	kb__oplog_destroy(seq);
	kb__oplog_destroy(par);
	tmp_clean(&tf);
}
END_TEST

/* kb__oplog_serial (a sequential executor): records that come in their
 * final order go to one shared buffer, hashed as it is; the others to
 * their lanes, merged with it. The same file bytes and hash as a plain
 * log, with a record callback too (which merges), when records come out
 * of order across lanes, tie on t1 across lanes and within one, and a
 * lane's records lie in both buffers at once; and when the log goes back
 * to lanes (kb__oplog_parallel: auto's windows after a stretch on one
 * thread) and serial again, many times, with records left in the shared
 * buffer at each change, and flushes between. */
#define SERIAL_LANES 5
#define SERIAL_RECORDS 20000u

typedef struct serial_cb {
	uint64_t n;
	char *text;
	size_t len, cap;
} serial_cb;

/* Keeps each record's JSON as a line: what the callback saw, in order. */
static int serial_keep(const kb_oplog_record *rec, void *payload)
{
	serial_cb *c = payload;

	if (c->len + rec->json_len + 1 > c->cap) {
		c->cap = 2 * (c->len + rec->json_len + 1);
		c->text = realloc(c->text, c->cap);
		if (!c->text)
			return 1;
	}
	memcpy(c->text + c->len, rec->json, rec->json_len);
	c->len += rec->json_len;
	c->text[c->len++] = '\n';
	c->n++;
	return 0;
}

START_TEST(serial_shared_lane)
{
	/* times under 10^8 (formatted whole), and past it across a prefix
	 * (38 * 10^8: the lanes' kept prefixes change mid-run) */
	for (int run = 0; run < 8; run++) {
		int with_cb = run % 2, toggle = run >= 4;
		kb_oplog *log[2];
		kb_oplog_lane *lane[2][SERIAL_LANES];
		kb_oplog_options oo = { 0 };
		serial_cb cb[2] = { { 0 }, { 0 } };
		tmpfiles tf = { 0 };
		kb_error err;
		char hex[2][65], *text[2];
		uint64_t records[2], lane_t1[SERIAL_LANES] = { 0 }, prev_t1 = 0;
		uint64_t now = run % 4 < 2 ? 1000 : UINT64_C(3800000000) - 3000;
		size_t len[2], in_order = 0, late = 0, ties = 0;
		unsigned prev_lane = 0;

		for (int k = 0; k < 2; k++) {
			oo.path = tmp_path(&tf, k ? "serial.jsonl" : "plain.jsonl");
			oo.callback = with_cb ? serial_keep : NULL;
			oo.payload = &cb[k];
			ck_assert_int_eq(kb__oplog_create(&log[k], &oo, &err), 0);
			/* serial before some lanes exist, after others */
			for (int l = SERIAL_LANES - 1; l >= 0; l--) {
				if (k && l == 2)
					ck_assert_int_eq(kb__oplog_serial(log[k]), 0);
				lane[k][l] = kb__oplog_lane(log[k], (uint32_t)l * 3);
				ck_assert_ptr_nonnull(lane[k][l]);
			}
			if (k)
				ck_assert_int_eq(kb__oplog_serial(log[k]), 0);   /* twice: no change */
		}
		for (uint64_t i = 0; i < SERIAL_RECORDS; i++) {
			uint64_t h = (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
			unsigned l = (unsigned)((h >> 50) % SERIAL_LANES);
			/* mostly at now; some up to 3 earlier (late), never
			 * before the lane's last record */
			uint64_t t1 = now - ((h >> 40) % 16 < 4 ? (h >> 20) % 4 : 0);

			if (t1 < lane_t1[l])
				t1 = lane_t1[l];
			lane_t1[l] = t1;
			if (i && (t1 < prev_t1 || (t1 == prev_t1 && l < prev_lane)))
				late++;
			else
				in_order++;
			ties += i && t1 == prev_t1;
			prev_t1 = t1;
			prev_lane = l;
			for (int k = 0; k < 2; k++) {
				kb_oplog_record r = { t1 - (h % 7), t1, l, "lp", i % 3 ? "ev" : "other",
						      i, NULL, -1, (int64_t)(h % 5) - 1, NULL, 0,
						      sizeof(kb_oplog_record) };
				kb_oplog_field f = KB_FIELD_U("x", h % 1000);

				if (kb__oplog_emit(lane[k][l], &r, &f, i % 2 ? 1 : 0))
					ck_abort_msg("kb__oplog_emit failed at record %" PRIu64, i);
				/* every record before now - 3 is final */
				if (i % 97 == 96 && kb__oplog_flush(log[k], now - 3, &err))
					ck_abort_msg("kb__oplog_flush: %s", err.message);
			}
			now += (h >> 30) % 3 == 0;
			/* lanes again, then serial again, at uneven points */
			if (toggle && i % 1500 == 700)
				kb__oplog_parallel(log[1]);
			if (toggle && i % 1500 == 1400)
				ck_assert_int_eq(kb__oplog_serial(log[1]), 0);
		}
		ck_assert_uint_gt(late, SERIAL_RECORDS / 50);
		ck_assert_uint_gt(in_order, SERIAL_RECORDS / 2);
		ck_assert_uint_gt(ties, SERIAL_RECORDS / 4);
		for (int k = 0; k < 2; k++) {
			ck_assert_int_eq(kb__oplog_finish(log[k], hex[k], &records[k], &err), 0);
			kb__oplog_destroy(log[k]);
			ck_assert_uint_eq(records[k], SERIAL_RECORDS);
			text[k] = kbt_slurp(tf.path[k], &len[k]);
			ck_assert_ptr_nonnull(text[k]);
		}
		ck_assert_str_eq(hex[1], hex[0]);
		ck_assert_uint_eq(len[1], len[0]);
		ck_assert_int_eq(memcmp(text[0], text[1], len[0]), 0);
		if (with_cb) {
			ck_assert_uint_eq(cb[1].n, SERIAL_RECORDS);
			ck_assert_uint_eq(cb[1].len, len[0]);
			ck_assert_int_eq(memcmp(cb[1].text, text[0], len[0]), 0);
		}
		for (int k = 0; k < 2; k++) {
			free(text[k]);
			free(cb[k].text);
		}
		tmp_clean(&tf);
	}
}
END_TEST

/* A lane's order is at most KB_OPLOG_MAX_ORDER (the merge key's room). */
START_TEST(lane_order_limit)
{
	kb_oplog *log = NULL;
	kb_error err;

	ck_assert_int_eq(kb__oplog_create(&log, NULL, &err), 0);
	ck_assert_ptr_nonnull(kb__oplog_lane(log, KB_OPLOG_MAX_ORDER));
	ck_assert_ptr_null(kb__oplog_lane(log, KB_OPLOG_MAX_ORDER + 1u));
	kb__oplog_destroy(log);
}
END_TEST

/* A long synthetic run streams its op_log: peak memory does not follow it. */
START_TEST(streaming_synthetic)
{
	static const char *const p[] = { "lps=16", "events=1000000", "seed=3", NULL };
	tmpfiles tf = { 0 };
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_result r = KB_RESULT_INIT;
	long rss0 = peak_rss_kb(), grew;
	FILE *f;
	size_t lines = 0;
	int c;

	o.threads = 1;
	o.oplog_path = tmp_path(&tf, "synth.jsonl");
	run_ok("synthetic", p, &o, &r);
	grew = peak_rss_kb() - rss0;
	ck_assert_uint_gt(r.records, 900000);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	grew = 0;  /* shadow memory and quarantines make RSS meaningless here */
#endif
	ck_assert_msg(grew < 64 * 1024, "peak RSS grew by %ld kB for %llu records", grew,
		      (unsigned long long)r.records);
	f = fopen(o.oplog_path, "r");
	ck_assert_ptr_nonnull(f);
	while ((c = getc(f)) != EOF)
		lines += c == '\n';
	fclose(f);
	ck_assert_uint_eq(lines, r.records);
	kb_result_clear(&r);
	tmp_clean(&tf);
}
END_TEST

/* ---- write failures --------------------------------------------------- */

START_TEST(write_fail_dev_full)
{
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_error err;
	int rc;

	if (access("/dev/full", W_OK) != 0)
		return;
	o.threads = 1;
	o.oplog_path = "/dev/full";
	rc = run_fail("gemm", gemm128, &o, &err);
	ck_assert_msg(rc == KB_EIO, "rc %d (%s)", rc, err.message);
	ck_assert_int_eq(err.code, KB_EIO);
	ck_assert_msg(strstr(err.message, "/dev/full"), "message '%s' lacks the path", err.message);
	/* a long run fails mid-way, on every executor */
	for (int t = 0; t <= 2; t++) {
		static const char *const p[] = { "lps=8", "events=200000", NULL };

		o.threads = t;
		rc = run_fail("synthetic", p, &o, &err);
		ck_assert_msg(rc == KB_EIO, "threads %d: rc %d (%s)", t, rc, err.message);
		ck_assert(strstr(err.message, "/dev/full") != NULL);
	}
}
END_TEST

START_TEST(write_fail_no_dir)
{
	tmpfiles tf = { 0 };
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_error err;
	int rc;

	o.threads = 1;
	o.oplog_path = tmp_path(&tf, "no/such/dir/log.jsonl");
	rc = run_fail("gemm", gemm128, &o, &err);
	ck_assert_msg(rc == KB_EIO, "rc %d (%s)", rc, err.message);
	ck_assert_msg(strstr(err.message, "no/such/dir/log.jsonl"), "message '%s'", err.message);
	o.oplog_path = NULL;
	o.trace_path = tf.path[0];
	rc = run_fail("gemm", gemm128, &o, &err);
	ck_assert_msg(rc == KB_EIO, "trace: rc %d (%s)", rc, err.message);
	ck_assert(strstr(err.message, "no/such/dir/log.jsonl") != NULL);
	tf.n = 0;
	tmp_clean(&tf);
}
END_TEST

START_TEST(write_fail_trace_dev_full)
{
	tmpfiles tf = { 0 };
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_error err;
	int rc;

	if (access("/dev/full", W_OK) != 0)
		return;
	o.threads = 1;
	o.trace_path = "/dev/full";
	rc = run_fail("gemm", gemm128, &o, &err);
	ck_assert_msg(rc == KB_EIO, "rc %d (%s)", rc, err.message);
	ck_assert_msg(strstr(err.message, "trace") && strstr(err.message, "/dev/full"),
		      "message '%s'", err.message);
	/* with a good op_log next to it */
	o.oplog_path = tmp_path(&tf, "log.jsonl");
	rc = run_fail("gqa_decode_opt2", decode4, &o, &err);
	ck_assert_msg(rc == KB_EIO, "rc %d (%s)", rc, err.message);
	tmp_clean(&tf);
}
END_TEST

/* ---- trace ------------------------------------------------------------ */

static void check_trace(const char *bench, const char *const *params, int threads)
{
	tmpfiles tf = { 0 };
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_result r = KB_RESULT_INIT;
	json_error_t jerr;
	json_t *root, *evs, *ev;
	size_t i, n_x = 0, n_proc = 0, n_thread = 0, n_lines;
	char *buf, **lines;
	size_t len;

	o.threads = threads;
	o.oplog_path = tmp_path(&tf, "log.jsonl");
	o.trace_path = tmp_path(&tf, "trace.json");
	run_ok(bench, params, &o, &r);
	buf = kbt_slurp(o.oplog_path, &len);
	ck_assert_ptr_nonnull(buf);
	n_lines = split_lines(buf, len, &lines);
	root = json_load_file(o.trace_path, 0, &jerr);
	ck_assert_msg(root != NULL, "trace does not parse: %s at line %d", jerr.text, jerr.line);
	evs = json_object_get(root, "traceEvents");
	ck_assert_msg(json_is_array(evs), "no traceEvents array");
	json_array_foreach(evs, i, ev) {
		const char *ph = json_string_value(json_object_get(ev, "ph"));
		const char *name = json_string_value(json_object_get(ev, "name"));

		ck_assert_ptr_nonnull(ph);
		ck_assert_ptr_nonnull(name);
		if (strcmp(ph, "X") == 0) {
			json_t *ts = json_object_get(ev, "ts"), *dur = json_object_get(ev, "dur");
			json_t *args = json_object_get(ev, "args");
			json_t *rec;

			ck_assert(json_is_number(ts) && json_is_number(dur));
			ck_assert(json_number_value(dur) >= 0);
			ck_assert(json_is_integer(json_object_get(ev, "pid")));
			ck_assert(json_is_integer(json_object_get(ev, "tid")));
			/* events follow the op_log, record for record */
			ck_assert_uint_lt(n_x, n_lines);
			rec = json_loads(lines[n_x], 0, NULL);
			ck_assert_ptr_nonnull(rec);
			ck_assert_msg(json_equal(args, rec), "trace event %zu args differ from line %zu",
				      n_x, n_x + 1);
			ck_assert_int_eq(json_integer_value(json_object_get(ev, "pid")),
					 json_integer_value(json_object_get(rec, "pe")));
			ck_assert_str_eq(name, json_string_value(json_object_get(rec, "op")));
			/* microseconds with picosecond precision */
			ck_assert_int_eq((long long)(json_number_value(ts) * 1e6 + 0.5),
					 json_integer_value(json_object_get(rec, "t0")));
			ck_assert_int_eq((long long)(json_number_value(dur) * 1e6 + 0.5),
					 json_integer_value(json_object_get(rec, "t1")) -
						 json_integer_value(json_object_get(rec, "t0")));
			json_decref(rec);
			n_x++;
		} else if (strcmp(ph, "M") == 0) {
			n_proc += strcmp(name, "process_name") == 0;
			n_thread += strcmp(name, "thread_name") == 0;
			ck_assert(json_is_string(json_object_get(json_object_get(ev, "args"), "name")));
		}
	}
	ck_assert_uint_eq(n_x, r.records);
	ck_assert_uint_eq(n_x, n_lines);
	ck_assert_uint_eq(n_proc, r.pes);
	ck_assert_uint_ge(n_thread, n_proc);
	json_decref(root);
	free(lines);
	free(buf);
	kb_result_clear(&r);
	tmp_clean(&tf);
}

START_TEST(trace_gemm)
{
	check_trace("gemm", gemm128, 1);
}
END_TEST

START_TEST(trace_decode)
{
	check_trace("gqa_decode_opt3", decode4, 0);
}
END_TEST

/* Small parameters per bench for the track test; a bench not named here runs
 * with its defaults, so a new bench is covered too. */
static const char *const *small_params(const char *bench)
{
	static const char *const gemm_bias[] = { "epilogue=bias", NULL }; /* overlaps at 256 */
	static const char *const synth[] = { "lps=8", "events=4000", NULL };

	if (strcmp(bench, "gemm") == 0)
		return gemm_bias;
	if (strcmp(bench, "synthetic") == 0)
		return synth;
	if (strncmp(bench, "gqa_decode", 10) == 0)
		return decode4;
	return NULL;
}

typedef struct span {
	long long pid, tid, t0, t1;
} span;

static int span_cmp(const void *a, const void *b)
{
	const span *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	return x->t1 > y->t1 ? -1 : x->t1 < y->t1; /* the longer first: it holds the other */
}

/* Perfetto draws complete events on one track only when they nest: checks
 * that no two events on one (pid, tid) partly overlap. Returns the count of
 * events that do, and the first such event in *first. */
static size_t partial_overlaps(span *s, size_t n, char *first, size_t first_len)
{
	size_t bad = 0, depth = 0;
	long long *stack = malloc((n + 1) * sizeof(*stack));

	ck_assert_ptr_nonnull(stack);
	qsort(s, n, sizeof(*s), span_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i && (s[i].pid != s[i - 1].pid || s[i].tid != s[i - 1].tid))
			depth = 0;
		while (depth && stack[depth - 1] <= s[i].t0)
			depth--;
		if (depth && s[i].t1 > stack[depth - 1] && bad++ == 0)
			snprintf(first, first_len, "pid %lld tid %lld: [%lld, %lld] across an event ending %lld",
				 s[i].pid, s[i].tid, s[i].t0, s[i].t1, stack[depth - 1]);
		stack[depth++] = s[i].t1;
	}
	free(stack);
	return bad;
}

START_TEST(trace_tracks)
{
	for (size_t b = 0; b < kb_bench_count(); b++) {
		const char *bench = kb_bench_get(b)->name;
		tmpfiles tf = { 0 };
		kb_run_options o = KB_RUN_OPTIONS_INIT;
		kb_result r = KB_RESULT_INIT;
		json_error_t jerr;
		json_t *root, *evs, *ev;
		span *s;
		size_t i, n = 0, bad;
		char first[256] = "";

		o.trace_path = tmp_path(&tf, "trace.json");
		run_ok(bench, small_params(bench), &o, &r);
		root = json_load_file(o.trace_path, 0, &jerr);
		ck_assert_msg(root != NULL, "%s: trace does not parse: %s", bench, jerr.text);
		evs = json_object_get(root, "traceEvents");
		s = malloc((json_array_size(evs) + 1) * sizeof(*s));
		ck_assert_ptr_nonnull(s);
		json_array_foreach(evs, i, ev) {
			json_t *args = json_object_get(ev, "args");

			if (strcmp(json_string_value(json_object_get(ev, "ph")), "X") != 0)
				continue;
			s[n].pid = json_integer_value(json_object_get(ev, "pid"));
			s[n].tid = json_integer_value(json_object_get(ev, "tid"));
			s[n].t0 = json_integer_value(json_object_get(args, "t0"));
			s[n].t1 = json_integer_value(json_object_get(args, "t1"));
			n++;
		}
		ck_assert_uint_eq(n, r.records);
		bad = partial_overlaps(s, n, first, sizeof(first));
		ck_assert_msg(bad == 0, "%s: %zu of %zu events partly overlap one on their track; first %s",
			      bench, bad, n, first);
		free(s);
		json_decref(root);
		kb_result_clear(&r);
		tmp_clean(&tf);
	}
}
END_TEST

/* The checker itself: nested and disjoint events pass, a partial overlap on
 * one track fails, the same overlap on two tracks passes. */
START_TEST(trace_tracks_checker)
{
	span ok[] = { { 0, 1, 0, 10 }, { 0, 1, 2, 5 }, { 0, 1, 10, 12 }, { 0, 2, 3, 20 } };
	span bad[] = { { 0, 1, 0, 10 }, { 0, 1, 5, 15 } };
	char first[256];

	ck_assert_uint_eq(partial_overlaps(ok, 4, first, sizeof(first)), 0);
	ck_assert_uint_eq(partial_overlaps(bad, 2, first, sizeof(first)), 1);
	bad[1].tid = 2;
	ck_assert_uint_eq(partial_overlaps(bad, 2, first, sizeof(first)), 0);
}
END_TEST

/* ---- callback --------------------------------------------------------- */

typedef struct cb_state {
	size_t count, stop_after;
	char *text;
	size_t len, cap;
	uint64_t last_t1;
	int bad;
} cb_state;

static int on_record(const kb_oplog_record *rec, void *payload)
{
	cb_state *s = payload;

	if (rec->t1_ps < s->last_t1 || !rec->json || rec->json_len == 0 ||
	    rec->json[rec->json_len - 1] != '}' || rec->t0_ps > rec->t1_ps)
		s->bad++;
	s->last_t1 = rec->t1_ps;
	if (s->len + rec->json_len + 2 > s->cap) {
		s->cap = 2 * (s->cap + rec->json_len + 2);
		s->text = realloc(s->text, s->cap);
		if (!s->text)
			abort();
	}
	memcpy(s->text + s->len, rec->json, rec->json_len);
	s->len += rec->json_len;
	s->text[s->len++] = '\n';
	s->count++;
	return s->stop_after && s->count >= s->stop_after;
}

START_TEST(callback_every_record)
{
	for (int t = 0; t <= 1; t++) {
		tmpfiles tf = { 0 };
		kb_run_options o = KB_RUN_OPTIONS_INIT;
		cb_state s = { 0 };
		kb_result r = KB_RESULT_INIT;
		char *buf;
		size_t len = 0;

		o.threads = t;
		o.oplog_path = tmp_path(&tf, "log.jsonl");
		o.on_record = on_record;
		o.payload = &s;
		run_ok("gqa_decode_opt2", decode4, &o, &r);
		buf = kbt_slurp(o.oplog_path, &len);
		ck_assert_ptr_nonnull(buf);
		ck_assert_uint_eq(s.count, r.records);
		ck_assert_int_eq(s.bad, 0);
		ck_assert_uint_eq(s.len, len);
		ck_assert_msg(memcmp(s.text, buf, len) == 0, "callback JSON differs from the file");
		free(s.text);
		free(buf);
		kb_result_clear(&r);
		tmp_clean(&tf);
	}
}
END_TEST

START_TEST(callback_stops_run)
{
	for (int t = 0; t <= 2; t++) {
		kb_run_options o = KB_RUN_OPTIONS_INIT;
		cb_state s = { 0 };
		kb_error err;
		int rc;

		s.stop_after = 5;
		o.threads = t;
		o.on_record = on_record;
		o.payload = &s;
		rc = run_fail("gemm", gemm128, &o, &err);
		ck_assert_msg(rc != 0, "threads %d: a callback returning nonzero did not fail the run", t);
		ck_assert_int_eq(err.code, rc);
		ck_assert_msg(strstr(err.message, "callback"), "message '%s'", err.message);
		ck_assert_uint_eq(s.count, 5);
		free(s.text);
		/* a long synthetic run stops early too */
		{
			static const char *const p[] = { "lps=8", "events=100000", NULL };

			memset(&s, 0, sizeof(s));
			s.stop_after = 10;
			rc = run_fail("synthetic", p, &o, &err);
			ck_assert_msg(rc != 0, "synthetic threads %d went on", t);
			ck_assert_uint_eq(s.count, 10);
			free(s.text);
		}
	}
}
END_TEST

Suite *oplog_suite(void)
{
	Suite *s = suite_create("oplog");
	TCase *format = tcase_create("format");
	TCase *stream = tcase_create("streaming");
	TCase *fail = tcase_create("failures");
	TCase *sinks = tcase_create("sinks");

	tcase_add_test(format, key_order_gemm);
	tcase_add_test(format, key_order_decode);
	tcase_add_test(format, record_order);
	tcase_add_test(format, sha256_of_file);
	tcase_add_test(format, sha256_empty);
	tcase_add_test(format, sha256_paths);
	tcase_add_test(format, typed_fields);
	tcase_add_test(format, stage_records);
	tcase_add_test(format, number_edges);
	tcase_add_test(format, number_sweep);
	tcase_add_test(format, time_pairs);
	tcase_add_test(format, number_at_record_end);
	tcase_add_test(format, middle_templates);
	tcase_add_test(format, kind_templates);
	tcase_add_test(format, cmd_digits);
	tcase_add_test(format, record_forms);
	tcase_add_test(format, stage_steps);
	tcase_add_test(format, shared_forms);
	suite_add_tcase(s, format);

	tcase_set_timeout(stream, 120);
	tcase_add_test(stream, streaming_unit);
	tcase_add_test(stream, streaming_synthetic);
	tcase_add_test(stream, sealed_slices_shared);
	tcase_add_test(stream, sealed_slices_lag);
	tcase_add_test(stream, serial_shared_lane);
	tcase_add_test(stream, lane_order_limit);
	suite_add_tcase(s, stream);

	tcase_add_test(fail, write_fail_dev_full);
	tcase_add_test(fail, write_fail_no_dir);
	tcase_add_test(fail, write_fail_trace_dev_full);
	suite_add_tcase(s, fail);

	tcase_add_test(sinks, trace_gemm);
	tcase_add_test(sinks, trace_decode);
	tcase_add_test(sinks, trace_tracks);
	tcase_add_test(sinks, trace_tracks_checker);
	tcase_add_test(sinks, callback_every_record);
	tcase_add_test(sinks, callback_stops_run);
	suite_add_tcase(s, sinks);
	return s;
}
