/*
 * JSON text as jansson writes it (json_text.h). What jansson changes on a
 * round trip, and so what this writer must reproduce: reals (jsonp_dtostr:
 * "%.*g", ".0" added when there is neither '.' nor 'e', the exponent
 * without '+' and leading zeros), escapes (\" \\ \b \f \n \r \t as they
 * are, any other goes to jansson), duplicate names (jansson keeps the last
 * value) and whitespace (gone). check_registry.c compares both writers.
 */
#include "bench/json_text.h"

#include "base/grow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper stored texts, or objects with more members, go to jansson. */
#define MAX_DEPTH 32
#define MAX_MEMBERS 64

static bool reserve(kb__jtext *b, size_t more)
{
	if (b->bad)
		return false;
	while (b->n + more > b->cap || b->n + more < b->n) {
		char *np = kb__grow(b->p, &b->cap, 1, 256);

		if (!np) {
			b->bad = true;
			return false;
		}
		b->p = np;
	}
	return true;
}

void kb__jt_put(kb__jtext *b, const char *s, size_t n)
{
	if (reserve(b, n)) {
		memcpy(b->p + b->n, s, n);
		b->n += n;
	}
}

void kb__jt_string(kb__jtext *b, const char *s)
{
	size_t n, extra = 0;

	if (!s) {
		b->bad = true;
		return;
	}
	for (n = 0; s[n]; n++) {
		unsigned char c = (unsigned char)s[n];

		if (c > 0x7f || (c < 0x20 && !strchr("\b\f\n\r\t", c)))
			goto bad;
		extra += c == '"' || c == '\\' || c < 0x20;
	}
	if (!reserve(b, n + extra + 2))
		return;
	b->p[b->n++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\' || c < 0x20) {
			static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";

			b->p[b->n++] = '\\';
			b->p[b->n++] = to[strchr(from, c) - from];
		} else {
			b->p[b->n++] = (char)c;
		}
	}
	b->p[b->n++] = '"';
	return;
bad:
	b->bad = true;
}

void kb__jt_key(kb__jtext *b, const char *name, bool first)
{
	if (!first)
		kb__jt_put(b, ",", 1);
	kb__jt_string(b, name);
	kb__jt_put(b, ":", 1);
}

void kb__jt_int(kb__jtext *b, long long v)
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
	kb__jt_put(b, tmp + i, sizeof(tmp) - i);
}

/*
 * A finite real as jansson's jsonp_dtostr writes it at precision:
 * "%.*g", ".0" added when there is neither '.' nor 'e', the exponent
 * without '+' and leading zeros. A locale's decimal point other than '.'
 * (which jansson converts) goes to the fallback.
 */
void kb__jt_real(kb__jtext *b, double v, int precision)
{
	char buf[40], *e, *start, *end;
	size_t len;

	len = (size_t)snprintf(buf, sizeof(buf) - 3, "%.*g", precision, v);
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
	kb__jt_put(b, buf, len);
}

/* ---- the stored texts (params, meta) --------------------------------- */

static void copy_value(kb__jtext *b, const char **sp, int depth, int prec);

/* A string of the stored text: its bytes as they are when jansson would
 * write them so (see the file's comment), else the fallback. Returns its
 * raw length (with the quotes), for the duplicate test. */
static size_t copy_string(kb__jtext *b, const char **sp)
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
	kb__jt_put(b, s, (size_t)(q - s));
	*sp = q;
	return (size_t)(q - s);
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A number: an integer (jansson's: no '.', 'e' or 'E') of at most 18
 * digits is copied (but "-0", which jansson reads as 0); a real is read
 * with strtod, as jansson does, and written at the given precision. */
static void copy_number(kb__jtext *b, const char **sp, int prec)
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
		kb__jt_put(b, s, (size_t)(p - s));
		*sp = p;
		return;
	}
	v = strtod(s, &end);
	if (end != p || !isfinite(v))
		goto bad;
	kb__jt_real(b, v, prec);
	*sp = p;
	return;
bad:
	b->bad = true;
}

/* An object's members or an array's values, with their braces. */
static void copy_members(kb__jtext *b, const char **sp, int depth, int prec, bool object)
{
	const char *key[MAX_MEMBERS];
	size_t klen[MAX_MEMBERS], n = 0;
	const char *s = *sp + 1;
	const char close[2] = { object ? '}' : ']', '\0' };

	kb__jt_put(b, object ? "{" : "[", 1);
	if (*s == close[0]) {
		kb__jt_put(b, close, 1);
		*sp = s + 1;
		return;
	}
	for (;;) {
		if (object) {
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
			kb__jt_put(b, ":", 1);
			s++;
		}
		copy_value(b, &s, depth + 1, prec);
		if (b->bad)
			return;
		if (*s == ',') {
			kb__jt_put(b, ",", 1);
			s++;
		} else if (*s == close[0]) {
			kb__jt_put(b, close, 1);
			*sp = s + 1;
			return;
		} else {
			b->bad = true;
			return;
		}
	}
}

static void copy_value(kb__jtext *b, const char **sp, int depth, int prec)
{
	static const char *const words[] = { "true", "false", "null" };
	const char *s = *sp;

	if (depth > MAX_DEPTH) {
		b->bad = true;
		return;
	}
	switch (*s) {
	case '{':
		copy_members(b, sp, depth, prec, true);
		return;
	case '[':
		copy_members(b, sp, depth, prec, false);
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
				kb__jt_put(b, s, n);
				*sp = s + n;
				return;
			}
		}
		b->bad = true;
		return;
	default:
		copy_number(b, sp, prec);
	}
}

void kb__jt_copy(kb__jtext *b, const char *text, int precision)
{
	if (*text != '{' && *text != '[') {
		b->bad = true;
		return;
	}
	copy_value(b, &text, 0, precision);
	if (*text)
		b->bad = true;
}


char *kb__jt_finish(kb__jtext *b)
{
	kb__jt_put(b, "", 1);
	if (!b->bad)
		return b->p;
	free(b->p);
	b->p = NULL;
	return NULL;
}
