/*
 * The sweep module (src/sweep): row texts, the writer and its lock, strict
 * resume (every kept row verified, errors with their line), the definition
 * and the row encoding's round trip.
 */
#include <check.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernbench/json.h"
#include "kernbench/sweep.h"
#include "suites.h"
#include "sweep/sweep_impl.h"

/* synthetic, events=10, lps=1,2: two quick points. */
static kb_sweep *small_sweep(int data)
{
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *s = NULL;
	kb_error err;

	o.jobs = 2;
	o.data = data;
	ck_assert_int_eq(kb_sweep_create(&s, &o, &err), 0);
	ck_assert_int_eq(kb_sweep_add_bench(s, "synthetic", &err), 0);
	ck_assert_int_eq(kb_sweep_add_param(s, "events", "10", &err), 0);
	ck_assert_int_eq(kb_sweep_add_param(s, "lps", "1,2", &err), 0);
	return s;
}

typedef struct collect {
	kb_sweep *s;
	kb_sweep_format fmt;
	char *text[4];
	int rows;
} collect;

static int on_row(const kb_sweep_row *row, void *payload)
{
	collect *c = payload;
	kb_error err;

	ck_assert_int_eq(kb_sweep_format_row(&c->text[row->index], c->s, row, c->fmt, 0, &err), 0);
	c->rows++;
	return 0;
}

START_TEST(row_texts)
{
	kb_sweep *s = small_sweep(0);
	collect c = { s, KB_SWEEP_CSV, { NULL }, 0 };
	char *h = NULL;
	kb_error err;

	ck_assert_int_eq(kb_sweep_header(&h, s, KB_SWEEP_CSV, 0, &err), 0);
	/* The swept key events keeps its name; the figure it takes is
	 * result.events, so the header names each column once. */
	ck_assert_str_eq(h, "bench,events,lps,sim_time_ns,dispatch_per_tile_ns,commands,"
			 "result.events,wall_s,oplog_sha256,status,error\n");
	free(h);
	ck_assert_int_eq(kb_sweep_header(&h, s, KB_SWEEP_CSV, 1, &err), 0);
	ck_assert_ptr_nonnull(strstr(h, ",max_abs_err,max_rel_err,oplog_sha256,"));
	free(h);
	ck_assert_int_eq(kb_sweep_run(s, on_row, &c, &err), 0);
	ck_assert_int_eq(c.rows, 2);
	ck_assert_msg(strncmp(c.text[1], "synthetic,10,2,", 15) == 0, "%s", c.text[1]);
	ck_assert_ptr_nonnull(strstr(c.text[1], ",ok,\n"));
	free(c.text[0]);
	free(c.text[1]);
	c.fmt = KB_SWEEP_JSONL;
	c.rows = 0;
	ck_assert_int_eq(kb_sweep_run(s, on_row, &c, &err), 0);
	/* Typed: numbers as numbers. */
	ck_assert_msg(strncmp(c.text[0], "{\"bench\":\"synthetic\",\"keys\":{\"events\":10,\"lps\":1},"
			      "\"sim_time_ns\":", 60) == 0, "%s", c.text[0]);
	ck_assert_ptr_nonnull(strstr(c.text[0], "\"status\":\"ok\",\"error\":\"\"}\n"));
	free(c.text[0]);
	free(c.text[1]);
	ck_assert_str_eq(kb_sweep_fig_name(KB_SWEEP_FIG_MAX_REL_ERR), "max_rel_err");
	ck_assert_ptr_null(kb_sweep_fig_name(KB_SWEEP_N_FIGS));
	ck_assert_uint_eq(kb_sweep_n_figs(1), KB_SWEEP_N_FIGS);
	kb_sweep_destroy(s);
}
END_TEST

/* Parameters named like every other kind of column: each fixed column a
 * swept key takes is written result.NAME (again while that is taken too),
 * and only those (max_abs_err is a column of a data-mode sweep only). */
static int never_run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	(void)ctx;
	(void)res;
	(void)err;
	return KB_EINVAL;
}

static const kb_param_info clash_params[] = {
	{ "bench", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "status", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "max_abs_err", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "error", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "oplog_sha256", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "wall_s", KB_PARAM_INT, "1", "", NULL, 0, 9 },
	{ "result.wall_s", KB_PARAM_INT, "1", "", NULL, 0, 9 },
};

START_TEST(header_names_each_column_once)
{
	kb_bench_def d = KB_BENCH_DEF_INIT;
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	kb_registry *reg = NULL;
	kb_sweep *s = NULL;
	char *h = NULL;
	kb_error err;

	d.info.name = "clash";
	d.info.help = "parameters named like columns";
	d.info.params = clash_params;
	d.info.n_params = sizeof(clash_params) / sizeof(clash_params[0]);
	d.run = never_run;
	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_add(reg, &d, &err), 0);
	o.registry = reg;
	ck_assert_int_eq(kb_sweep_create(&s, &o, &err), 0);
	ck_assert_int_eq(kb_sweep_add_bench(s, "clash", &err), 0);
	for (size_t i = 0; i < d.info.n_params; i++)
		ck_assert_int_eq(kb_sweep_add_param(s, clash_params[i].name, "1", &err), 0);
	ck_assert_int_eq(kb_sweep_header(&h, s, KB_SWEEP_CSV, 0, &err), 0);
	ck_assert_str_eq(h, "result.bench,bench,status,max_abs_err,error,oplog_sha256,wall_s,"
			 "result.wall_s,sim_time_ns,dispatch_per_tile_ns,commands,events,"
			 "result.result.wall_s,result.oplog_sha256,result.status,result.error\n");
	free(h);
	ck_assert_int_eq(kb_sweep_header(&h, s, KB_SWEEP_CSV, 1, &err), 0);
	ck_assert_ptr_nonnull(strstr(h, ",result.result.wall_s,result.max_abs_err,max_rel_err,"));
	free(h);
	kb_sweep_destroy(s);
	kb_registry_destroy(reg);
}
END_TEST

/* The row encoding travels without loss: decoded and encoded again, it is
 * the same text (what a transport relies on). */
static int reencode(const kb_sweep_row *row, void *payload)
{
	collect *c = payload;

	c->text[1] = kb_sweep_row_to_json(c->s, row);
	c->rows++;
	return 0;
}

START_TEST(row_encoding_round_trip)
{
	kb_sweep *s = small_sweep(0);
	collect c = { s, KB_SWEEP_CSV, { NULL }, 0 };
	char *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_sweep_run_point(&t, s, 1, &err), 0);
	ck_assert_int_eq(kb_sweep_deliver_json(s, 1, t, reencode, &c, &err), 0);
	ck_assert_int_eq(c.rows, 1);
	ck_assert_str_eq(c.text[1], t);
	/* Another point's row is refused. */
	ck_assert_int_eq(kb_sweep_deliver_json(s, 0, t, reencode, &c, &err), KB_EPARSE);
	ck_assert_int_eq(kb_sweep_deliver_json(s, 1, "{\"index\":1} junk", reencode, &c, &err),
			 KB_EPARSE);
	free(t);
	free(c.text[1]);
	kb_sweep_destroy(s);
}
END_TEST

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = calloc(1, 1 << 16);
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

typedef struct wr {
	kb_sweep_writer *w;
	int rows;
} wr;

static int write_row(const kb_sweep_row *row, void *payload)
{
	wr *x = payload;
	kb_error err;

	ck_assert_int_eq(kb_sweep_writer_row(x->w, row, &err), 0);
	x->rows++;
	return 0;
}

/* Runs the sweep into path through a writer; returns the rows run. */
static int write_sweep(const char *path, kb_sweep_format fmt, int resume, kb_error *err, int *rc)
{
	kb_sweep_writer_options o = KB_SWEEP_WRITER_OPTIONS_INIT;
	kb_sweep *s = small_sweep(0);
	wr x = { NULL, 0 };

	o.format = fmt;
	o.resume = resume;
	o.keep_figures = 1;
	*rc = kb_sweep_writer_open(&x.w, s, path, &o, err);
	if (*rc == 0) {
		ck_assert_int_eq(kb_sweep_run(s, write_row, &x, err), 0);
		*rc = kb_sweep_writer_finish(x.w, err);
	}
	kb_sweep_writer_destroy(x.w);
	kb_sweep_destroy(s);
	return x.rows;
}

START_TEST(writer_resume_and_lock)
{
	char dir[] = "/tmp/kbsweepXXXXXX", path[128], meta[160];
	char *full, *again;
	kb_sweep_writer_options o = KB_SWEEP_WRITER_OPTIONS_INIT;
	kb_sweep_writer *w1 = NULL, *w2 = NULL;
	kb_sweep *s = small_sweep(0);
	kb_sweep_figures f = KB_SWEEP_FIGURES_INIT;
	kb_error err;
	int rc;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.csv", dir);
	snprintf(meta, sizeof(meta), "%s/s.csv.meta.json", dir);
	ck_assert_int_eq(write_sweep(path, KB_SWEEP_CSV, 0, &err, &rc), 2);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(access(meta, R_OK), 0);
	full = slurp(path);
	/* Resuming a complete file runs nothing and changes nothing. */
	ck_assert_int_eq(write_sweep(path, KB_SWEEP_CSV, 1, &err, &rc), 0);
	ck_assert_int_eq(rc, 0);
	again = slurp(path);
	ck_assert_str_eq(again, full);
	free(again);
	/* A cut last row is run again; the first row is kept as it was. */
	*strrchr(full, '\n') = '\0';
	full[strlen(full) - 20] = '\0';
	spit(path, full);
	ck_assert_int_eq(write_sweep(path, KB_SWEEP_CSV, 1, &err, &rc), 1);
	ck_assert_int_eq(rc, 0);
	again = slurp(path);
	ck_assert_int_eq(strncmp(again, full, strlen(full) - 100), 0);
	free(again);
	/* The lock: a second writer on the file is refused while one is open. */
	o.keep_figures = 1;
	o.resume = 1;
	ck_assert_int_eq(kb_sweep_writer_open(&w1, s, path, &o, &err), 0);
	ck_assert_uint_eq(kb_sweep_writer_resumed(w1, NULL), 2);
	ck_assert_int_eq(kb_sweep_writer_figures(w1, 1, &f, &err), 0);
	ck_assert(f.present && f.ok && f.fig[KB_SWEEP_FIG_EVENTS] > 0);
	ck_assert_int_eq(kb_sweep_writer_open(&w2, s, path, &o, &err), KB_ESTATE);
	ck_assert_ptr_nonnull(strstr(err.message, "another sweep is writing this file"));
	kb_sweep_writer_destroy(w1);
	ck_assert_int_eq(kb_sweep_writer_open(&w2, s, path, &o, &err), 0);
	kb_sweep_writer_destroy(w2);
	/* Another bench list recorded in s.csv.meta.json: refused, file untouched. */
	again = slurp(meta);
	{
		char *at = strstr(again, "\"benches\":[\"synthetic\"]"), edited[1 << 16];

		ck_assert_ptr_nonnull(at);
		snprintf(edited, sizeof(edited), "%.*s\"benches\":[\"gemm\"]%s", (int)(at - again),
			 again, at + strlen("\"benches\":[\"synthetic\"]"));
		spit(meta, edited);
	}
	free(again);
	again = slurp(path);
	ck_assert_int_eq(write_sweep(path, KB_SWEEP_CSV, 1, &err, &rc), 0);
	ck_assert_int_eq(rc, KB_ESTATE);
	ck_assert_ptr_nonnull(strstr(err.message, "records another sweep (benches"));
	free(full);
	full = slurp(path);
	ck_assert_str_eq(full, again);
	free(again);
	free(full);
	kb_sweep_destroy(s);
	unlink(meta);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* Parses text as a resume file of the small sweep; returns the status. */
static int parse(const char *text, size_t len, kb_sweep_format fmt, kb_error *err,
		 size_t *keep)
{
	kb_sweep *s = small_sweep(0);
	sweep_kept rows[2];
	int rc;

	memset(rows, 0, sizeof(rows));
	rc = kb__sweep_resume_parse(s, "f", text, len, fmt, 0, rows, keep, err);
	free(rows[0].text);
	free(rows[1].text);
	kb_sweep_destroy(s);
	return rc;
}

#define H "bench,events,lps,sim_time_ns,dispatch_per_tile_ns,commands,result.events,wall_s," \
	  "oplog_sha256,status,error\n"
#define SHA "1371382ab2394ac26a29ae611b9d2bb60f480084c7eb335f89a4946b46cc311c"
#define R1 "synthetic,10,1,96.783,,0,11,0.000067," SHA ",ok,\n"
#define R2 "synthetic,10,2,65.520,,0,12,0.000022," SHA ",ok,\n"

/* Each bad row is a named error with its line; nothing is dropped. */
static void bad_csv(const char *text, const char *frag)
{
	kb_error err;
	size_t keep = 0;

	ck_assert_int_eq(parse(text, strlen(text), KB_SWEEP_CSV, &err, &keep), KB_EPARSE);
	ck_assert_msg(strstr(err.message, frag), "'%s' lacks '%s'", err.message, frag);
}

START_TEST(resume_csv_strict)
{
	kb_error err;
	size_t keep = 0;
	char nul[] = H R1 "synthetic,10,2,65.520,,0,12,0.0000\0" "22," SHA ",ok,\n";

	ck_assert_int_eq(parse(H R1 R2, strlen(H R1 R2), KB_SWEEP_CSV, &err, &keep), 0);
	ck_assert_uint_eq(keep, strlen(H R1 R2));
	/* A cut last line (a kill mid-write) is left out, and only that. */
	ck_assert_int_eq(parse(H R1 "synthetic,10,2,65.5", strlen(H R1) + 19, KB_SWEEP_CSV, &err,
			       &keep), 0);
	ck_assert_uint_eq(keep, strlen(H R1));
	bad_csv(H "garbage\n" R1 R2, "f:2: malformed row (1 cells, expected 11)");
	bad_csv(H R1 "synthetic,10,1,96.783,,0,11,0.000067," SHA ",ok,\n", "f:3: a second row");
	bad_csv(H "synthetic,10,1,NaN,,0,11,0.000067," SHA ",ok,\n",
		"f:2: figure 'NaN' of an ok row is not a finite number");
	bad_csv(H "synthetic,10,1,96.783,,0,11,0.000067,xyz,ok,\n",
		"f:2: oplog_sha256 'xyz' is not 64 hexadecimal digits");
	bad_csv(H "synthetic,10,1,96.783,,0,11,0.000067," SHA ",okay,\n",
		"f:2: status 'okay' is neither 'ok' nor 'error'");
	bad_csv(H "synthetic,10,3,96.783,,0,11,0.000067," SHA ",ok,\n",
		"f:2: this row is not a point of this sweep");
	bad_csv(H "synthetic,10,1,96.7\"83,,0,11,0.000067," SHA ",ok,\n",
		"f:2: malformed row: a quote inside an unquoted cell");
	bad_csv(H R1 "\"synthetic,10,2\n" R2, "f:3: malformed row: a quoted cell is never closed");
	bad_csv(H "synthetic,10,1,,,,,,,error,\n", "f:2: an error row without its message");
	bad_csv("bench,x\n" R1, "f: its header does not match");
	ck_assert_int_eq(parse(nul, sizeof(nul) - 1, KB_SWEEP_CSV, &err, &keep), KB_EPARSE);
	ck_assert_ptr_nonnull(strstr(err.message, "f:3: malformed row: a NUL byte"));
	ck_assert_int_eq(err.line, 3);
	ck_assert_str_eq(err.source, "f");
}
END_TEST

#define J1 "{\"bench\":\"synthetic\",\"keys\":{\"events\":10,\"lps\":1},\"sim_time_ns\":96.783," \
	   "\"dispatch_per_tile_ns\":null,\"commands\":0,\"events\":11,\"wall_s\":0.000067," \
	   "\"oplog_sha256\":\"" SHA "\",\"status\":\"ok\",\"error\":\"\"}\n"

static void bad_jsonl(const char *text, const char *frag)
{
	kb_error err;
	size_t keep = 0;

	ck_assert_int_eq(parse(text, strlen(text), KB_SWEEP_JSONL, &err, &keep), KB_EPARSE);
	ck_assert_msg(strstr(err.message, frag), "'%s' lacks '%s'", err.message, frag);
}

START_TEST(resume_jsonl_strict)
{
	kb_error err;
	size_t keep = 0;
	char junk[sizeof(J1) + 8];

	ck_assert_int_eq(parse(J1, strlen(J1), KB_SWEEP_JSONL, &err, &keep), 0);
	ck_assert_uint_eq(keep, strlen(J1));
	snprintf(junk, sizeof(junk), "%.*s xx\n", (int)strlen(J1) - 1, J1);
	bad_jsonl(junk, "f:1: malformed row: end of file expected");
	bad_jsonl(J1 J1, "f:2: a second row");
	bad_jsonl("{\"bench\":\"synthetic\"}\n", "f:1: malformed row: not a row object");
	bad_jsonl("{\"bench\":\"synthetic\",\"keys\":{\"events\":10,\"lps\":1.0},\"sim_time_ns\":96.783,"
		  "\"dispatch_per_tile_ns\":null,\"commands\":0,\"events\":11,\"wall_s\":0.000067,"
		  "\"oplog_sha256\":\"" SHA "\",\"status\":\"ok\",\"error\":\"\"}\n",
		  "f:1: this row is not a point of this sweep");
	bad_jsonl("{\"bench\":\"synthetic\",\"keys\":{\"events\":10,\"lps\":1},\"sim_time_ns\":96.783,"
		  "\"dispatch_per_tile_ns\":null,\"commands\":0,\"events\":11,\"wall_s\":0.000067,"
		  "\"oplog_sha256\":\"" SHA "\",\"status\":\"okay\",\"error\":\"\"}\n",
		  "f:1: status 'okay'");
}
END_TEST

START_TEST(definition_hash)
{
	kb_sweep *a = small_sweep(0), *b = small_sweep(0);
	kb_topology *t = NULL;
	char ha[65], hb[65], *ja = NULL, *jb = NULL;
	kb_error err;

	ck_assert_int_eq(kb_sweep_definition_sha256(a, ha, &err), 0);
	ck_assert_int_eq(kb_sweep_definition_sha256(b, hb, &err), 0);
	ck_assert_str_eq(ha, hb);
	ck_assert_int_eq(kb_topology_default(&t, &err), 0);
	ck_assert_int_eq(kb_topology_set(t, "clock_freq_ghz", "2", &err), 0);
	ck_assert_int_eq(kb_sweep_set_topology(b, t, &err), 0);
	ck_assert_int_eq(kb_sweep_definition_sha256(b, hb, &err), 0);
	ck_assert_str_ne(ha, hb);
	ck_assert_int_eq(kb_sweep_definition_json(&ja, a, &err), 0);
	ck_assert_int_eq(kb_sweep_definition_json(&jb, b, &err), 0);
	ck_assert_int_eq(kb_sweep_definition_compare(ja, jb, &err), KB_EINVAL);
	ck_assert_msg(strncmp(err.message, "topology_sha256: ", 17) == 0, "%s", err.message);
	ck_assert_int_eq(kb_sweep_definition_compare(ja, ja, &err), 0);
	free(ja);
	free(jb);
	kb_topology_destroy(t);
	kb_sweep_destroy(a);
	kb_sweep_destroy(b);
}
END_TEST


/* ---- a transport in one process: a serving thread behind a queue ---- */

typedef struct loop {
	pthread_mutex_t mu;
	size_t todo[64], n_todo, todo_head;   /* sent, not yet taken by the server */
	size_t done_idx[64];
	char *done_json[64];
	size_t n_done, done_head;             /* rows back, not yet received */
	int stop;                             /* no more points */
	size_t in_flight;
	const kb_sweep *server_sweep;
} loop;

static size_t lo_room(void *p)
{
	loop *l = p;
	size_t r;

	pthread_mutex_lock(&l->mu);
	r = l->in_flight < 2 ? 2 - l->in_flight : 0;
	pthread_mutex_unlock(&l->mu);
	return r;
}

static int lo_send(void *p, size_t index, kb_error *err)
{
	loop *l = p;

	(void)err;
	pthread_mutex_lock(&l->mu);
	l->todo[(l->todo_head + l->n_todo++) % 64] = index;
	l->in_flight++;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

static int lo_receive(void *p, long wait_ns, size_t *index, char **json, kb_error *err)
{
	loop *l = p;
	int got = 0;

	(void)err;
	pthread_mutex_lock(&l->mu);
	if (l->n_done) {
		*index = l->done_idx[l->done_head % 64];
		*json = l->done_json[l->done_head++ % 64];
		l->n_done--;
		l->in_flight--;
		got = 1;
	}
	pthread_mutex_unlock(&l->mu);
	if (!got)
		nanosleep(&(struct timespec){ 0, wait_ns }, NULL);
	return got;
}

static int lo_next(void *p, long wait_ns, size_t *index)
{
	loop *l = p;
	int r = 0;

	pthread_mutex_lock(&l->mu);
	if (l->n_todo) {
		*index = l->todo[l->todo_head++ % 64];
		l->n_todo--;
		r = 1;
	} else if (l->stop) {
		r = -1;
	}
	pthread_mutex_unlock(&l->mu);
	if (r == 0)
		nanosleep(&(struct timespec){ 0, wait_ns }, NULL);
	return r;
}

static int lo_done(void *p, size_t index, char *json)
{
	loop *l = p;

	pthread_mutex_lock(&l->mu);
	l->done_idx[(l->done_head + l->n_done) % 64] = index;
	l->done_json[(l->done_head + l->n_done++) % 64] = json;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

static void *server(void *p)
{
	loop *l = p;
	kb_sweep_source src = { KB_SWEEP_TRANSPORT_VERSION, lo_next, lo_done, l };
	kb_error err;

	ck_assert_int_eq(kb_sweep_serve(l->server_sweep, &src, &err), 0);
	return NULL;
}

/* Rows of a transport are the rows kb_sweep_run gives, in order (wall_s aside). */
START_TEST(transport_loopback)
{
	kb_sweep *s = small_sweep(0), *far = small_sweep(0), *ref = small_sweep(0);
	collect a = { s, KB_SWEEP_CSV, { NULL }, 0 }, b = { ref, KB_SWEEP_CSV, { NULL }, 0 };
	loop l;
	kb_sweep_transport t = { KB_SWEEP_TRANSPORT_VERSION, lo_room, lo_send, lo_receive, &l, 2 };
	pthread_t th;
	kb_error err;

	memset(&l, 0, sizeof(l));
	pthread_mutex_init(&l.mu, NULL);
	l.server_sweep = far;
	ck_assert_int_eq(pthread_create(&th, NULL, server, &l), 0);
	ck_assert_int_eq(kb_sweep_run_transport(s, &t, on_row, &a, &err), 0);
	pthread_mutex_lock(&l.mu);
	l.stop = 1;
	pthread_mutex_unlock(&l.mu);
	pthread_join(th, NULL);
	ck_assert_int_eq(kb_sweep_run(ref, on_row, &b, &err), 0);
	ck_assert_int_eq(a.rows, 2);
	for (int i = 0; i < 2; i++) {
		/* Same up to wall_s (the 8th cell). */
		char *x = strchr(strchr(a.text[i], ',') + 1, ','), *y;

		for (int k = 0; k < 5; k++)
			x = strchr(x + 1, ',');
		y = b.text[i] + (x - a.text[i]);
		ck_assert_int_eq(strncmp(a.text[i], b.text[i], (size_t)(x - a.text[i])), 0);
		ck_assert_str_eq(strchr(x + 1, ','), strchr(y + 1, ','));
		free(a.text[i]);
		free(b.text[i]);
	}
	pthread_mutex_destroy(&l.mu);
	kb_sweep_destroy(s);
	kb_sweep_destroy(far);
	kb_sweep_destroy(ref);
}
END_TEST

static size_t bad_room(void *p)
{
	(void)p;
	return 1;
}

static int bad_send(void *p, size_t index, kb_error *err)
{
	(void)p;
	snprintf(err->message, sizeof(err->message), "rank 9 failed: point %zu", index);
	err->code = KB_EIO;
	return KB_EIO;
}

static int bad_receive(void *p, long wait_ns, size_t *index, char **json, kb_error *err)
{
	(void)p, (void)index, (void)json, (void)err;
	nanosleep(&(struct timespec){ 0, wait_ns }, NULL);
	return 0;
}

START_TEST(transport_failure)
{
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *s = NULL;
	collect a = { NULL, KB_SWEEP_CSV, { NULL }, 0 };
	kb_sweep_transport t = { KB_SWEEP_TRANSPORT_VERSION, bad_room, bad_send, bad_receive, NULL, 1 };
	kb_error err;

	o.jobs = 1;
	ck_assert_int_eq(kb_sweep_create(&s, &o, &err), 0);
	ck_assert_int_eq(kb_sweep_add_bench(s, "synthetic", &err), 0);
	/* The first point keeps the one local worker busy, so the transport
	 * surely gets the second. */
	ck_assert_int_eq(kb_sweep_add_param(s, "events", "2000000,20,30,40", &err), 0);
	a.s = s;
	ck_assert_int_eq(kb_sweep_run_transport(s, &t, on_row, &a, &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "rank 9 failed"));
	/* The rows delivered are a prefix of the order. */
	for (int i = 0; i < a.rows; i++)
		ck_assert_ptr_nonnull(a.text[i]);
	for (int i = 0; i < 4; i++)
		free(a.text[i]);
	kb_sweep_destroy(s);
}
END_TEST

Suite *sweep_suite(void)
{
	Suite *s = suite_create("sweep");
	TCase *tc = tcase_create("sweep");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, row_texts);
	tcase_add_test(tc, row_encoding_round_trip);
	tcase_add_test(tc, header_names_each_column_once);
	tcase_add_test(tc, writer_resume_and_lock);
	tcase_add_test(tc, resume_csv_strict);
	tcase_add_test(tc, resume_jsonl_strict);
	tcase_add_test(tc, definition_hash);
	tcase_add_test(tc, transport_loopback);
	tcase_add_test(tc, transport_failure);
	suite_add_tcase(s, tc);
	return s;
}
