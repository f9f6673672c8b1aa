/*
 * kb_result_to_json: the result as compact JSON text, written directly.
 *
 * The text is what jansson writes for kb__result_json's object
 * (json_dumps, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)),
 * byte for byte. Building that object meant parsing the stored params and
 * provenance texts back and formatting everything through jansson: a fifth
 * of a short run (issue 13). Here the members are written in the object's
 * order, and the stored texts are copied, their reals rewritten at the
 * result's precision, as jansson's parse and dump would give them. Whatever
 * this writer does not reproduce exactly (a string that is not plain
 * ASCII, or an escape other than \" \\ \b \f \n \r \t; whitespace,
 * duplicate names, deep nesting or a number out of range in the stored
 * texts; a busy engine named twice for a PE) falls back to jansson:
 * check_registry.c compares both on such results.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/bench_impl.h"

/* Deeper stored texts, or objects with more members, go to jansson. */
#define MAX_DEPTH 32
#define MAX_MEMBERS 64

typedef struct jbuf {
	char *p;
	size_t n, cap;
	bool bad;   /* out of memory, or something to leave to jansson */
} jbuf;

static bool reserve(jbuf *b, size_t more)
{
	char *np;
	size_t cap;

	if (b->bad)
		return false;
	if (b->n + more <= b->cap)
		return true;
	cap = b->cap * 2 > b->n + more ? b->cap * 2 : b->n + more + 256;
	np = realloc(b->p, cap);
	if (!np) {
		b->bad = true;
		return false;
	}
	b->p = np;
	b->cap = cap;
	return true;
}

static void put(jbuf *b, const char *s, size_t n)
{
	if (reserve(b, n)) {
		memcpy(b->p + b->n, s, n);
		b->n += n;
	}
}

static void puts_(jbuf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* A string of printable ASCII without '"' and '\\': what jansson writes
 * unchanged. Anything else: the fallback. */
static void put_string(jbuf *b, const char *s)
{
	size_t n;

	if (!s) {
		b->bad = true;
		return;
	}
	for (n = 0; s[n]; n++)
		if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e || s[n] == '"' ||
		    s[n] == '\\') {
			b->bad = true;
			return;
		}
	if (reserve(b, n + 2)) {
		b->p[b->n++] = '"';
		memcpy(b->p + b->n, s, n);
		b->n += n;
		b->p[b->n++] = '"';
	}
}

/* "name": the opening of a member; first members have no comma. */
static void put_key(jbuf *b, const char *name, bool first)
{
	if (!first)
		put(b, ",", 1);
	put_string(b, name);
	put(b, ":", 1);
}

/* As jansson's JSON_INTEGER_FORMAT ("%lld") writes v. */
static void put_int(jbuf *b, long long v)
{
	char tmp[24];
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[--i] = '-';
	put(b, tmp + i, sizeof(tmp) - i);
}

/*
 * A finite real as jansson's jsonp_dtostr writes it at precision 12:
 * "%.12g", ".0" added when there is neither '.' nor 'e', the exponent
 * without '+' and leading zeros. A locale's decimal point other than '.'
 * (which jansson converts) goes to the fallback.
 */
static void put_real(jbuf *b, double v)
{
	char buf[40], *e, *start, *end;
	size_t len;

	len = (size_t)snprintf(buf, sizeof(buf) - 3, "%.12g", v);
	if (len >= sizeof(buf) - 3 || buf[strspn(buf, "0123456789-+.e")]) {
		b->bad = true;
		return;
	}
	if (!strchr(buf, '.') && !strchr(buf, 'e')) {
		memcpy(buf + len, ".0", 3);
		len += 2;
	}
	e = strchr(buf, 'e');
	if (e) {
		start = e + 1;
		end = start + 1;
		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, len - (size_t)(end - buf) + 1);
			len -= (size_t)(end - start);
		}
	}
	put(b, buf, len);
}

/* ---- the stored texts (params, meta) --------------------------------- */

static void copy_value(jbuf *b, const char **sp, int depth);

/* A string of the stored text: its bytes as they are when jansson would
 * write them so (see the file's comment), else the fallback. Returns its
 * raw length (with the quotes), for the duplicate test. */
static size_t copy_string(jbuf *b, const char **sp)
{
	const char *s = *sp, *q = s + 1;

	for (;;) {
		unsigned char c = (unsigned char)*q;

		if (c == '"')
			break;
		if (c == '\\' && q[1] && strchr("\"\\bfnrt", q[1])) {
			q += 2;
			continue;
		}
		if (c < 0x20 || c > 0x7f || c == '\\') {
			b->bad = true;
			return 0;
		}
		q++;
	}
	q++;
	put(b, s, (size_t)(q - s));
	*sp = q;
	return (size_t)(q - s);
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A number: an integer (jansson's: no '.', 'e' or 'E') of at most 18
 * digits is copied (but "-0", which jansson reads as 0); a real is read
 * with strtod, as jansson does, and written at the result's precision. */
static void copy_number(jbuf *b, const char **sp)
{
	const char *s = *sp, *p = s;
	bool real = false;
	char *end;
	double v;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (is_digit(*p))
		while (is_digit(*p))
			p++;
	else
		goto bad;
	if (*p == '.') {
		real = true;
		if (!is_digit(*++p))
			goto bad;
		while (is_digit(*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		real = true;
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!is_digit(*p))
			goto bad;
		while (is_digit(*p))
			p++;
	}
	if (!real) {
		if (p - s > 18 || (p - s == 2 && s[0] == '-' && s[1] == '0'))
			goto bad;
		put(b, s, (size_t)(p - s));
		*sp = p;
		return;
	}
	v = strtod(s, &end);
	if (end != p || !isfinite(v))
		goto bad;
	put_real(b, v);
	*sp = p;
	return;
bad:
	b->bad = true;
}

static void copy_object(jbuf *b, const char **sp, int depth)
{
	const char *key[MAX_MEMBERS];
	size_t klen[MAX_MEMBERS], n = 0;
	const char *s = *sp + 1;

	put(b, "{", 1);
	if (*s == '}') {
		put(b, "}", 1);
		*sp = s + 1;
		return;
	}
	for (;;) {
		if (*s != '"' || n == MAX_MEMBERS) {
			b->bad = true;
			return;
		}
		key[n] = s;
		klen[n] = copy_string(b, &s);
		if (b->bad)
			return;
		/* A name given twice: jansson keeps the last value. */
		for (size_t i = 0; i < n; i++)
			if (klen[i] == klen[n] && memcmp(key[i], key[n], klen[n]) == 0) {
				b->bad = true;
				return;
			}
		n++;
		if (*s != ':') {
			b->bad = true;
			return;
		}
		put(b, ":", 1);
		s++;
		copy_value(b, &s, depth + 1);
		if (b->bad)
			return;
		if (*s == ',') {
			put(b, ",", 1);
			s++;
		} else if (*s == '}') {
			put(b, "}", 1);
			*sp = s + 1;
			return;
		} else {
			b->bad = true;
			return;
		}
	}
}

static void copy_array(jbuf *b, const char **sp, int depth)
{
	const char *s = *sp + 1;

	put(b, "[", 1);
	if (*s == ']') {
		put(b, "]", 1);
		*sp = s + 1;
		return;
	}
	for (;;) {
		copy_value(b, &s, depth + 1);
		if (b->bad)
			return;
		if (*s == ',') {
			put(b, ",", 1);
			s++;
		} else if (*s == ']') {
			put(b, "]", 1);
			*sp = s + 1;
			return;
		} else {
			b->bad = true;
			return;
		}
	}
}

static void copy_value(jbuf *b, const char **sp, int depth)
{
	static const char *const words[] = { "true", "false", "null" };
	const char *s = *sp;

	if (depth > MAX_DEPTH) {
		b->bad = true;
		return;
	}
	switch (*s) {
	case '{':
		copy_object(b, sp, depth);
		return;
	case '[':
		copy_array(b, sp, depth);
		return;
	case '"':
		copy_string(b, sp);
		return;
	case 't':
	case 'f':
	case 'n':
		for (size_t i = 0; i < 3; i++) {
			size_t n = strlen(words[i]);

			if (strncmp(s, words[i], n) == 0) {
				put(b, s, n);
				*sp = s + n;
				return;
			}
		}
		b->bad = true;
		return;
	default:
		copy_number(b, sp);
	}
}

/* A stored text that json_loads (flags 0) reads as an object or array. */
static void copy_text(jbuf *b, const char *text)
{
	if (*text != '{' && *text != '[') {
		b->bad = true;
		return;
	}
	copy_value(b, &text, 0);
	if (*text)
		b->bad = true;
}

/* ---- the result ------------------------------------------------------ */

/* A real member, or nothing when it is not finite (json_real refuses it,
 * and the object is left without the member). */
static void real_member(jbuf *b, const char *name, double v)
{
	if (isfinite(v)) {
		put_key(b, name, false);
		put_real(b, v);
	}
}

static void real_or_null(jbuf *b, const char *name, double v)
{
	put_key(b, name, false);
	if (isfinite(v))
		put_real(b, v);
	else
		puts_(b, "null");
}

static void int_member(jbuf *b, const char *name, long long v)
{
	put_key(b, name, false);
	put_int(b, v);
}

/* busy_json's list: per PE, its engines' busy picoseconds or fractions. */
static void busy_list(jbuf *b, const kb_result *r, int util)
{
	put(b, "[", 1);
	for (uint32_t p = 0; p < r->pes && !b->bad; p++) {
		const char *seen[16];
		size_t n_seen = 0;

		put(b, p ? ",{" : "{", p ? 2 : 1);
		put_key(b, "pe", true);
		put_int(b, p);
		for (size_t i = 0; i < r->n_busy && !b->bad; i++) {
			const kb_engine_busy *e = &r->busy[i];

			if (e->pe != p)
				continue;
			/* A name twice (or "pe"): jansson keeps one member. */
			if (!e->eng || strcmp(e->eng, "pe") == 0 || n_seen == 16) {
				b->bad = true;
				break;
			}
			for (size_t k = 0; k < n_seen; k++)
				if (strcmp(seen[k], e->eng) == 0)
					b->bad = true;
			seen[n_seen++] = e->eng;
			put_key(b, e->eng, false);
			if (util)
				put_real(b, r->sim_time_ps ? (double)e->busy_ps / (double)r->sim_time_ps
							   : 0.0);
			else
				put_int(b, (json_int_t)e->busy_ps);
		}
		put(b, "}", 1);
	}
	put(b, "]", 1);
}

/* The text, or NULL with b->bad set (then the caller asks jansson). */
static char *result_text(const kb_result *r, jbuf *b)
{
	put(b, "{", 1);
	put_key(b, "bench", true);
	put_string(b, r->bench);
	put_key(b, "params", false);
	if (r->params_json)
		copy_text(b, r->params_json);
	else
		put(b, "{}", 2);
	put_key(b, "threads", false);
	if (r->threads == KB_THREADS_AUTO)
		put_string(b, "auto");
	else
		put_int(b, r->threads);
	int_member(b, "workers", r->workers);
	put_key(b, "data", false);
	puts_(b, r->data ? "true" : "false");
	int_member(b, "pes", r->pes);
	int_member(b, "sim_time_ps", (json_int_t)r->sim_time_ps);
	int_member(b, "events", (json_int_t)r->events);
	int_member(b, "records", (json_int_t)r->records);
	int_member(b, "commands", (json_int_t)r->commands);
	int_member(b, "dispatch_ps", (json_int_t)r->dispatch_ps);
	if (r->tiles) {
		int_member(b, "tiles", (json_int_t)r->tiles);
		real_or_null(b, "dispatch_per_tile_ns", r->dispatch_per_tile_ns);
		real_or_null(b, "dispatch_kernel_per_tile_ns", r->dispatch_kernel_per_tile_ns);
	}
	int_member(b, "windows", (json_int_t)r->windows);
	int_member(b, "parallel_windows", (json_int_t)r->parallel_windows);
	if (r->windows) {
		put_key(b, "executor", false);
		put(b, "{", 1);
		put_key(b, "threads", true);
		put_int(b, r->exec.threads);
		int_member(b, "window_ps", (json_int_t)r->exec.window_ps);
		int_member(b, "ns_events", (json_int_t)r->exec.ns_events);
		int_member(b, "ns_barrier", (json_int_t)r->exec.ns_barrier);
		int_member(b, "ns_next", (json_int_t)r->exec.ns_next);
		int_member(b, "ns_drain", (json_int_t)r->exec.ns_drain);
		int_member(b, "ns_oplog", (json_int_t)r->exec.ns_oplog);
		int_member(b, "ns_wall", (json_int_t)r->exec.ns_wall);
		int_member(b, "ns_oplog_serial", (json_int_t)r->exec.ns_oplog_serial);
		int_member(b, "gathered", r->exec.gathered);
		put(b, "}", 1);
	}
	real_member(b, "wall_s", r->wall_s);
	real_member(b, "events_per_s", r->events_per_s);
	put_key(b, "oplog_sha256", false);
	put_string(b, r->oplog_sha256);
	if (r->data) {
		real_or_null(b, "max_abs_err", r->max_abs_err);
		real_or_null(b, "max_rel_err", r->max_rel_err);
	}
	if (r->n_busy) {
		put_key(b, "busy_ps", false);
		busy_list(b, r, 0);
		put_key(b, "utilization", false);
		busy_list(b, r, 1);
	}
	if (r->meta_json) {
		put_key(b, "meta", false);
		copy_text(b, r->meta_json);
	}
	put(b, "}", 2);   /* with the terminating NUL */
	if (b->bad)
		return NULL;
	return b->p;
}

/* The same text through jansson: the object, then its dump. */
char *kb__result_to_json_jansson(const kb_result *r)
{
	json_t *o = kb__result_json(r);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12))
		    : NULL;

	json_decref(o);
	return s;
}

char *kb__result_text(const kb_result *r)
{
	jbuf b = { NULL, 0, 0, false };
	char *s;

	if (!r || r->size < KB_RESULT_SIZE_V1)
		return NULL;
	s = result_text(r, &b);
	if (!s)
		free(b.p);
	return s;
}

KB_API char *kb_result_to_json(const kb_result *r)
{
	char *s = kb__result_text(r);

	return s ? s : kb__result_to_json_jansson(r);
}
