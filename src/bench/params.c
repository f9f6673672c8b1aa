/*
 * kb_params: an ordered list of "name=value" assignments. Setting a name
 * that is already present replaces its value in place, so the order is that
 * of first assignment (the order a user typed, which the result's
 * params_json and error messages follow).
 */
#include "bench/params.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

typedef struct param {
	char *name;
	char *value;
} param;

struct kb_params {
	param *items;
	size_t n, cap;
};

KB_API int kb_params_create(kb_params **out, kb_error *err)
{
	kb_params *p;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_params_create: out is NULL");
	p = calloc(1, sizeof(*p));
	if (!p)
		return kb__err(err, KB_ENOMEM, "out of memory");
	*out = p;
	return 0;
}

KB_API void kb_params_destroy(kb_params *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n; i++) {
		free(p->items[i].name);
		free(p->items[i].value);
	}
	free(p->items);
	free(p);
}

/* A copy of s without the spaces and tabs at its ends: names and values
 * are trimmed the same way as topology keys and sweep list items
 * (issue 18 §6: 'lps= 2' and 'lps=2 ' are both lps=2). */
static char *dup_trim(const char *s)
{
	size_t n;
	char *d;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static param *find(const kb_params *p, const char *name)
{
	size_t i;

	for (i = 0; p && i < p->n; i++)
		if (strcmp(p->items[i].name, name) == 0)
			return &p->items[i];
	return NULL;
}

/* Makes room for one more item; the list stays valid on failure. */
static int grow(kb_params *p)
{
	size_t cap;
	param *items;

	if (p->n < p->cap)
		return 0;
	cap = p->cap ? p->cap * 2 : 8;
	items = realloc(p->items, cap * sizeof(*items));
	if (!items)
		return KB_ENOMEM;
	p->items = items;
	p->cap = cap;
	return 0;
}

KB_API int kb_params_set(kb_params *p, const char *name, const char *value, kb_error *err)
{
	param *it;
	char *v, *n = NULL;

	kb_error_clear(err);
	if (!p || !name || !value)
		return kb__err(err, KB_EINVAL, "kb_params_set: NULL argument");
	v = dup_trim(value);
	n = dup_trim(name);
	if (!v || !n) {
		free(n);
		free(v);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	if (!*n || !*v) {
		int rc = !*n ? kb__err(err, KB_EINVAL, "parameter with an empty name (value '%.100s')",
				       value)
			     : kb__err(err, KB_EINVAL, "parameter '%.100s' has an empty value", name);

		free(n);
		free(v);
		return rc;
	}
	it = find(p, n);
	if (it) {
		free(it->value);
		it->value = v;
		free(n);
		return 0;
	}
	if (grow(p)) {
		free(n);
		free(v);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	p->items[p->n].name = n;
	p->items[p->n].value = v;
	p->n++;
	return 0;
}

KB_API int kb_params_set_assignment(kb_params *p, const char *name_eq_value, kb_error *err)
{
	const char *eq;
	char *name;
	int rc;

	kb_error_clear(err);
	if (!p || !name_eq_value)
		return kb__err(err, KB_EINVAL, "kb_params_set_assignment: NULL argument");
	eq = strchr(name_eq_value, '=');
	if (!eq || eq == name_eq_value || !eq[1])
		return kb__err(err, KB_EINVAL, "'%.200s': expected NAME=VALUE", name_eq_value);
	name = malloc((size_t)(eq - name_eq_value) + 1);
	if (!name)
		return kb__err(err, KB_ENOMEM, "out of memory");
	memcpy(name, name_eq_value, (size_t)(eq - name_eq_value));
	name[eq - name_eq_value] = '\0';
	rc = kb_params_set(p, name, eq + 1, err);
	free(name);
	return rc;
}

size_t kb__params_count(const kb_params *p)
{
	return p ? p->n : 0;
}

const char *kb__params_name(const kb_params *p, size_t i)
{
	return p && i < p->n ? p->items[i].name : NULL;
}

const char *kb__params_value(const kb_params *p, size_t i)
{
	return p && i < p->n ? p->items[i].value : NULL;
}

const char *kb__params_get(const kb_params *p, const char *name)
{
	const param *it = name ? find(p, name) : NULL;

	return it ? it->value : NULL;
}
