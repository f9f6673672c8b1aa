/*
 * Building a sweep: benches, swept keys and their value lists, the base
 * topology, skipped points, and decoding a point index (the odometer order
 * documented in kernbench/sweep.h). Running it is sweep_run.c.
 */
#include "kernbench/sweep.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "bench/bench_impl.h"
#include "sweep/sweep_impl.h"

/* More points than this is surely a mistake (and the skip map would be big). */
#define MAX_POINTS ((size_t)100000000)

/* ---- building -------------------------------------------------------- */

static void free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

KB_API int kb_sweep_create(kb_sweep **out, const kb_sweep_options *opt, kb_error *err)
{
	kb_sweep_options def = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *s;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_sweep_create: NULL argument");
	if (opt && opt->threads < 0)
		return kb__err(err, KB_EINVAL, "sweep threads must be >= 0 (got %d)", opt->threads);
	s = calloc(1, sizeof(*s));
	if (!s)
		return kb__err(err, KB_ENOMEM, "out of memory");
	s->opt = opt ? *opt : def;
	atomic_init(&s->cancel, 0);
	*out = s;
	return 0;
}

KB_API void kb_sweep_destroy(kb_sweep *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_keys; i++) {
		free(s->keys[i].name);
		free_strv(s->keys[i].values, s->keys[i].n_values);
	}
	free(s->keys);
	free((void *)s->key_names);
	free((void *)s->scratch);
	free_strv(s->benches, s->n_benches);
	kb_topology_destroy(s->topo);
	free(s->skip);
	free(s);
}

/* Points of a sweep whose keys have the given value counts; 0 on overflow. */
static size_t count_points(size_t n_benches, const sweep_key *keys, size_t n_keys,
			   size_t extra)
{
	size_t i, n = n_benches;

	for (i = 0; i <= n_keys; i++) {
		size_t m = i < n_keys ? keys[i].n_values : extra;

		if (m && n > MAX_POINTS / m)
			return 0;
		n *= m ? m : 1;
	}
	return n;
}

KB_API size_t kb_sweep_points(const kb_sweep *s)
{
	return s ? count_points(s->n_benches, s->keys, s->n_keys, 1) : 0;
}

/* Adding to the product after kb_sweep_skip would renumber the points. */
static int check_mutable(const kb_sweep *s, kb_error *err)
{
	if (s->running)
		return kb__err(err, KB_ESTATE, "the sweep is running");
	if (s->skip)
		return kb__err(err, KB_ESTATE, "cannot add to a sweep after kb_sweep_skip");
	return 0;
}

KB_API int kb_sweep_add_bench(kb_sweep *s, const char *bench, kb_error *err)
{
	char **v;
	size_t i;
	int rc;

	kb_error_clear(err);
	if (!s || !bench)
		return kb__err(err, KB_EINVAL, "kb_sweep_add_bench: NULL argument");
	if ((rc = check_mutable(s, err)))
		return rc;
	if ((rc = kb_registry_lookup(kb__sweep_registry(s), bench, NULL, err)))
		return rc;
	for (i = 0; i < s->n_benches; i++)
		if (strcmp(s->benches[i], bench) == 0)
			return kb__err(err, KB_EINVAL, "bench '%.100s' added twice", bench);
	if (s->n_benches && count_points(s->n_benches + 1, s->keys, s->n_keys, 1) == 0)
		return kb__err(err, KB_ERANGE, "too many points (more than %zu)", MAX_POINTS);
	v = realloc(s->benches, (s->n_benches + 1) * sizeof(*v));
	if (!v)
		return kb__err(err, KB_ENOMEM, "out of memory");
	s->benches = v;
	v[s->n_benches] = strdup(bench);
	if (!v[s->n_benches])
		return kb__err(err, KB_ENOMEM, "out of memory");
	s->n_benches++;
	return 0;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Splits "a,b,c" (spaces around items ignored); every item must be non-empty. */
static int split_list(const char *key, const char *list, char ***out, size_t *n_out,
		      kb_error *err)
{
	char **v = NULL, **nv;
	size_t n = 0;
	const char *p = list;

	for (;;) {
		const char *end = strchr(p, ',');
		const char *b = p, *e = end ? end : p + strlen(p);

		while (b < e && is_blank(*b))
			b++;
		while (e > b && is_blank(e[-1]))
			e--;
		if (e == b) {
			free_strv(v, n);
			return kb__err(err, KB_EINVAL, "'%.100s=%.200s': empty value in the list",
				       key, list);
		}
		nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv || !(nv[n] = strndup(b, (size_t)(e - b)))) {
			free_strv(nv ? nv : v, n);
			return kb__err(err, KB_ENOMEM, "out of memory");
		}
		v = nv;
		n++;
		if (!end)
			break;
		p = end + 1;
	}
	*out = v;
	*n_out = n;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A value listed twice would make two points claim one row of the output
 * and break "resuming a complete file changes nothing" (issue 18 §4):
 * refused, naming the value. Sorted copy, so a long list stays cheap. */
static int check_unique(const char *key, char **v, size_t n, kb_error *err)
{
	const char **sorted = malloc(n * sizeof(*sorted));
	int rc = 0;

	if (!sorted)
		return kb__err(err, KB_ENOMEM, "out of memory");
	memcpy((void *)sorted, v, n * sizeof(*sorted));
	qsort((void *)sorted, n, sizeof(*sorted), cmp_str);
	for (size_t i = 1; i < n && !rc; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			rc = kb__err(err, KB_EINVAL, "'%.100s': value '%.100s' is listed twice", key,
				     sorted[i]);
	free((void *)sorted);
	return rc;
}

/* Grows the key arrays by one; the sweep stays valid on failure. */
static int grow_keys(kb_sweep *s)
{
	size_t n = s->n_keys + 1;
	sweep_key *k = realloc(s->keys, n * sizeof(*k));
	const char **names, **scratch;

	if (!k)
		return KB_ENOMEM;
	s->keys = k;
	names = realloc((void *)s->key_names, n * sizeof(*names));
	if (!names)
		return KB_ENOMEM;
	s->key_names = names;
	scratch = realloc((void *)s->scratch, n * sizeof(*scratch));
	if (!scratch)
		return KB_ENOMEM;
	s->scratch = scratch;
	return 0;
}

static int add_key(kb_sweep *s, const char *name, const char *values, int is_set,
		   kb_error *err)
{
	sweep_key k = { NULL, is_set, NULL, 0 };
	size_t i;
	int rc;

	kb_error_clear(err);
	if (!s || !name || !values)
		return kb__err(err, KB_EINVAL, "kb_sweep_add: NULL argument");
	if ((rc = check_mutable(s, err)))
		return rc;
	if (!*name)
		return kb__err(err, KB_EINVAL, "'=%.200s': empty name", values);
	for (i = 0; i < s->n_keys; i++)
		if (strcmp(s->keys[i].name, name) == 0)
			return kb__err(err, KB_EINVAL, "'%.100s' is swept twice", name);
	if ((rc = split_list(name, values, &k.values, &k.n_values, err)))
		return rc;
	if ((rc = check_unique(name, k.values, k.n_values, err)))
		goto fail;
	if (count_points(s->n_benches ? s->n_benches : 1, s->keys, s->n_keys, k.n_values) == 0) {
		rc = kb__err(err, KB_ERANGE, "too many points (more than %zu)", MAX_POINTS);
		goto fail;
	}
	k.name = strdup(name);
	if (!k.name || grow_keys(s)) {
		rc = kb__err(err, KB_ENOMEM, "out of memory");
		goto fail;
	}
	s->keys[s->n_keys] = k;
	s->key_names[s->n_keys] = k.name;
	s->n_keys++;
	return 0;
fail:
	free(k.name);
	free_strv(k.values, k.n_values);
	return rc;
}

KB_API int kb_sweep_add_param(kb_sweep *s, const char *name, const char *values, kb_error *err)
{
	return add_key(s, name, values, 0, err);
}

KB_API int kb_sweep_add_set(kb_sweep *s, const char *key, const char *values, kb_error *err)
{
	return add_key(s, key, values, 1, err);
}

KB_API int kb_sweep_set_topology(kb_sweep *s, const kb_topology *topo, kb_error *err)
{
	kb_topology *copy = NULL;
	int rc;

	kb_error_clear(err);
	if (!s)
		return kb__err(err, KB_EINVAL, "kb_sweep_set_topology: NULL argument");
	if (s->running)
		return kb__err(err, KB_ESTATE, "the sweep is running");
	if (topo && (rc = kb_topology_clone(&copy, topo, err)))
		return rc;
	kb_topology_destroy(s->topo);
	s->topo = copy;
	return 0;
}

/* ---- points ----------------------------------------------------------- */

/* Decodes index into a bench and one value per key (last key fastest). */
const char *kb__sweep_decode(const kb_sweep *s, size_t index, const char **values)
{
	size_t k = s->n_keys;

	while (k-- > 0) {
		values[k] = s->keys[k].values[index % s->keys[k].n_values];
		index /= s->keys[k].n_values;
	}
	return s->benches[index];
}

KB_API int kb_sweep_skip(kb_sweep *s, size_t index, kb_error *err)
{
	size_t n;

	kb_error_clear(err);
	if (!s)
		return kb__err(err, KB_EINVAL, "kb_sweep_skip: NULL argument");
	if (s->running)
		return kb__err(err, KB_ESTATE, "the sweep is running");
	n = kb_sweep_points(s);
	if (index >= n)
		return kb__err(err, KB_ERANGE, "point %zu out of range (the sweep has %zu)", index, n);
	if (!s->skip && !(s->skip = calloc(n, 1)))
		return kb__err(err, KB_ENOMEM, "out of memory");
	s->skip[index] = 1;
	return 0;
}

KB_API int kb_sweep_point(const kb_sweep *s, size_t index, const char **bench,
			  const char *const **values, kb_error *err)
{
	size_t n;

	kb_error_clear(err);
	if (!s)
		return kb__err(err, KB_EINVAL, "kb_sweep_point: NULL argument");
	n = kb_sweep_points(s);
	if (index >= n)
		return kb__err(err, KB_ERANGE, "point %zu out of range (the sweep has %zu)", index, n);
	/* scratch is owned by the sweep, not part of its logical state. */
	if (bench)
		*bench = kb__sweep_decode(s, index, s->scratch);
	else
		kb__sweep_decode(s, index, s->scratch);
	if (values)
		*values = s->scratch;
	return 0;
}

KB_API void kb_sweep_cancel(kb_sweep *s)
{
	if (s)
		atomic_store(&s->cancel, 1);
}

const kb_registry *kb__sweep_registry(const kb_sweep *s)
{
	return s->opt.registry ? s->opt.registry : kb__builtin_registry();
}
