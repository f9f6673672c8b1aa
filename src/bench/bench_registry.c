/*
 * kb_registry: the benches a run or a sweep can name. Each definition is
 * checked and copied on the way in (strings and parameter table), so a
 * caller may build one on the stack; the built-in benches come in through
 * the same kb_registry_add as a plugin's.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/str.h"
#include "bench/bench_impl.h"
#include "bench/registry_impl.h"

/* The built-in benches: builtin_entries below lists them (asserted there). */
#define N_BUILTINS 4

static kb__reg_entry *builtin_ptrs[N_BUILTINS];

/*
 * The built-in benches go in as the constant registry's entries, neither
 * checked nor copied: they are constant data that lives as long as the
 * library, and check_registry.c passes each through kb_registry_add's
 * checks. Checking and copying them was most of a short run's set-up in
 * the command (issue 13). reg is new, so no name is taken yet.
 */
int kb__registry_add_builtins(kb_registry *reg, kb_error *err)
{
	kb__reg_entry **p;

	if (reg->n)
		return kb__err(err, KB_ESTATE, "the built-in benches go into a new registry only");
	p = malloc(N_BUILTINS * sizeof(*p));
	if (!p)
		return kb__err(err, KB_ENOMEM, "out of memory");
	memcpy(p, builtin_ptrs, N_BUILTINS * sizeof(*p));
	reg->entries = p;
	reg->n = reg->cap = N_BUILTINS;
	return KB_OK;
}

KB_API int kb_registry_create(kb_registry **out, const kb_registry_options *opt, kb_error *err)
{
	kb_registry_options dflt = KB_REGISTRY_OPTIONS_INIT;
	kb_registry *reg;
	int rc;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_registry_create: out is NULL");
	*out = NULL;
	if (!opt)
		opt = &dflt;
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return kb__err(err, KB_ENOMEM, "out of memory");
	rc = opt->builtins ? kb__registry_add_builtins(reg, err) : KB_OK;
	if (rc) {
		kb_registry_destroy(reg);
		return rc;
	}
	*out = reg;
	return KB_OK;
}

static void entry_free(kb__reg_entry *e)
{
	if (e->def != &e->copy)
		return;   /* a built-in's constant entry */
	for (size_t i = 0; i < e->copy.info.n_params; i++) {
		free((char *)e->params[i].name);
		free((char *)e->params[i].default_value);
		free((char *)e->params[i].help);
		free((char *)e->params[i].choices);
	}
	free(e->params);
	free((char *)e->copy.info.name);
	free((char *)e->copy.info.help);
	free(e);
}

KB_API void kb_registry_destroy(kb_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		entry_free(reg->entries[i]);
	free(reg->entries);
	/* After the definitions: their functions live in the plugins. */
	kb__plugins_unload(reg);
	free(reg);
}

/* Bench names: what a command line, a CSV cell and a file name can carry
 * unquoted. Parameter names the same, as they are CSV columns and
 * --param K=V keys. */
int kb__bench_name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return 0;
	return 1;
}

static int check_param(const kb_bench_info *b, size_t i, kb_error *err)
{
	const kb_param_info *pi = &b->params[i];

	if (!kb__bench_name_ok(pi->name, 63))
		return kb__err(err, KB_EINVAL,
			       "bench '%s': parameter %zu has no valid name (letters, digits, '_', "
			       "'-', '.', at most 63)", b->name, i);
	for (size_t j = 0; j < i; j++)
		if (strcmp(b->params[j].name, pi->name) == 0)
			return kb__err(err, KB_EINVAL, "bench '%s': parameter '%s' is defined twice",
				       b->name, pi->name);
	if (pi->type != KB_PARAM_INT && pi->type != KB_PARAM_REAL && pi->type != KB_PARAM_STRING)
		return kb__err(err, KB_EINVAL, "bench '%s': parameter '%s' has an unknown type %d",
			       b->name, pi->name, (int)pi->type);
	if (!pi->default_value)
		return kb__err(err, KB_EINVAL, "bench '%s': parameter '%s' has no default",
			       b->name, pi->name);
	if (pi->type != KB_PARAM_STRING && !(pi->min <= pi->max))
		return kb__err(err, KB_EINVAL, "bench '%s': parameter '%s' has an empty range",
			       b->name, pi->name);
	if (pi->type == KB_PARAM_STRING && pi->choices && !*pi->choices)
		return kb__err(err, KB_EINVAL, "bench '%s': parameter '%s' has empty choices",
			       b->name, pi->name);
	if (kb__param_check(b->name, pi, pi->default_value, err)) {
		kb__err_prefix(err, "bench '%s': invalid default", b->name);
		err->code = KB_EINVAL;
		return KB_EINVAL;
	}
	return KB_OK;
}

static int check_def(const kb_registry *reg, const kb_bench_def *def, kb_error *err)
{
	const kb_bench_info *b = &def->info;

	if (def->abi != KB_BENCH_ABI)
		return kb__err(err, KB_ERANGE,
			       "bench definition built for bench ABI %u, this library (kernbench %s) "
			       "implements ABI %u: rebuild it against this library",
			       def->abi, kb_version(), KB_BENCH_ABI);
	if (!kb__bench_name_ok(b->name, 63))
		return kb__err(err, KB_EINVAL,
			       "bench name '%.100s' is not valid (letters, digits, '_', '-', '.', at "
			       "most 63)", b->name ? b->name : "(null)");
	if (!def->run)
		return kb__err(err, KB_EINVAL, "bench '%s' has no run function", b->name);
	if (b->n_params && !b->params)
		return kb__err(err, KB_EINVAL, "bench '%s': n_params is %zu but params is NULL",
			       b->name, b->n_params);
	for (size_t i = 0; i < b->n_params; i++)
		if (check_param(b, i, err))
			return err ? err->code : KB_EINVAL;
	for (size_t i = 0; i < reg->n; i++)
		if (strcmp(reg->entries[i]->def->info.name, b->name) == 0)
			return kb__err(err, KB_ESTATE, "bench '%s' is already registered", b->name);
	return KB_OK;
}

static kb__reg_entry *entry_copy(const kb_bench_def *def)
{
	kb__reg_entry *e = calloc(1, sizeof(*e));
	const kb_bench_info *b = &def->info;
	int bad = 0;

	if (!e)
		return NULL;
	e->copy = *def;
	e->def = &e->copy;
	e->copy.info.params = NULL;
	e->copy.info.n_params = 0;
	e->copy.info.name = kb__strdup_opt(b->name, &bad);
	e->copy.info.help = kb__strdup_opt(b->help ? b->help : "", &bad);
	e->params = calloc(b->n_params ? b->n_params : 1, sizeof(*e->params));
	bad |= !e->params;
	for (size_t i = 0; !bad && i < b->n_params; i++) {
		const kb_param_info *s = &b->params[i];
		kb_param_info *d = &e->params[i];

		*d = *s;
		e->copy.info.n_params = i + 1;
		d->name = kb__strdup_opt(s->name, &bad);
		d->default_value = kb__strdup_opt(s->default_value, &bad);
		d->help = kb__strdup_opt(s->help ? s->help : "", &bad);
		d->choices = kb__strdup_opt(s->choices, &bad);
	}
	e->copy.info.params = e->params;
	if (bad) {
		entry_free(e);
		return NULL;
	}
	return e;
}

KB_API int kb_registry_add(kb_registry *reg, const kb_bench_def *def, kb_error *err)
{
	kb__reg_entry *e;
	int rc;

	kb_error_clear(err);
	if (!reg || !def)
		return kb__err(err, KB_EINVAL, "kb_registry_add: %s is NULL", reg ? "def" : "reg");
	rc = check_def(reg, def, err);
	if (rc)
		return rc;
	if (reg->n == reg->cap) {
		kb__reg_entry **p = kb__grow(reg->entries, &reg->cap, sizeof(*p), 8);

		if (!p)
			return kb__err(err, KB_ENOMEM, "out of memory");
		reg->entries = p;
	}
	e = entry_copy(def);
	if (!e)
		return kb__err(err, KB_ENOMEM, "out of memory");
	reg->entries[reg->n++] = e;
	return KB_OK;
}

KB_API size_t kb_registry_count(const kb_registry *reg)
{
	return reg ? reg->n : 0;
}

KB_API const kb_bench_def *kb_registry_at(const kb_registry *reg, size_t i)
{
	return reg && i < reg->n ? reg->entries[i]->def : NULL;
}

static const kb_bench_def *find(const kb_registry *reg, const char *name)
{
	for (size_t i = 0; reg && name && i < reg->n; i++)
		if (strcmp(reg->entries[i]->def->info.name, name) == 0)
			return reg->entries[i]->def;
	return NULL;
}

static const char *name_at(const void *set, size_t i)
{
	return ((const kb_registry *)set)->entries[i]->def->info.name;
}

int kb__registry_unknown(const kb_registry *reg, kb_error *err, const char *bench)
{
	char hint[400];

	kb__names_hint(hint, sizeof(hint), bench ? bench : "", kb_registry_count(reg), name_at, reg);
	return kb__err(err, KB_ENOTFOUND, "unknown bench '%.100s'%s", bench ? bench : "(null)", hint);
}

KB_API int kb_registry_lookup(const kb_registry *reg, const char *name, const kb_bench_def **out,
			      kb_error *err)
{
	const kb_bench_def *d = find(reg, name);

	kb_error_clear(err);
	if (out)
		*out = d;
	if (!reg)
		return kb__err(err, KB_EINVAL, "kb_registry_lookup: reg is NULL");
	return d ? KB_OK : kb__registry_unknown(reg, err, name);
}

/* ---- the built-in benches as a constant registry ---------------------- */

/* Constant data, like the definitions it points at: kb_bench_run and the
 * JSON API need no lazily built state (doc/threadsafety.md). A registry
 * made by kb_registry_create holds checked copies of the same
 * definitions; tests/check_registry.c compares the two. */
static kb__reg_entry builtin_entries[] = {
	{ &kb__bench_synthetic, KB_BENCH_DEF_INIT, NULL },
	{ &kb__bench_gemm, KB_BENCH_DEF_INIT, NULL },
	{ &kb__bench_decode_opt2, KB_BENCH_DEF_INIT, NULL },
	{ &kb__bench_decode_opt3, KB_BENCH_DEF_INIT, NULL },
};
static kb__reg_entry *builtin_ptrs[N_BUILTINS] = {
	&builtin_entries[0], &builtin_entries[1], &builtin_entries[2], &builtin_entries[3],
};
_Static_assert(sizeof(builtin_entries) / sizeof(builtin_entries[0]) == N_BUILTINS &&
		       sizeof(builtin_ptrs) / sizeof(builtin_ptrs[0]) == N_BUILTINS,
	       "the constant registry lists every built-in bench");
static const kb_registry builtin_reg = { builtin_ptrs, N_BUILTINS, N_BUILTINS, NULL, 0, 0 };

const kb_registry *kb__builtin_registry(void)
{
	return &builtin_reg;
}

int kb__bench_unknown(kb_error *err, const char *bench)
{
	return kb__registry_unknown(kb__builtin_registry(), err, bench);
}

KB_API size_t kb_bench_count(void)
{
	return kb_registry_count(kb__builtin_registry());
}

KB_API const kb_bench_info *kb_bench_get(size_t i)
{
	const kb_bench_def *d = kb_registry_at(kb__builtin_registry(), i);

	return d ? &d->info : NULL;
}

KB_API const kb_bench_info *kb_bench_find(const char *name)
{
	const kb_bench_def *d = find(kb__builtin_registry(), name);

	return d ? &d->info : NULL;
}
