/* kernbench run: one bench, a human summary or the result as one JSON line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/bench.h"
#include "kernbench/registry.h"
#include "kernbench/topology.h"

enum {
	O_PARAM, O_SET, O_TOPOLOGY, O_THREADS, O_DATA, O_OPLOG, O_TRACE, O_DUMP, O_JSON, O_HELP,
	N_OPTS
};

static const cli_opt opts[N_OPTS] = {
	[O_PARAM] = { "param", 0, CLI_LIST },
	[O_SET] = { "set", 0, CLI_LIST },
	[O_TOPOLOGY] = { "topology", 0, CLI_VALUE },
	[O_THREADS] = { "threads", 0, CLI_VALUE },
	[O_DATA] = { "data", 0, CLI_FLAG },
	[O_OPLOG] = { "op-log", 0, CLI_VALUE },
	[O_TRACE] = { "trace", 0, CLI_VALUE },
	[O_DUMP] = { "dump", 0, CLI_VALUE },
	[O_JSON] = { "json", 0, CLI_FLAG },
	[O_HELP] = { "help", 'h', CLI_FLAG },
};

/* Checks the bench and every --param name (usage errors) and builds the list. */
static int build_params(const cli_args *a, const kb_bench_info **bench, kb_params **out)
{
	const cli_optval *pv = &a->vals[O_PARAM];
	kb_error err;
	size_t i;
	int rc;

	if (a->n_pos == 0)
		return cli_usage("run", "missing BENCH");
	if (a->n_pos > 1)
		return cli_usage("run", "one bench only (got '%s' too)", a->pos[1]);
	*bench = cli_bench_find(a->pos[0]);
	if (!*bench) {
		char hint[96];

		return cli_usage("run", "unknown bench '%s'%s (see 'kernbench list')", a->pos[0],
				 cli_hint_bench(a->pos[0], hint, sizeof(hint)));
	}
	if ((rc = kb_params_create(out, &err)))
		return cli_kb_error(&err, rc);
	for (i = 0; i < pv->n_list; i++) {
		const char *value;
		char *name;

		if ((rc = cli_split_assignment(pv->list[i], &name, &value)))
			return rc > 0 ? rc : cli_usage("run", "--param '%s': expected NAME=VALUE", pv->list[i]);
		rc = cli_find_param(*bench, name) ? kb_params_set(*out, name, value, &err) : -100;
		if (rc == -100) {
			char hint[96];

			rc = cli_usage("run", "bench '%s' has no parameter '%s'%s (see 'kernbench list')",
				       (*bench)->name, name, cli_hint_param(*bench, name, hint, sizeof(hint)));
		}
		else if (rc)
			rc = cli_kb_error(&err, rc);
		free(name);
		if (rc)
			return rc;
	}
	return 0;
}

static int build_options(const cli_args *a, kb_run_options *o)
{
	long threads = KB_THREADS_AUTO;

	if (a->vals[O_THREADS].seen && strcmp(a->vals[O_THREADS].value, "auto") != 0 &&
	    cli_parse_long(a->vals[O_THREADS].value, 0, 4096, &threads))
		return cli_usage("run", "--threads '%s': expected auto or a whole number from 0 to 4096",
				 a->vals[O_THREADS].value);
	if (a->vals[O_DUMP].seen && !a->vals[O_DATA].seen)
		return cli_usage("run", "--dump needs --data");
	o->threads = (int)threads;
	o->data = a->vals[O_DATA].seen > 0;
	o->oplog_path = a->vals[O_OPLOG].value;
	o->trace_path = a->vals[O_TRACE].value;
	o->dump_dir = a->vals[O_DUMP].value;
	o->argc = cli_argc;
	o->argv = cli_argv;
	return 0;
}

static void print_summary(const kb_result *r)
{
	char ns[32], us[32];

	cli_ps_to_ns((unsigned long long)r->sim_time_ps, ns, sizeof(ns));
	snprintf(us, sizeof(us), "%llu.%06llu", (unsigned long long)(r->sim_time_ps / 1000000),
		 (unsigned long long)(r->sim_time_ps % 1000000));
	printf("bench          %s\n", r->bench);
	printf("params         %s\n", r->params_json ? r->params_json : "{}");
	if (r->threads == KB_THREADS_AUTO)
		printf("threads        auto (%u workers)\n", r->workers);
	else
		printf("threads        %d (%u workers)\n", r->threads, r->workers);
	printf("sim time       %s ns (%s \xc2\xb5s)\n", ns, us);
	printf("events         %llu\n", (unsigned long long)r->events);
	printf("commands       %llu\n", (unsigned long long)r->commands);
	if (r->tiles && isfinite(r->dispatch_per_tile_ns))
		printf("dispatch/tile  %.3f ns in the tile loop, %.3f ns with the whole kernel (%llu tiles)\n",
		       r->dispatch_per_tile_ns, r->dispatch_kernel_per_tile_ns,
		       (unsigned long long)r->tiles);
	printf("wall time      %.6f s\n", r->wall_s);
	printf("events/s       %.0f\n", r->events_per_s);
	printf("op_log sha256  %s\n", r->oplog_sha256);
	if (r->data && isfinite(r->max_abs_err))
		printf("max abs err    %.6g\n", r->max_abs_err);
	if (r->data && isfinite(r->max_rel_err))
		printf("max rel err    %.6g\n", r->max_rel_err);
}

static int print_result(const kb_result *r, int json)
{
	char *text = NULL;

	if (json) {
		text = kb_result_to_json(r);
		if (!text)
			return cli_error("out of memory");
		printf("%s\n", text);
		kb_free(text);
	} else {
		print_summary(r);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return cli_error("could not write the result to standard output");
	return CLI_OK;
}

/* A long run on a terminal shows how far it got (issue 19): the op_log
 * callback sees each record in time order as the run goes, so it gives the
 * simulated time reached without a hook of its own in the library. */
typedef struct run_progress {
	cli_progress line;
	uint64_t sim_ps, records;
} run_progress;

static int on_record(const kb_oplog_record *rec, void *payload)
{
	run_progress *p = payload;
	char ns[32];

	p->records++;
	if (rec->t1_ps > p->sim_ps)
		p->sim_ps = rec->t1_ps;
	/* The clock only every 256 records: a record can be a few ns of work. */
	if ((p->records & 255) != 0 || !cli_progress_due(&p->line))
		return 0;
	cli_ps_to_ns((unsigned long long)p->sim_ps, ns, sizeof(ns));
	cli_progress_show(&p->line, "simulated %s ns, %llu op_log records, elapsed %.1fs", ns,
			  (unsigned long long)p->records, cli_now() - p->line.t0);
	return 0;
}

int cli_cmd_run(int argc, char **argv)
{
	run_progress prog;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	const kb_bench_info *bench = NULL;
	kb_params *params = NULL;
	kb_topology *topo = NULL;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	cli_args a;
	int rc, ran = 0;

	rc = cli_parse("run", opts, N_OPTS, argc, argv, &a);
	if (rc)
		goto done;
	if (a.vals[O_HELP].seen) {
		rc = cli_print_help("run");
		goto done;
	}
	if ((rc = build_params(&a, &bench, &params)) || (rc = build_options(&a, &o)))
		goto done;
	rc = cli_load_topology("run", a.vals[O_TOPOLOGY].value, a.vals[O_SET].list,
			       a.vals[O_SET].n_list, &topo);
	if (rc)
		goto done;
	memset(&prog, 0, sizeof(prog));
	cli_progress_start(&prog.line, 1);
	if (prog.line.on) {
		o.on_record = on_record;
		o.payload = &prog;
	}
	rc = kb_registry_run(cli_registry, bench->name, params, topo, &o, &res, &err);
	cli_progress_clear(&prog.line);
	if (rc) {
		rc = cli_kb_error(&err, rc);
		goto done;
	}
	ran = 1;
	rc = print_result(&res, a.vals[O_JSON].seen > 0);
done:
	if (ran)
		kb_result_clear(&res);
	kb_topology_destroy(topo);
	kb_params_destroy(params);
	cli_args_free(&a);
	return rc;
}
