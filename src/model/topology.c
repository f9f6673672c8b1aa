/*
 * Topology: load, override, validate and dump the device description.
 *
 * One schema table (keys[] below) drives everything: which keys exist, their
 * JSON type, where they live in kb_topo_params, their valid range, and the
 * order of the dump. The defaults live only in default_topology.json, which
 * the build embeds as a byte array; every load starts by parsing it, so there
 * is no global mutable state and no cache to lock.
 */
#include "model/topology.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "base/sha256.h"
#include "base/suggest.h"

struct kb_topology {
	kb_topo_params p;
};

/* Generated from src/model/default_topology.json by src/model/local.am. */
static const unsigned char default_json[] = {
#include "src/model/default_topology.inc"
};

/* K_ENUM: a string from `choices`, stored as its index (uint32_t). */
enum kind { K_STRING, K_REAL, K_U32, K_U64, K_ENUM };

/* The lower bound is exclusive (value must be > min). */
#define F_MIN_EXCL 1u

typedef struct key_def {
	const char *key;  /* dotted path */
	enum kind kind;
	size_t off;       /* offset of the field in kb_topo_params */
	double min, max;  /* inclusive unless F_MIN_EXCL; exact for all our ints */
	unsigned flags;
	const char *why;  /* reason appended to range errors, or NULL */
	const char *const *choices;  /* K_ENUM: the values, NULL-terminated */
} key_def;

#define OFF(f) offsetof(kb_topo_params, f)
#define REAL(k, f, lo, hi, fl) { k, K_REAL, OFF(f), lo, hi, fl, NULL, NULL }
#define U32(k, f, lo, hi) { k, K_U32, OFF(f), lo, hi, 0, NULL, NULL }
#define U64(k, f, lo, hi) { k, K_U64, OFF(f), lo, hi, 0, NULL, NULL }
#define ENUM(k, f, ch) { k, K_ENUM, OFF(f), 0, 0, 0, NULL, ch }

/* pe.scheduler.policy, in kb_sched_policy order. */
static const char *const sched_policies[] = { "strict_fifo", "rw_aware", NULL };

/* Upper bound of bandwidths: finite and far above any device, so that
 * bytes / bandwidth never overflows a cycle count. */
#define BW_MAX 1e12
/* Lower bounds of the clock and of bandwidths: below them one cycle or one
 * byte costs so many picoseconds that a plain run passes 2^63 ps, the end
 * of simulated time (issue 18). Runs that still get there stop with
 * KB_ERANGE naming the keys (pe/machine.c). */
#define SLOW_WHY "slower would let one stage pass 2^63 ps of simulated time"
#define RATE(k, f, hi) { k, K_REAL, OFF(f), 1e-3, hi, 0, SLOW_WHY, NULL }
#define TWO_POW(n) ((double)(1ull << (n)))

/*
 * The schema, in dump order. Keys sharing a parent object must be adjacent,
 * since the dump opens each object once (a unit test reloads the dump with
 * duplicate keys rejected, which catches a violation).
 */
static const key_def keys[] = {
	{ "schema", K_STRING, 0, 0, 0, 0, NULL, NULL },
	RATE("clock_freq_ghz", clock_freq_ghz, 100),
	U32("clusters", clusters, 1, 1024),
	U32("pes_per_cluster", pes_per_cluster, 1, 1024),
	REAL("pe_cost_model.fixed_cycles", cost.fixed_cycles, 0, 1e9, 0),
	REAL("pe_cost_model.r_cycles_per_byte", cost.r_cycles_per_byte, 0, 1e6, 0),
	{ "pe_cost_model.max_composite_logical_bytes", K_U64,
	  OFF(cost.max_composite_logical_bytes), 64, 1048576, 0,
	  "a smaller cap is smaller than any command", NULL },
	U64("links.engine_latency_cycles", link.engine_latency_cycles, 1, 1e6),
	U64("links.intra_cluster_latency_cycles", link.intra_cluster_latency_cycles, 1, 1e9),
	U64("links.inter_cluster_latency_cycles", link.inter_cluster_latency_cycles, 1, 1e9),
	RATE("links.intra_cluster_bytes_per_cycle", link.intra_cluster_bytes_per_cycle, BW_MAX),
	RATE("links.inter_cluster_bytes_per_cycle", link.inter_cluster_bytes_per_cycle, BW_MAX),
	U64("memory.hbm_bytes", mem.hbm_bytes, TWO_POW(20), TWO_POW(48)),
	U64("memory.tcm_bytes", mem.tcm_bytes, TWO_POW(16), TWO_POW(32)),
	U64("pe.dma.setup_cycles", dma.setup_cycles, 0, 1e9),
	RATE("pe.dma.bytes_per_cycle", dma.bytes_per_cycle, BW_MAX),
	U64("pe.tcm.latency_cycles", tcm.latency_cycles, 0, 1e9),
	RATE("pe.tcm.bytes_per_cycle", tcm.bytes_per_cycle, BW_MAX),
	U64("pe.gemm.macs_per_cycle", gemm.macs_per_cycle, 1, TWO_POW(30)),
	U64("pe.gemm.fill_cycles", gemm.fill_cycles, 0, 1e9),
	U64("pe.gemm.tile_m", gemm.tile_m, 1, 65536),
	U64("pe.gemm.tile_n", gemm.tile_n, 1, 65536),
	U64("pe.gemm.tile_k", gemm.tile_k, 1, 65536),
	U64("pe.math.vector_width", math.vector_width, 1, TWO_POW(20)),
	U64("pe.sched.max_inflight_tiles", sched.max_inflight_tiles, 1, 1024),
	ENUM("pe.scheduler.policy", scheduler.policy, sched_policies),
	U64("pe.ipcq.setup_cycles", ipcq.setup_cycles, 0, 1e9),
};

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))
#define MAX_KEY_LEN 128    /* longer than any schema key */
#define MAX_FILE_BYTES (64u << 20)
#define MAX_PES 4096u

/* ---- values ---------------------------------------------------------- */

static void put_real(kb_topo_params *p, const key_def *d, double v)
{
	v += 0.0; /* turns -0.0 into +0.0, so the dump never shows "-0.0" */
	memcpy((char *)p + d->off, &v, sizeof(v));
}

static void put_int(kb_topo_params *p, const key_def *d, uint64_t v)
{
	uint32_t v32 = (uint32_t)v;

	if (d->kind == K_U32 || d->kind == K_ENUM)
		memcpy((char *)p + d->off, &v32, sizeof(v32));
	else
		memcpy((char *)p + d->off, &v, sizeof(v));
}

static double get_num(const kb_topo_params *p, const key_def *d)
{
	const char *f = (const char *)p + d->off;
	uint32_t v32;
	uint64_t v64;
	double r;

	switch (d->kind) {
	case K_REAL:
		memcpy(&r, f, sizeof(r));
		return r;
	case K_U32:
	case K_ENUM:
		memcpy(&v32, f, sizeof(v32));
		return v32;
	case K_U64:
		memcpy(&v64, f, sizeof(v64));
		return (double)v64;
	default:
		return 0;
	}
}

static size_t u64_text(char *buf, uint64_t v);

/* Shortest text that reads back as exactly v; always looks like a real. */
static void fmt_real(char *buf, size_t n, double v)
{
	int prec;

	if (v == floor(v) && fabs(v) < 1e15) {
		/* "%.1f" of a whole number, written (issue 13). */
		if (n >= 24) {
			size_t k = 0;

			if (signbit(v))
				buf[k++] = '-';
			k += u64_text(buf + k, (uint64_t)fabs(v));
			memcpy(buf + k, ".0", 3);
		} else {
			snprintf(buf, n, "%.1f", v);
		}
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".eEni"))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

/* A bound as text: integral bounds without a fraction. */
static void fmt_bound(char *buf, size_t n, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, n, "%.0f", v);
	else
		fmt_real(buf, n, v);
}

/* ---- keys ------------------------------------------------------------ */

static const key_def *find_key(const char *dotted)
{
	size_t i;

	for (i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].key, dotted) == 0)
			return &keys[i];
	return NULL;
}

/* True when some schema key lies below the object at path ("" = root). */
static bool is_group(const char *path, size_t len)
{
	size_t i;

	if (len == 0)
		return true;
	for (i = 0; i < N_KEYS; i++)
		if (strncmp(keys[i].key, path, len) == 0 && keys[i].key[len] == '.')
			return true;
	return false;
}

/*
 * Appends to hint either "did you mean 'parent.best'?" (when one child of
 * the object at parent is close to name) or the list of its children.
 */
static void child_hint(char *hint, size_t n, const char *parent, size_t plen, const char *name,
		       size_t nlen)
{
	const char *best, *prev = NULL, *c;
	size_t i, clen, prevlen = 0, bestlen = 0, used;
	bool first = true;
	kb__suggest sg;

	kb__suggest_init(&sg, name, nlen);
	used = (size_t)snprintf(hint, n, " (keys here:");
	for (i = 0; i < N_KEYS; i++) {
		if (plen && (strncmp(keys[i].key, parent, plen) != 0 || keys[i].key[plen] != '.'))
			continue;
		c = keys[i].key + (plen ? plen + 1 : 0);
		clen = strcspn(c, ".");
		/* Siblings are adjacent in keys[], so one look back removes repeats. */
		if (prev && clen == prevlen && strncmp(c, prev, clen) == 0)
			continue;
		prev = c;
		prevlen = clen;
		kb__suggest_offer(&sg, c, clen);
		if (used < n)
			used += (size_t)snprintf(hint + used, n - used, "%s %.*s",
						 first ? "" : ",", (int)clen, c);
		first = false;
	}
	best = kb__suggest_best(&sg, &bestlen);
	if (best)
		snprintf(hint, n, " (did you mean '%.*s%s%.*s'?)", (int)plen, parent,
			 plen ? "." : "", (int)bestlen, best);
	else if (used < n)
		snprintf(hint + used, n - used, ")");
}

/* KB_EKEY for dotted, with a hint about the first segment that is unknown. */
static int unknown_key(kb_error *err, const char *dotted)
{
	char hint[400];
	size_t plen = 0, end;

	/* Walk down the known objects; stop at the first unknown segment. */
	for (;;) {
		end = plen + (plen ? 1 : 0);
		end += strcspn(dotted + end, ".");
		if (end == 0 || dotted[end] != '.' || !is_group(dotted, end))
			break;
		plen = end;
	}
	hint[0] = '\0';
	if (is_group(dotted, plen)) {
		size_t start = plen ? plen + 1 : 0;

		child_hint(hint, sizeof(hint), dotted, plen, dotted + start, end - start);
	}
	return kb__err(err, KB_EKEY, "unknown key '%s'%s", dotted, hint);
}

/* ---- validation ------------------------------------------------------ */

static int range_err(kb_error *err, const key_def *d, const char *valtext, bool finite)
{
	char lo[32], hi[32];

	fmt_bound(lo, sizeof(lo), d->min);
	fmt_bound(hi, sizeof(hi), d->max);
	return kb__err(err, KB_ERANGE, "%s = %s: must be %s%s %s and <= %s%s%s%s", d->key, valtext,
		       finite ? "" : "a finite number ", (d->flags & F_MIN_EXCL) ? ">" : ">=", lo,
		       hi, d->why ? " (" : "", d->why ? d->why : "", d->why ? ")" : "");
}

static bool in_range(const key_def *d, double v)
{
	if (v > d->max)
		return false;
	return (d->flags & F_MIN_EXCL) ? v > d->min : v >= d->min;
}

static int check_real(kb_topo_params *p, const key_def *d, double v, const char *text,
		      kb_error *err)
{
	char buf[40];

	if (isfinite(v) && in_range(d, v)) {
		put_real(p, d, v);
		return 0;
	}
	/* The value as text only for the message (a load of the default
	 * topology formatted every real for nothing: issue 13). */
	if (!text) {
		fmt_real(buf, sizeof(buf), v);
		text = buf;
	}
	return range_err(err, d, text, isfinite(v));
}

static int check_int(kb_topo_params *p, const key_def *d, long long v, kb_error *err)
{
	char buf[32];

	/* Every bound is below 2^53, so the double comparison is exact enough:
	 * a value beyond 2^53 cannot round down into range. */
	if (!in_range(d, (double)v)) {
		snprintf(buf, sizeof(buf), "%lld", v);
		return range_err(err, d, buf, true);
	}
	put_int(p, d, (uint64_t)v);
	return 0;
}

/* Rules between keys; messages name every key involved. */
static int cross_check(const kb_topo_params *p, kb_error *err)
{
	uint64_t pes = (uint64_t)p->clusters * p->pes_per_cluster;
	uint64_t m = p->gemm.tile_m, n = p->gemm.tile_n, k = p->gemm.tile_k, need;

	if (pes > MAX_PES)
		return kb__err_at(err, KB_ERANGE, "clusters", 0, 0,
			       "clusters * pes_per_cluster = %u * %u = %llu: must be <= %u",
			       p->clusters, p->pes_per_cluster, (unsigned long long)pes, MAX_PES);
	/* Tiles <= 65536 and inflight <= 1024 keep this below 2^47. */
	need = (m * k + k * n + m * n) * 4 * p->sched.max_inflight_tiles;
	if (need > p->mem.tcm_bytes)
		return kb__err_at(err, KB_ERANGE, "memory.tcm_bytes", 0, 0,
			       "memory.tcm_bytes = %llu cannot hold one GEMM tile set: "
			       "(pe.gemm.tile_m*pe.gemm.tile_k + pe.gemm.tile_k*pe.gemm.tile_n + "
			       "pe.gemm.tile_m*pe.gemm.tile_n) * 4 * pe.sched.max_inflight_tiles "
			       "= (%llu*%llu + %llu*%llu + %llu*%llu) * 4 * %llu = %llu bytes",
			       (unsigned long long)p->mem.tcm_bytes, (unsigned long long)m,
			       (unsigned long long)k, (unsigned long long)k, (unsigned long long)n,
			       (unsigned long long)m, (unsigned long long)n,
			       (unsigned long long)p->sched.max_inflight_tiles,
			       (unsigned long long)need);
	return 0;
}

/* ---- JSON input ------------------------------------------------------ */

static int parse_value(kb_topo_params *p, const key_def *d, const char *text, kb_error *err);
static int set_enum(kb_topo_params *p, const key_def *d, const char *text, kb_error *err);

static void set_source(kb_error *err, const char *src)
{
	if (err)
		snprintf(err->source, sizeof(err->source), "%s", src);
}

typedef struct load_ctx {
	kb_topo_params p;
	bool seen[N_KEYS];
	size_t next;   /* the embedded default's reader: the key expected next */
	kb_error *err;
} load_ctx;

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "real";
	case JSON_TRUE: return "true";
	case JSON_FALSE: return "false";
	default: return "null";
	}
}

static int type_err(kb_error *err, const char *key, const char *expected, const json_t *v)
{
	char val[64] = "";

	if (json_is_string(v))
		snprintf(val, sizeof(val), " \"%.40s\"", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(val, sizeof(val), " %lld", (long long)json_integer_value(v));
	else if (json_is_real(v)) {
		val[0] = ' ';
		fmt_real(val + 1, sizeof(val) - 1, json_real_value(v));
	}
	return kb__err(err, KB_ETYPE, "%s: expected %s, got %s%s", key, expected,
		       json_type_name(v), val);
}

/* Sets a K_ENUM key from its text; the error lists the values. */
static int set_enum(kb_topo_params *p, const key_def *d, const char *text, kb_error *err)
{
	char list[128] = "";
	size_t used = 0;

	for (uint32_t i = 0; d->choices[i]; i++)
		if (strcmp(d->choices[i], text) == 0) {
			put_int(p, d, i);
			return 0;
		}
	for (uint32_t i = 0; d->choices[i] && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 d->choices[i]);
	return kb__err(err, KB_EINVAL, "%s: '%.60s' is not one of %s", d->key, text, list);
}

static int apply_json(load_ctx *c, const key_def *d, const json_t *v)
{
	c->seen[d - keys] = true;
	switch (d->kind) {
	case K_STRING:
		if (!json_is_string(v))
			return type_err(c->err, d->key, "string", v);
		if (strcmp(json_string_value(v), KB_TOPOLOGY_SCHEMA) != 0)
			return kb__err(c->err, KB_EINVAL,
				       "schema = \"%.100s\": unsupported, expected \"%s\"",
				       json_string_value(v), KB_TOPOLOGY_SCHEMA);
		return 0;
	case K_ENUM:
		if (!json_is_string(v))
			return type_err(c->err, d->key, "string", v);
		return set_enum(&c->p, d, json_string_value(v), c->err);
	case K_REAL:
		if (!json_is_number(v))
			return type_err(c->err, d->key, "real", v);
		return check_real(&c->p, d, json_number_value(v), NULL, c->err);
	default:
		if (!json_is_integer(v))
			return type_err(c->err, d->key, "integer", v);
		return check_int(&c->p, d, (long long)json_integer_value(v), c->err);
	}
}

/* "prefix.name" (or name at the root) into path[n], as snprintf would
 * write it, returning its length; copied, not formatted, when it fits
 * (every key of every load goes through here). */
static int join_path(char *path, size_t n, const char *prefix, const char *name)
{
	size_t pl = strlen(prefix), nl = strlen(name), len = pl + (pl ? 1 : 0) + nl;

	if (len >= n)
		return snprintf(path, n, "%s%s%s", prefix, pl ? "." : "", name);
	memcpy(path, prefix, pl);
	if (pl)
		path[pl++] = '.';
	memcpy(path + pl, name, nl + 1);
	return (int)len;
}

/* Overlays every member of obj (the object at prefix) onto c->p. */
static int walk(load_ctx *c, json_t *obj, const char *prefix)
{
	char path[MAX_KEY_LEN + 2];
	const char *name;
	const key_def *d;
	json_t *v;
	int n, rc;

	json_object_foreach(obj, name, v) {
		n = join_path(path, sizeof(path), prefix, name);
		/* A dotted or empty member name would alias a nested key. */
		if (n < 0 || (size_t)n >= sizeof(path) || !*name || strchr(name, '.'))
			return kb__err_at(c->err, KB_EKEY, path, 0, 0, "unknown key '%s%s%.100s'", prefix,
				       *prefix ? "." : "", name);
		d = find_key(path);
		if (d)
			rc = apply_json(c, d, v);
		else if (!is_group(path, strlen(path)))
			rc = unknown_key(c->err, path);
		else if (!json_is_object(v))
			rc = type_err(c->err, path, "object", v);
		else
			rc = walk(c, v, path);
		if (rc) {
			/* A key error carries the key (the innermost one). */
			if (c->err && !c->err->source[0])
				set_source(c->err, path);
			return rc;
		}
	}
	return 0;
}

/* Parses buf; parse errors carry source, line and column. */
static int parse(json_t **out, const char *buf, size_t len, const char *src, kb_error *err)
{
	json_error_t je;

	*out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (*out && json_is_object(*out))
		return 0;
	if (*out) {
		json_decref(*out);
		*out = NULL;
		return kb__err_at(err, KB_ETYPE, src, 1, 1, "the topology must be a JSON object");
	}
#if JANSSON_VERSION_HEX >= 0x020b00 /* json_error_code appeared in 2.11 */
	if (json_error_code(&je) == json_error_out_of_memory)
		return kb__err(err, KB_ENOMEM, "out of memory parsing %s", src);
#endif
	return kb__err_at(err, KB_EPARSE, src, je.line, je.column, "%s:%d:%d: %s", src, je.line,
			  je.column, je.text);
}

/*
 * The embedded default, read without jansson (issue 13: its parse was a
 * sixth of a short run). It reads only what default_topology.json is made
 * of: objects, member names and strings without escapes, numbers (a
 * number is an integer when it has no '.', 'e' or 'E', as in jansson), with
 * the same key table, types, ranges and rules as a file's walk; anything
 * else fails, and the build's test compares this reading with jansson's
 * parse of the same file (check_topology.c).
 */
typedef struct mini {
	const char *s, *end;
} mini;

static void mini_space(mini *m)
{
	while (m->s < m->end && (*m->s == ' ' || *m->s == '\n' || *m->s == '\t' || *m->s == '\r'))
		m->s++;
}

/* The text of a string (no escapes) at m->s, its quotes consumed. */
static int mini_string(mini *m, const char **text, size_t *len, kb_error *err)
{
	const char *q;

	if (m->s >= m->end || *m->s != '"')
		return kb__err(err, KB_EPARSE, "byte %td: expected a string",
			       m->s - (const char *)default_json);
	q = ++m->s;
	while (m->s < m->end && *m->s != '"' && *m->s != '\\' && (unsigned char)*m->s >= 0x20)
		m->s++;
	if (m->s >= m->end || *m->s != '"')
		return kb__err(err, KB_EPARSE, "byte %td: a string this reader cannot read",
			       q - (const char *)default_json);
	*text = q;
	*len = (size_t)(m->s++ - q);
	return 0;
}

static int mini_object(load_ctx *c, mini *m, char *path, size_t plen);

/* The value of the member at path (plen bytes). */
static int mini_value(load_ctx *c, mini *m, char *path, size_t plen)
{
	const key_def *d;
	char text[64];
	const char *t;
	size_t n;
	int rc;

	/* A group of the schema is never one of its keys. */
	if (m->s < m->end && *m->s == '{') {
		if (!is_group(path, plen))
			return kb__err(c->err, KB_EKEY, "'%s' is not an object of the schema", path);
		return mini_object(c, m, path, plen);
	}
	/* The file lists the keys in keys[]'s order: the key after the last
	 * one read is tried first. */
	d = c->next < N_KEYS && strcmp(keys[c->next].key, path) == 0 ? &keys[c->next]
								    : find_key(path);
	if (!d)
		return unknown_key(c->err, path);
	if (c->seen[d - keys])
		return kb__err(c->err, KB_EKEY, "duplicate key '%s'", path);
	c->seen[d - keys] = true;
	c->next = (size_t)(d - keys) + 1;
	if (m->s < m->end && *m->s == '"') {
		rc = mini_string(m, &t, &n, c->err);
		if (rc)
			return rc;
		if (n >= sizeof(text) || (d->kind != K_STRING && d->kind != K_ENUM))
			return kb__err(c->err, KB_ETYPE, "%s: a string this reader cannot use", path);
		memcpy(text, t, n);
		text[n] = '\0';
		if (d->kind == K_ENUM)
			return set_enum(&c->p, d, text, c->err);
		if (strcmp(text, KB_TOPOLOGY_SCHEMA) != 0)
			return kb__err(c->err, KB_EINVAL, "schema = \"%s\": unsupported", text);
		return 0;
	}
	t = m->s;
	while (m->s < m->end && strchr("0123456789+-.eE", *m->s) && *m->s)
		m->s++;
	n = (size_t)(m->s - t);
	if (n == 0 || n >= sizeof(text) || d->kind == K_STRING || d->kind == K_ENUM)
		return kb__err(c->err, KB_ETYPE, "%s: a value this reader cannot use", path);
	memcpy(text, t, n);
	text[n] = '\0';
	/* A real where an integer is wanted is a type error (parse_value). */
	return parse_value(&c->p, d, text, c->err);
}

/* The members of the object at m->s (its braces consumed), at path. */
static int mini_object(load_ctx *c, mini *m, char *path, size_t plen)
{
	const char *name;
	size_t n, len;
	int rc;

	m->s++;
	mini_space(m);
	if (m->s < m->end && *m->s == '}') {
		m->s++;
		return 0;
	}
	for (;;) {
		mini_space(m);
		rc = mini_string(m, &name, &n, c->err);
		if (rc)
			return rc;
		len = plen + (plen ? 1 : 0) + n;
		if (len > MAX_KEY_LEN || n == 0 || memchr(name, '.', n))
			return kb__err(c->err, KB_EKEY, "a member name this reader cannot use");
		if (plen)
			path[plen] = '.';
		memcpy(path + plen + (plen ? 1 : 0), name, n);
		path[len] = '\0';
		mini_space(m);
		if (m->s >= m->end || *m->s++ != ':')
			return kb__err(c->err, KB_EPARSE, "%s: expected ':'", path);
		mini_space(m);
		rc = mini_value(c, m, path, len);
		if (rc)
			return rc;
		path[plen] = '\0';
		mini_space(m);
		if (m->s < m->end && *m->s == ',') {
			m->s++;
			continue;
		}
		if (m->s < m->end && *m->s == '}') {
			m->s++;
			return 0;
		}
		return kb__err(c->err, KB_EPARSE, "byte %td: expected ',' or '}'",
			       m->s - (const char *)default_json);
	}
}

/*
 * Fills *p from the embedded default, which must name every key. A failure
 * other than memory is a bug in the build, hence KB_EINTERNAL.
 */
static int load_defaults(kb_topo_params *p, kb_error *err)
{
	load_ctx c;
	mini m = { (const char *)default_json, (const char *)default_json + sizeof(default_json) };
	char path[MAX_KEY_LEN + 2] = "";
	size_t i;
	int rc;

	memset(&c, 0, sizeof(c));
	c.err = err;
	mini_space(&m);
	rc = m.s < m.end && *m.s == '{' ? mini_object(&c, &m, path, 0)
				       : kb__err(err, KB_EPARSE, "not a JSON object");
	if (rc == 0) {
		mini_space(&m);
		if (m.s != m.end)
			rc = kb__err(err, KB_EPARSE, "byte %td: text after the object",
				     m.s - (const char *)default_json);
	}
	for (i = 0; rc == 0 && i < N_KEYS; i++)
		if (!c.seen[i])
			rc = kb__err(err, KB_EINTERNAL, "default topology lacks '%s'", keys[i].key);
	if (rc == 0)
		rc = cross_check(&c.p, err);
	if (rc && rc != KB_ENOMEM && err) {
		err->code = KB_EINTERNAL;
		kb__err_prefix(err, "embedded default topology");
	}
	if (rc == 0)
		*p = c.p;
	return rc;
}

/* Default, then buf overlaid, validated, into a new topology. */
static int load_buffer(kb_topology **out, const char *buf, size_t len, const char *src,
		       kb_error *err)
{
	load_ctx c;
	json_t *root = NULL;
	kb_topology *t;
	int rc;

	memset(&c, 0, sizeof(c));
	c.err = err;
	rc = load_defaults(&c.p, err);
	if (rc)
		return rc;
	rc = parse(&root, buf, len, src, err);
	if (rc)
		return rc;
	if (!json_object_get(root, "schema")) {
		rc = kb__err_at(err, KB_EKEY, "schema", 0, 0, "missing required key 'schema' (\"%s\")",
				KB_TOPOLOGY_SCHEMA);
		goto fail;
	}
	rc = walk(&c, root, "");
	if (rc == 0)
		rc = cross_check(&c.p, err);
	if (rc)
		goto fail;
	t = malloc(sizeof(*t));
	if (!t) {
		rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto fail;
	}
	t->p = c.p;
	*out = t;
	json_decref(root);
	return 0;
fail:
	/* Key errors name the key in source (the message names the file);
	 * the rest name the file or string. */
	if (err && !err->source[0] && rc != KB_ENOMEM)
		set_source(err, src);
	json_decref(root);
	return rc;
}

/* ---- files ----------------------------------------------------------- */

/* Thread-safe strerror: glibc with _GNU_SOURCE has the GNU variant. */
static const char *errno_text(int e, char *buf, size_t n)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
	return strerror_r(e, buf, n);
#else
	if (strerror_r(e, buf, n) != 0)
		snprintf(buf, n, "error %d", e);
	return buf;
#endif
}

static int io_err(kb_error *err, const char *path, int e)
{
	char buf[128];

	return kb__err_at(err, KB_EIO, path, 0, 0, "cannot read topology file '%s': %s", path,
			  errno_text(e, buf, sizeof(buf)));
}

/* Reads the whole file into a malloc'ed buffer (pipes work too). */
static int read_file(const char *path, char **data, size_t *len, kb_error *err)
{
	FILE *f;
	char *buf = NULL, *nb;
	size_t cap = 0, used = 0, got;
	int rc = 0;

	f = fopen(path, "rb");
	if (!f)
		return io_err(err, path, errno);
	for (;;) {
		if (used == cap) {
			cap = cap ? cap * 2 : 4096;
			if (cap > MAX_FILE_BYTES) {
				rc = kb__err_at(err, KB_EIO, path, 0, 0,
						"topology file '%s' is larger than %u bytes", path,
						MAX_FILE_BYTES);
				goto out;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				rc = kb__err(err, KB_ENOMEM, "out of memory reading '%s'", path);
				goto out;
			}
			buf = nb;
		}
		got = fread(buf + used, 1, cap - used, f);
		used += got;
		if (got == 0)
			break;
	}
	if (ferror(f))
		rc = io_err(err, path, errno);
out:
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	*len = used;
	return 0;
}

/* ---- public API ------------------------------------------------------ */

KB_API int kb_topology_default(kb_topology **out, kb_error *err)
{
	kb_topology *t;
	int rc;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_topology_default: out is NULL");
	t = malloc(sizeof(*t));
	if (!t)
		return kb__err(err, KB_ENOMEM, "out of memory");
	rc = load_defaults(&t->p, err);
	if (rc) {
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

KB_API int kb_topology_load_string(kb_topology **out, const char *json_text, kb_error *err)
{
	kb_error_clear(err);
	if (!out || !json_text)
		return kb__err(err, KB_EINVAL, "kb_topology_load_string: NULL argument");
	return load_buffer(out, json_text, strlen(json_text), "<string>", err);
}

KB_API int kb_topology_load_file(kb_topology **out, const char *path, kb_error *err)
{
	char *data = NULL;
	size_t len = 0;
	int rc;

	kb_error_clear(err);
	if (!out || !path)
		return kb__err(err, KB_EINVAL, "kb_topology_load_file: NULL argument");
	rc = read_file(path, &data, &len, err);
	if (rc)
		return rc;
	rc = load_buffer(out, data, len, path, err);
	/* Parse errors already start with "FILE:LINE:COL"; say the file for the rest. */
	if (rc && rc != KB_EPARSE && rc != KB_ENOMEM)
		kb__err_prefix(err, "%s", path);
	free(data);
	return rc;
}

KB_API int kb_topology_clone(kb_topology **out, const kb_topology *t, kb_error *err)
{
	kb_topology *c;

	kb_error_clear(err);
	if (!out || !t)
		return kb__err(err, KB_EINVAL, "kb_topology_clone: NULL argument");
	c = malloc(sizeof(*c));
	if (!c)
		return kb__err(err, KB_ENOMEM, "out of memory");
	*c = *t;
	*out = c;
	return 0;
}

/* True when s is non-empty and uses only characters of a decimal number. */
static bool decimal_chars(const char *s)
{
	return *s && s[strspn(s, "0123456789+-.eE")] == '\0';
}

/* True when s is a sign and digits only. */
static bool integer_chars(const char *s)
{
	if (*s == '+' || *s == '-')
		s++;
	return *s && s[strspn(s, "0123456789")] == '\0';
}

/* True when all of s is one strtod number (s has only decimal_chars). */
static bool full_strtod(const char *s, double *out)
{
	char *end;

	*out = strtod(s, &end);
	return end != s && *end == '\0';
}

/* Parses text strictly as d's type and stores it in p when in range. */
static int parse_value(kb_topo_params *p, const key_def *d, const char *text, kb_error *err)
{
	long long iv;
	double rv;
	char *end;

	if (d->kind == K_ENUM)
		return set_enum(p, d, text, err);
	if (!decimal_chars(text) || !full_strtod(text, &rv))
		return kb__err(err, KB_EPARSE, "%s: '%.60s' is not a number", d->key, text);
	if (d->kind == K_REAL)
		return check_real(p, d, rv, text, err);
	/* A number, but not a whole one: a type error, like 1.5 in a file. */
	if (!integer_chars(text))
		return kb__err(err, KB_ETYPE, "%s: expected integer, got '%.60s'", d->key, text);
	errno = 0;
	iv = strtoll(text, &end, 10);
	if (errno == ERANGE)
		return range_err(err, d, text, true);
	return check_int(p, d, iv, err);
}

static char *trim(char *s);
static int set_trimmed(kb_topology *t, const char *dotted_key, const char *value,
		       kb_error *err);

/* Spaces and tabs around the key and the value are trimmed, as by
 * kb_topology_set_assignment and kb_params_set (issue 18 §6). */
KB_API int kb_topology_set(kb_topology *t, const char *dotted_key, const char *value,
			   kb_error *err)
{
	char *k, *v;
	int rc;

	kb_error_clear(err);
	if (!t || !dotted_key || !value)
		return kb__err(err, KB_EINVAL, "kb_topology_set: NULL argument");
	k = strdup(dotted_key);
	v = strdup(value);
	rc = k && v ? set_trimmed(t, trim(k), trim(v), err) : kb__err(err, KB_ENOMEM, "out of memory");
	free(k);
	free(v);
	return rc;
}

static int set_trimmed(kb_topology *t, const char *dotted_key, const char *value,
		       kb_error *err)
{
	kb_topo_params np;
	const key_def *d;
	int rc;

	set_source(err, dotted_key);
	d = find_key(dotted_key);
	if (!d && is_group(dotted_key, strlen(dotted_key)))
		return kb__err(err, KB_ETYPE, "'%s' is an object; set one of its keys", dotted_key);
	if (!d)
		return unknown_key(err, dotted_key);
	if (d->kind == K_STRING)
		return kb__err(err, KB_EINVAL, "'%s' cannot be set", d->key);
	/* Work on a copy so that a failed check leaves t unchanged. */
	np = t->p;
	rc = parse_value(&np, d, value, err);
	if (rc == 0)
		rc = cross_check(&np, err);
	if (rc == 0)
		t->p = np;
	else
		set_source(err, dotted_key);  /* the key set, not a rule's first key */
	return rc;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t';
}

/* Trims spaces and tabs at both ends of s, in place; returns the start. */
static char *trim(char *s)
{
	size_t n;

	while (is_space(*s))
		s++;
	n = strlen(s);
	while (n && is_space(s[n - 1]))
		s[--n] = '\0';
	return s;
}

KB_API int kb_topology_set_assignment(kb_topology *t, const char *key_eq_value, kb_error *err)
{
	char *copy, *eq, *key;
	size_t len;
	int rc;

	kb_error_clear(err);
	if (!t || !key_eq_value)
		return kb__err(err, KB_EINVAL, "kb_topology_set_assignment: NULL argument");
	len = strlen(key_eq_value);
	copy = malloc(len + 1);
	if (!copy)
		return kb__err(err, KB_ENOMEM, "out of memory");
	memcpy(copy, key_eq_value, len + 1);
	eq = strchr(copy, '=');
	if (eq)
		*eq = '\0';
	key = trim(copy);
	if (!eq || !*key)
		rc = kb__err(err, KB_EPARSE, "'%.100s': expected KEY=VALUE", key_eq_value);
	else
		rc = kb_topology_set(t, key, trim(eq + 1), err);
	free(copy);
	return rc;
}

KB_API int kb_topology_get_number(const kb_topology *t, const char *dotted_key, double *out,
				  kb_error *err)
{
	const key_def *d;

	kb_error_clear(err);
	if (!t || !dotted_key || !out)
		return kb__err(err, KB_EINVAL, "kb_topology_get_number: NULL argument");
	set_source(err, dotted_key);
	d = find_key(dotted_key);
	if (!d && is_group(dotted_key, strlen(dotted_key)))
		return kb__err(err, KB_ETYPE, "'%s' is an object, not a number", dotted_key);
	if (!d)
		return unknown_key(err, dotted_key);
	if (d->kind == K_STRING || d->kind == K_ENUM)
		return kb__err(err, KB_ETYPE, "'%s' is a string, not a number", d->key);
	*out = get_num(&t->p, d);
	return 0;
}

/* ---- dump ------------------------------------------------------------ */

/* Number of leading segments (of nseg) that a and b share. */
static size_t common_segments(const char *a, const char *b, size_t nseg)
{
	size_t depth = 0, la, lb;

	while (depth < nseg) {
		la = strcspn(a, ".");
		lb = strcspn(b, ".");
		if (la != lb || strncmp(a, b, la) != 0 || !a[la] || !b[lb])
			break;
		a += la + 1;
		b += lb + 1;
		depth++;
	}
	return depth;
}

static size_t count_dots(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '.';
	return n;
}

/*
 * The dump is written into a buffer, not through a FILE (open_memstream
 * and stdio were most of a run's topology hash: issue 13). Its size has a
 * bound (dump_bound), so the writer never checks for room.
 */
typedef struct dbuf {
	char *p;
} dbuf;

static void put_mem(dbuf *b, const char *s, size_t n)
{
	memcpy(b->p, s, n);
	b->p += n;
}

static void put_str(dbuf *b, const char *s)
{
	put_mem(b, s, strlen(s));
}

static void put_ch(dbuf *b, char c)
{
	*b->p++ = c;
}

/* The digits of v, as "%llu" writes them; returns their count. */
static size_t u64_text(char *buf, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return n;
}

/* A value as "%.0f" writes it: an integral double below 2^64 is exactly
 * its uint64 value, written as digits; the rest through snprintf. */
static void fmt_whole(char *buf, size_t n, double v)
{
	if (v >= 0 && v < 18446744073709551616.0 && v == floor(v) && n > 20)
		u64_text(buf, (uint64_t)v);
	else
		snprintf(buf, n, "%.0f", v);
}

static void dump_value(dbuf *b, const kb_topo_params *p, const key_def *d)
{
	char buf[40];

	if (d->kind == K_STRING) {
		put_ch(b, '"');
		put_str(b, KB_TOPOLOGY_SCHEMA);
		put_ch(b, '"');
	} else if (d->kind == K_ENUM) {
		put_ch(b, '"');
		put_str(b, d->choices[(uint32_t)get_num(p, d)]);
		put_ch(b, '"');
	} else if (d->kind == K_REAL) {
		fmt_real(buf, sizeof(buf), get_num(p, d));
		put_str(b, buf);
	} else {
		fmt_whole(buf, sizeof(buf), get_num(p, d));
		put_str(b, buf);
	}
}

/* A new line indented two spaces a level. */
static void new_line(dbuf *b, size_t level)
{
	put_ch(b, '\n');
	memset(b->p, ' ', 2 * level);
	b->p += 2 * level;
}

/* ",\n    \"name\": " (no comma for an object's first member). */
static void open_member(dbuf *b, bool first, size_t level, const char *name, size_t len)
{
	if (!first)
		put_ch(b, ',');
	new_line(b, level);
	put_ch(b, '"');
	put_mem(b, name, len);
	put_mem(b, "\": ", 3);
}

static void close_object(dbuf *b, size_t level)
{
	new_line(b, level);
	put_ch(b, '}');
}

/*
 * The most bytes the dump can take: per key, the objects it opens and
 * closes (each a line of at most MAX_KEY_LEN name bytes and 2 * depth
 * spaces), its own line, and a value of at most 40 bytes (fmt_real's and
 * fmt_whole's buffers, an enum value, the schema).
 */
static size_t dump_bound(void)
{
	size_t n = 8, i, depth;

	for (i = 0; i < N_KEYS; i++) {
		depth = count_dots(keys[i].key) + 1;
		n += (depth + 1) * (2 * depth + MAX_KEY_LEN + 8) + 40 + sizeof(KB_TOPOLOGY_SCHEMA);
		for (size_t c = 0; keys[i].choices && keys[i].choices[c]; c++)
			n += strlen(keys[i].choices[c]);
	}
	return n;
}

/*
 * Writes the objects as keys[] nests them: before each key, closes the
 * objects it does not share with the previous key and opens its own.
 */
static void dump_to(dbuf *b, const kb_topo_params *p)
{
	const char *prev = "", *seg;
	size_t i, depth = 0, groups, j;
	bool first = true;

	put_ch(b, '{');
	for (i = 0; i < N_KEYS; i++) {
		groups = count_dots(keys[i].key);
		j = common_segments(prev, keys[i].key, groups);
		for (; depth > j; depth--)
			close_object(b, depth);
		seg = keys[i].key;
		for (j = 0; j < groups; j++, seg += strcspn(seg, ".") + 1) {
			if (j < depth)
				continue;
			open_member(b, first, depth + 1, seg, strcspn(seg, "."));
			put_ch(b, '{');
			first = true;
			depth++;
		}
		open_member(b, first, depth + 1, seg, strlen(seg));
		dump_value(b, p, &keys[i]);
		first = false;
		prev = keys[i].key;
	}
	for (; depth > 0; depth--)
		close_object(b, depth);
	put_mem(b, "\n}\n", 4);   /* with the terminating NUL */
}

KB_API char *kb_topology_dump(const kb_topology *t)
{
	dbuf b;
	char *buf;

	if (!t)
		return NULL;
	buf = malloc(dump_bound());
	if (!buf)
		return NULL;
	b.p = buf;
	dump_to(&b, &t->p);
	return buf;
}

KB_API int kb_topology_sha256(const kb_topology *t, char hex[65], kb_error *err)
{
	kb_sha256 h;
	char *text;

	if (!t || !hex)
		return kb__err(err, KB_EINVAL, "kb_topology_sha256: %s is NULL", t ? "hex" : "t");
	/* Hashing the dump, not the parsed values, makes the hash the one a
	 * user can check with sha256sum on `kernbench topology` output. */
	text = kb_topology_dump(t);
	if (!text)
		return kb__err(err, KB_ENOMEM, "out of memory hashing the topology");
	kb__sha256_init(&h);
	kb__sha256_update(&h, text, strlen(text));
	kb__sha256_hex(&h, hex);
	free(text);
	return KB_OK;
}

KB_API void kb_topology_destroy(kb_topology *t)
{
	free(t);
}

KB_API void kb_free(void *p)
{
	free(p);
}

const kb_topo_params *kb__topology_params(const kb_topology *t)
{
	return t ? &t->p : NULL;
}
