/*
 * Tests of the topology module: defaults, overlays, every error class,
 * --set parsing, dump round trips and clone independence.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernbench/topology.h"
#include "model/topology.h"

Suite *topology_suite(void);

#define SCHEMA "\"schema\": \"kernbench-topology/1\""

/* ---- helpers --------------------------------------------------------- */

static kb_topology *load_ok(const char *json)
{
	kb_topology *t = NULL;
	kb_error err;
	int rc = kb_topology_load_string(&t, json, &err);

	ck_assert_msg(rc == 0, "load failed (%d): %s", rc, err.message);
	ck_assert_ptr_nonnull(t);
	return t;
}

/* Loads json, expects code and a message containing needle; returns err. */
static kb_error load_err(const char *json, int code, const char *needle)
{
	kb_topology *t = NULL;
	kb_error err;
	int rc = kb_topology_load_string(&t, json, &err);

	ck_assert_msg(rc == code, "%s: got %d (%s), want %d", json, rc, err.message, code);
	ck_assert_int_eq(err.code, code);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(err.message, needle), "message '%s' lacks '%s'", err.message,
		      needle);
	return err;
}

static double get(const kb_topology *t, const char *key)
{
	kb_error err;
	double v = -12345;
	int rc = kb_topology_get_number(t, key, &v, &err);

	ck_assert_msg(rc == 0, "get %s: %s", key, err.message);
	return v;
}

/* Sets key=value, expects code, a message naming the key, the key in
 * err.source (doc/api.md), t unchanged. */
static void set_err(kb_topology *t, const char *key, const char *value, int code)
{
	char *before = kb_topology_dump(t), *after;
	kb_error err;
	int rc = kb_topology_set(t, key, value, &err);

	ck_assert_msg(rc == code, "set %s=%s: got %d (%s), want %d", key, value, rc, err.message,
		      code);
	ck_assert_msg(strstr(err.message, key), "message '%s' lacks '%s'", err.message, key);
	ck_assert_str_eq(err.source, key);
	ck_assert_int_eq(err.line, 0);
	after = kb_topology_dump(t);
	ck_assert_str_eq(before, after);
	kb_free(before);
	kb_free(after);
}

static void set_ok(kb_topology *t, const char *key, const char *value)
{
	kb_error err;
	int rc = kb_topology_set(t, key, value, &err);

	ck_assert_msg(rc == 0, "set %s=%s: %s", key, value, err.message);
}

/* Writes text to a fresh temporary file; the caller unlinks and frees. */
static char *temp_file(const char *text)
{
	char *path = strdup("/tmp/kb_check_topology_XXXXXX");
	FILE *f;
	int fd;

	ck_assert_ptr_nonnull(path);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

static void assert_same_params(const kb_topo_params *a, const kb_topo_params *b)
{
	ck_assert(a->clock_freq_ghz == b->clock_freq_ghz);
	ck_assert_uint_eq(a->clusters, b->clusters);
	ck_assert_uint_eq(a->pes_per_cluster, b->pes_per_cluster);
	ck_assert(a->cost.fixed_cycles == b->cost.fixed_cycles);
	ck_assert(a->cost.r_cycles_per_byte == b->cost.r_cycles_per_byte);
	ck_assert_uint_eq(a->cost.max_composite_logical_bytes, b->cost.max_composite_logical_bytes);
	ck_assert_uint_eq(a->link.engine_latency_cycles, b->link.engine_latency_cycles);
	ck_assert_uint_eq(a->link.intra_cluster_latency_cycles, b->link.intra_cluster_latency_cycles);
	ck_assert_uint_eq(a->link.inter_cluster_latency_cycles, b->link.inter_cluster_latency_cycles);
	ck_assert(a->link.intra_cluster_bytes_per_cycle == b->link.intra_cluster_bytes_per_cycle);
	ck_assert(a->link.inter_cluster_bytes_per_cycle == b->link.inter_cluster_bytes_per_cycle);
	ck_assert_uint_eq(a->mem.hbm_bytes, b->mem.hbm_bytes);
	ck_assert_uint_eq(a->mem.tcm_bytes, b->mem.tcm_bytes);
	ck_assert_uint_eq(a->dma.setup_cycles, b->dma.setup_cycles);
	ck_assert(a->dma.bytes_per_cycle == b->dma.bytes_per_cycle);
	ck_assert_uint_eq(a->tcm.latency_cycles, b->tcm.latency_cycles);
	ck_assert(a->tcm.bytes_per_cycle == b->tcm.bytes_per_cycle);
	ck_assert_uint_eq(a->gemm.macs_per_cycle, b->gemm.macs_per_cycle);
	ck_assert_uint_eq(a->gemm.fill_cycles, b->gemm.fill_cycles);
	ck_assert_uint_eq(a->gemm.tile_m, b->gemm.tile_m);
	ck_assert_uint_eq(a->gemm.tile_n, b->gemm.tile_n);
	ck_assert_uint_eq(a->gemm.tile_k, b->gemm.tile_k);
	ck_assert_uint_eq(a->math.vector_width, b->math.vector_width);
	ck_assert_uint_eq(a->sched.max_inflight_tiles, b->sched.max_inflight_tiles);
	ck_assert_uint_eq(a->ipcq.setup_cycles, b->ipcq.setup_cycles);
}

/* dump -> load_string -> dump must give the same text and parameters. */
static void assert_round_trip(const kb_topology *t)
{
	char *d1 = kb_topology_dump(t), *d2;
	kb_topology *u;

	ck_assert_ptr_nonnull(d1);
	u = load_ok(d1);
	d2 = kb_topology_dump(u);
	ck_assert_ptr_nonnull(d2);
	ck_assert_str_eq(d1, d2);
	assert_same_params(kb__topology_params(t), kb__topology_params(u));
	kb_free(d1);
	kb_free(d2);
	kb_topology_destroy(u);
}

/* ---- defaults and overlays ------------------------------------------- */

START_TEST(test_default_values)
{
	kb_topology *t = NULL;
	const kb_topo_params *p;
	kb_error err;

	ck_assert_int_eq(kb_topology_default(&t, &err), 0);
	p = kb__topology_params(t);
	/* ARCHITECTURE.md section 4. */
	ck_assert(p->clock_freq_ghz == 1.0);
	ck_assert(p->cost.fixed_cycles == 40.0);
	ck_assert(p->cost.r_cycles_per_byte == 0.0625);
	ck_assert_uint_eq(p->cost.max_composite_logical_bytes, 1024);
	/* The rest of the schema table. */
	ck_assert_uint_eq(p->clusters, 1);
	ck_assert_uint_eq(p->pes_per_cluster, 1);
	ck_assert_uint_eq(p->link.engine_latency_cycles, 1);
	ck_assert_uint_eq(p->link.intra_cluster_latency_cycles, 200);
	ck_assert_uint_eq(p->link.inter_cluster_latency_cycles, 800);
	ck_assert(p->link.intra_cluster_bytes_per_cycle == 64.0);
	ck_assert(p->link.inter_cluster_bytes_per_cycle == 16.0);
	ck_assert_uint_eq(p->mem.hbm_bytes, 17179869184ull);
	ck_assert_uint_eq(p->mem.tcm_bytes, 4194304);
	ck_assert_uint_eq(p->dma.setup_cycles, 64);
	ck_assert(p->dma.bytes_per_cycle == 64.0);
	ck_assert_uint_eq(p->tcm.latency_cycles, 2);
	ck_assert(p->tcm.bytes_per_cycle == 256.0);
	ck_assert_uint_eq(p->gemm.macs_per_cycle, 1024);
	ck_assert_uint_eq(p->gemm.fill_cycles, 16);
	ck_assert_uint_eq(p->gemm.tile_m, 64);
	ck_assert_uint_eq(p->gemm.tile_n, 128);
	ck_assert_uint_eq(p->gemm.tile_k, 64);
	ck_assert_uint_eq(p->math.vector_width, 64);
	ck_assert_uint_eq(p->sched.max_inflight_tiles, 4);
	ck_assert_uint_eq(p->ipcq.setup_cycles, 32);
	/* The public getter reads the same values. */
	ck_assert(get(t, "pe_cost_model.r_cycles_per_byte") == 0.0625);
	ck_assert(get(t, "memory.hbm_bytes") == 17179869184.0);
	kb_topology_destroy(t);
}
END_TEST

START_TEST(test_default_equals_minimal_load)
{
	kb_topology *d = NULL, *t = load_ok("{" SCHEMA "}");
	kb_error err;

	ck_assert_int_eq(kb_topology_default(&d, &err), 0);
	assert_same_params(kb__topology_params(d), kb__topology_params(t));
	kb_topology_destroy(d);
	kb_topology_destroy(t);
}
END_TEST

/* The embedded default is read without jansson (topology.c's mini
 * reader, issue 13): it must equal jansson's parse of the same file, read
 * through the file loader's walk (which sets every key the file names,
 * and the file names them all). */
START_TEST(test_default_equals_jansson_parse)
{
	kb_topology *d = NULL, *f = NULL;
	kb_error err;
	char *dd, *fd;

	ck_assert_int_eq(kb_topology_default(&d, &err), 0);
	ck_assert_msg(kb_topology_load_file(&f, KB_SRCDIR "/src/model/default_topology.json", &err) == 0,
		      "%s", err.message);
	assert_same_params(kb__topology_params(d), kb__topology_params(f));
	dd = kb_topology_dump(d);
	fd = kb_topology_dump(f);
	ck_assert_str_eq(dd, fd);
	kb_free(dd);
	kb_free(fd);
	kb_topology_destroy(d);
	kb_topology_destroy(f);
}
END_TEST

START_TEST(test_partial_overlay)
{
	kb_topology *t = load_ok("{" SCHEMA ", \"pe\": {\"gemm\": {\"tile_m\": 32}},"
				 " \"pe_cost_model\": {\"fixed_cycles\": 10},"
				 " \"clock_freq_ghz\": 1.5}");
	const kb_topo_params *p = kb__topology_params(t);

	ck_assert_uint_eq(p->gemm.tile_m, 32);
	ck_assert_uint_eq(p->gemm.tile_n, 128);       /* sibling kept */
	ck_assert(p->cost.fixed_cycles == 10.0);     /* integer accepted for a real */
	ck_assert(p->cost.r_cycles_per_byte == 0.0625);
	ck_assert(p->clock_freq_ghz == 1.5);
	ck_assert_uint_eq(p->dma.setup_cycles, 64);
	kb_topology_destroy(t);
}
END_TEST

START_TEST(test_load_file_ok)
{
	char *path = temp_file("{" SCHEMA ", \"clusters\": 4, \"pes_per_cluster\": 8}\n");
	kb_topology *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_topology_load_file(&t, path, &err), 0);
	ck_assert_uint_eq(kb__topology_params(t)->clusters, 4);
	ck_assert_uint_eq(kb__topology_params(t)->pes_per_cluster, 8);
	kb_topology_destroy(t);
	unlink(path);
	free(path);
}
END_TEST

/* ---- load errors ----------------------------------------------------- */

START_TEST(test_parse_error_string)
{
	kb_error err = load_err("{\n  " SCHEMA ",\n  \"clusters\": ,\n}", KB_EPARSE, "<string>:3:");

	ck_assert_str_eq(err.source, "<string>");
	ck_assert_int_eq(err.line, 3);
	ck_assert_int_eq(err.column, 15);
	ck_assert_msg(strncmp(err.message, "<string>:3:15: ", 15) == 0, "%s", err.message);
}
END_TEST

START_TEST(test_parse_error_file)
{
	char *path = temp_file("{\n  " SCHEMA ",\n  \"links\": {\n    \"x\" 1\n  }\n}\n");
	char prefix[300];
	kb_topology *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_topology_load_file(&t, path, &err), KB_EPARSE);
	ck_assert_ptr_null(t);
	ck_assert_str_eq(err.source, path);
	ck_assert_int_eq(err.line, 4);
	ck_assert_int_eq(err.column, 9);
	snprintf(prefix, sizeof(prefix), "%s:4:9: ", path);
	ck_assert_msg(strncmp(err.message, prefix, strlen(prefix)) == 0, "%s", err.message);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_parse_error_duplicate_and_not_object)
{
	load_err("{" SCHEMA ", \"clusters\": 1, \"clusters\": 2}", KB_EPARSE, "duplicate");
	load_err("[1, 2]", KB_ETYPE, "object");
	load_err("", KB_EPARSE, "<string>:");
}
END_TEST

START_TEST(test_unknown_key_top)
{
	load_err("{" SCHEMA ", \"clusterz\": 2}", KB_EKEY, "'clusterz'");
	load_err("{" SCHEMA ", \"clusterz\": 2}", KB_EKEY, "did you mean 'clusters'");
	load_err("{" SCHEMA ", \"pe.dma.setup_cycles\": 2}", KB_EKEY, "pe.dma.setup_cycles");
}
END_TEST

START_TEST(test_unknown_key_nested)
{
	load_err("{" SCHEMA ", \"pe\": {\"dma\": {\"bandwith\": 3}}}", KB_EKEY,
		 "unknown key 'pe.dma.bandwith'");
	load_err("{" SCHEMA ", \"pe\": {\"dma\": {\"bandwith\": 3}}}", KB_EKEY, "bytes_per_cycle");
	load_err("{" SCHEMA ", \"pe\": {\"dmx\": {\"setup_cycles\": 3}}}", KB_EKEY,
		 "did you mean 'pe.dma'");
}
END_TEST

START_TEST(test_wrong_type)
{
	load_err("{" SCHEMA ", \"clusters\": \"4\"}", KB_ETYPE, "clusters: expected integer");
	load_err("{" SCHEMA ", \"pe\": {\"gemm\": {\"tile_m\": 1.5}}}", KB_ETYPE,
		 "pe.gemm.tile_m: expected integer, got real 1.5");
	load_err("{" SCHEMA ", \"clock_freq_ghz\": {\"a\": 1}}", KB_ETYPE,
		 "clock_freq_ghz: expected real, got object");
	load_err("{" SCHEMA ", \"clock_freq_ghz\": true}", KB_ETYPE, "clock_freq_ghz");
	load_err("{" SCHEMA ", \"memory\": 3}", KB_ETYPE, "memory: expected object");
	load_err("{\"schema\": 1}", KB_ETYPE, "schema: expected string");
}
END_TEST

START_TEST(test_out_of_range)
{
	static const struct {
		const char *json, *needle;
	} cases[] = {
		{ "\"pe_cost_model\": {\"r_cycles_per_byte\": -1}",
		  "pe_cost_model.r_cycles_per_byte = -1.0: must be >= 0" },
		{ "\"clock_freq_ghz\": 0", "clock_freq_ghz = 0" },
		{ "\"clock_freq_ghz\": 101", "clock_freq_ghz = 101" },
		{ "\"clusters\": 0", "clusters = 0" },
		{ "\"clusters\": 1025", "clusters = 1025" },
		{ "\"pe\": {\"gemm\": {\"tile_k\": 65537}}", "pe.gemm.tile_k = 65537" },
		{ "\"pe\": {\"gemm\": {\"tile_n\": 0}}", "pe.gemm.tile_n = 0" },
		{ "\"pe\": {\"dma\": {\"bytes_per_cycle\": 0}}", "pe.dma.bytes_per_cycle = 0" },
		{ "\"pe\": {\"dma\": {\"setup_cycles\": -1}}", "pe.dma.setup_cycles = -1" },
		{ "\"memory\": {\"hbm_bytes\": 281474976710657}", "memory.hbm_bytes" },
		{ "\"memory\": {\"tcm_bytes\": 1024}", "memory.tcm_bytes = 1024" },
		{ "\"links\": {\"engine_latency_cycles\": 0}", "links.engine_latency_cycles" },
		{ "\"pe_cost_model\": {\"max_composite_logical_bytes\": 63}",
		  "smaller than any command" },
	};
	char json[256];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(json, sizeof(json), "{" SCHEMA ", %s}", cases[i].json);
		load_err(json, KB_ERANGE, cases[i].needle);
	}
}
END_TEST

START_TEST(test_schema_missing_or_wrong)
{
	load_err("{\"clusters\": 2}", KB_EKEY, "missing required key 'schema'");
	load_err("{}", KB_EKEY, "missing required key 'schema'");
	load_err("{\"schema\": \"kernbench-topology/2\"}", KB_EINVAL, "kernbench-topology/2");
}
END_TEST

START_TEST(test_unreadable_file)
{
	const char *path = "/nonexistent-kb-dir/topology.json";
	kb_topology *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_topology_load_file(&t, path, &err), KB_EIO);
	ck_assert_ptr_null(t);
	ck_assert_ptr_nonnull(strstr(err.message, path));
	ck_assert_ptr_nonnull(strstr(err.message, "No such file"));
}
END_TEST

START_TEST(test_file_semantic_error_names_file)
{
	char *path = temp_file("{" SCHEMA ", \"pe\": {\"tcm\": {\"latency\": 1}}}");
	kb_topology *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_topology_load_file(&t, path, &err), KB_EKEY);
	ck_assert_ptr_nonnull(strstr(err.message, path));
	ck_assert_ptr_nonnull(strstr(err.message, "'pe.tcm.latency'"));
	/* A key error carries the key in source; the message names the file. */
	ck_assert_str_eq(err.source, "pe.tcm.latency");
	unlink(path);
	free(path);
}
END_TEST

/* Key errors from a file or text carry the key in source (the innermost
 * key, a rule between keys its first key); others the path or "<string>". */
START_TEST(test_load_error_source_is_key)
{
	static const struct {
		const char *json, *source;
		int code;
	} cases[] = {
		{ "{" SCHEMA ", \"clusters\": \"two\"}", "clusters", KB_ETYPE },
		{ "{" SCHEMA ", \"clusters\": 0}", "clusters", KB_ERANGE },
		{ "{" SCHEMA ", \"pe\": {\"dma\": {\"setup_cyclez\": 1}}}", "pe.dma.setup_cyclez", KB_EKEY },
		{ "{" SCHEMA ", \"pe\": 3}", "pe", KB_ETYPE },
		{ "{\"clusters\": 2}", "schema", KB_EKEY },
		{ "{" SCHEMA ", \"memory\": {\"tcm_bytes\": 65536}, \"pe\": {\"gemm\": {\"tile_m\": 4096}}}",
		  "memory.tcm_bytes", KB_ERANGE },
		{ "[1]", "<string>", KB_ETYPE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = temp_file(cases[i].json);
		kb_topology *t = NULL;
		kb_error err;

		ck_assert_int_eq(kb_topology_load_string(&t, cases[i].json, &err), cases[i].code);
		ck_assert_msg(strcmp(err.source, cases[i].source) == 0, "%s: source '%s'", cases[i].json,
			      err.source);
		ck_assert_int_eq(kb_topology_load_file(&t, path, &err), cases[i].code);
		ck_assert_ptr_null(t);
		ck_assert_msg(strcmp(err.source, strcmp(cases[i].source, "<string>") ? cases[i].source : path) == 0,
			      "%s: source '%s'", cases[i].json, err.source);
		ck_assert_msg(strstr(err.message, path), "%s", err.message);
		unlink(path);
		free(path);
	}
}
END_TEST

START_TEST(test_cross_key)
{
	kb_topology *t;

	/* 3 * 64*64 * 4 bytes * 4 tiles = 196608 > 65536. */
	load_err("{" SCHEMA ", \"memory\": {\"tcm_bytes\": 65536}}", KB_ERANGE,
		 "memory.tcm_bytes");
	load_err("{" SCHEMA ", \"memory\": {\"tcm_bytes\": 65536}}", KB_ERANGE,
		 "pe.sched.max_inflight_tiles");
	/* The same TCM fits when the tiles shrink in the same file. */
	t = load_ok("{" SCHEMA ", \"memory\": {\"tcm_bytes\": 65536},"
		    " \"pe\": {\"gemm\": {\"tile_m\": 32, \"tile_n\": 32, \"tile_k\": 32}}}");
	kb_topology_destroy(t);
	load_err("{" SCHEMA ", \"clusters\": 1024, \"pes_per_cluster\": 8}", KB_ERANGE,
		 "pes_per_cluster");

	t = load_ok("{" SCHEMA "}");
	set_err(t, "pe.gemm.tile_m", "4096", KB_ERANGE);
	set_err(t, "memory.tcm_bytes", "65536", KB_ERANGE);
	set_err(t, "pe.sched.max_inflight_tiles", "1024", KB_ERANGE);
	set_ok(t, "clusters", "64");
	set_err(t, "pes_per_cluster", "65", KB_ERANGE);
	set_ok(t, "pes_per_cluster", "64");
	kb_topology_destroy(t);
}
END_TEST

/* ---- set ------------------------------------------------------------- */

START_TEST(test_set_values)
{
	kb_topology *t = load_ok("{" SCHEMA "}");
	kb_error err;

	set_ok(t, "clusters", "4");
	ck_assert(get(t, "clusters") == 4);
	set_ok(t, "pe_cost_model.r_cycles_per_byte", "0.125");
	ck_assert(get(t, "pe_cost_model.r_cycles_per_byte") == 0.125);
	set_ok(t, "pe_cost_model.r_cycles_per_byte", "1e-3");
	ck_assert(get(t, "pe_cost_model.r_cycles_per_byte") == 1e-3);
	set_ok(t, "pe_cost_model.fixed_cycles", "7");
	ck_assert(get(t, "pe_cost_model.fixed_cycles") == 7);
	set_ok(t, "memory.hbm_bytes", "281474976710656");
	ck_assert(get(t, "memory.hbm_bytes") == 281474976710656.0);
	ck_assert_int_eq(kb_topology_set_assignment(t, "pe.dma.setup_cycles=99", &err), 0);
	ck_assert(get(t, "pe.dma.setup_cycles") == 99);
	ck_assert_int_eq(kb_topology_set_assignment(t, " clock_freq_ghz = 2.5 ", &err), 0);
	ck_assert(get(t, "clock_freq_ghz") == 2.5);
	ck_assert_uint_eq(kb__topology_params(t)->dma.setup_cycles, 99);
	kb_topology_destroy(t);
}
END_TEST

START_TEST(test_set_rejections)
{
	kb_topology *t = load_ok("{" SCHEMA "}");
	kb_error err;

	set_err(t, "pe_cost_model.r_cycles_per_byte", "abc", KB_EPARSE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "1.5x", KB_EPARSE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "", KB_EPARSE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "1 2", KB_EPARSE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "nan", KB_EPARSE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "1e400", KB_ERANGE);
	set_err(t, "pe_cost_model.r_cycles_per_byte", "-0.5", KB_ERANGE);
	set_err(t, "clock_freq_ghz", "0", KB_ERANGE);
	set_err(t, "clusters", "1.5", KB_ETYPE);
	set_err(t, "clusters", "abc", KB_EPARSE);
	set_err(t, "clusters", "99999999999999999999", KB_ERANGE);
	set_err(t, "pe.gemm.tile_m", "-1", KB_ERANGE);
	set_err(t, "pe.dma.bandwith", "1", KB_EKEY);
	set_err(t, "nosuch", "1", KB_EKEY);
	set_err(t, "pe.dma", "1", KB_ETYPE);
	set_err(t, "schema", "1", KB_EINVAL);
	ck_assert_int_eq(kb_topology_set_assignment(t, "clusters", &err), KB_EPARSE);
	ck_assert_int_eq(kb_topology_set_assignment(t, "=3", &err), KB_EPARSE);
	ck_assert_int_eq(kb_topology_set_assignment(t, "pe.x.y=3", &err), KB_EKEY);
	ck_assert_ptr_nonnull(strstr(err.message, "pe.x.y"));
	ck_assert(get(t, "clusters") == 1);
	kb_topology_destroy(t);
}
END_TEST

START_TEST(test_get_errors)
{
	kb_topology *t = load_ok("{" SCHEMA "}");
	kb_error err;
	double v;

	ck_assert_int_eq(kb_topology_get_number(t, "nosuch", &v, &err), KB_EKEY);
	ck_assert_int_eq(kb_topology_get_number(t, "schema", &v, &err), KB_ETYPE);
	ck_assert_int_eq(kb_topology_get_number(t, "pe.gemm", &v, &err), KB_ETYPE);
	ck_assert_int_eq(kb_topology_get_number(NULL, "clusters", &v, &err), KB_EINVAL);
	kb_topology_destroy(t);
}
END_TEST

/* ---- dump, clone ----------------------------------------------------- */

START_TEST(test_dump_round_trip)
{
	static const char head[] =
		"{\n  \"schema\": \"kernbench-topology/1\",\n  \"clock_freq_ghz\": 1.0,\n";
	kb_topology *t = load_ok("{" SCHEMA "}");
	char *d = kb_topology_dump(t);

	ck_assert_ptr_nonnull(d);
	/* Schema order and integer/real forms. */
	ck_assert_msg(strncmp(d, head, strlen(head)) == 0, "%s", d);
	ck_assert_ptr_nonnull(strstr(d, "\"hbm_bytes\": 17179869184,"));
	ck_assert_ptr_nonnull(strstr(d, "\"r_cycles_per_byte\": 0.0625,"));
	kb_free(d);
	assert_round_trip(t);
	/* Reals that need many digits. */
	set_ok(t, "pe_cost_model.r_cycles_per_byte", "0.1");
	set_ok(t, "clock_freq_ghz", "0.333333333333333314829616256247");
	set_ok(t, "pe.dma.bytes_per_cycle", "0.0012345678901234567");
	set_ok(t, "links.inter_cluster_bytes_per_cycle", "123456789.125");
	assert_round_trip(t);
	kb_topology_destroy(t);
}
END_TEST

START_TEST(test_set_dump_load_same_params)
{
	kb_topology *t = load_ok("{" SCHEMA "}"), *u;
	char *d;

	set_ok(t, "clusters", "8");
	set_ok(t, "pes_per_cluster", "16");
	set_ok(t, "pe.gemm.tile_k", "128");
	set_ok(t, "pe_cost_model.fixed_cycles", "40.5");
	set_ok(t, "links.intra_cluster_bytes_per_cycle", "3.75");
	d = kb_topology_dump(t);
	u = load_ok(d);
	assert_same_params(kb__topology_params(t), kb__topology_params(u));
	ck_assert_uint_eq(kb__topology_params(u)->pes_per_cluster, 16);
	ck_assert(kb__topology_params(u)->cost.fixed_cycles == 40.5);
	kb_free(d);
	kb_topology_destroy(t);
	kb_topology_destroy(u);
}
END_TEST

/* The hash follows the effective values, not how they were written. */
START_TEST(test_sha256)
{
	kb_topology *t = load_ok("{" SCHEMA "}"), *u = NULL;
	char a[65], b[65], c[65];
	kb_error err;

	ck_assert_int_eq(kb_topology_sha256(t, a, &err), 0);
	ck_assert_uint_eq(strlen(a), 64);
	ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 64);
	set_ok(t, "pe.gemm.tile_m", "32");
	ck_assert_int_eq(kb_topology_sha256(t, b, &err), 0);
	ck_assert_str_ne(a, b);
	u = load_ok("{" SCHEMA ", \"pe\": {\"gemm\": {\"tile_m\": 32}}}");
	ck_assert_int_eq(kb_topology_sha256(u, c, &err), 0);
	ck_assert_str_eq(b, c);
	ck_assert_int_eq(kb_topology_sha256(NULL, c, &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_sha256(t, NULL, &err), KB_EINVAL);
	kb_topology_destroy(t);
	kb_topology_destroy(u);
}
END_TEST

START_TEST(test_clone_independence)
{
	kb_topology *t = load_ok("{" SCHEMA "}"), *c = NULL, *untouched = t;
	kb_error err;

	ck_assert_int_eq(kb_topology_clone(&c, t, &err), KB_OK);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_ne(c, t);
	set_ok(c, "pe.gemm.tile_m", "32");
	ck_assert(get(t, "pe.gemm.tile_m") == 64);
	ck_assert(get(c, "pe.gemm.tile_m") == 32);
	set_ok(t, "clusters", "2");
	ck_assert(get(c, "clusters") == 1);
	kb_topology_destroy(t);
	ck_assert(get(c, "pe.gemm.tile_m") == 32);
	kb_topology_destroy(c);
	ck_assert_int_eq(kb_topology_clone(&untouched, NULL, &err), KB_EINVAL);
	ck_assert_int_eq(err.code, KB_EINVAL);
	ck_assert_ptr_eq(untouched, t);
	ck_assert_int_eq(kb_topology_clone(NULL, t, NULL), KB_EINVAL);
	kb_topology_destroy(NULL);
	kb_free(NULL);
}
END_TEST

Suite *topology_suite(void)
{
	Suite *s = suite_create("topology");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_default_values);
	tcase_add_test(tc, test_default_equals_minimal_load);
	tcase_add_test(tc, test_default_equals_jansson_parse);
	tcase_add_test(tc, test_partial_overlay);
	tcase_add_test(tc, test_load_file_ok);
	tcase_add_test(tc, test_parse_error_string);
	tcase_add_test(tc, test_parse_error_file);
	tcase_add_test(tc, test_parse_error_duplicate_and_not_object);
	tcase_add_test(tc, test_unknown_key_top);
	tcase_add_test(tc, test_unknown_key_nested);
	tcase_add_test(tc, test_wrong_type);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_schema_missing_or_wrong);
	tcase_add_test(tc, test_unreadable_file);
	tcase_add_test(tc, test_file_semantic_error_names_file);
	tcase_add_test(tc, test_load_error_source_is_key);
	tcase_add_test(tc, test_cross_key);
	tcase_add_test(tc, test_set_values);
	tcase_add_test(tc, test_set_rejections);
	tcase_add_test(tc, test_get_errors);
	tcase_add_test(tc, test_dump_round_trip);
	tcase_add_test(tc, test_set_dump_load_same_params);
	tcase_add_test(tc, test_clone_independence);
	tcase_add_test(tc, test_sha256);
	suite_add_tcase(s, tc);
	return s;
}
