/*
 * Provenance: where a result came from (version, git revision, topology
 * hash, parameters, command line, threads, host, UTC date), recorded beside
 * results so that a run can be reproduced later. The op_log never carries
 * it: the op_log must stay byte-identical across machines and days.
 */
#include "bench/provenance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "bench/json_text.h"

/*
 * t as "YYYY-MM-DDTHH:MM:SSZ", what gmtime_r and strftime gave, by
 * arithmetic: glibc's gmtime_r loads the local time zone first
 * (/etc/localtime: seven system calls for every run, issue 13). Days to
 * a civil date by the proleptic Gregorian rules (H. Hinnant's
 * civil_from_days), with March as the first month of the year.
 */
static void utc_text(time_t t, char *buf, size_t n)
{
	long long s = (long long)t, days = s / 86400, sod = s % 86400;
	long long era, doe, yoe, doy, mp, y;
	int m, d;

	if (sod < 0) {
		sod += 86400;
		days--;
	}
	days += 719468; /* 0000-03-01 to 1970-01-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = (int)(doy - (153 * mp + 2) / 5 + 1);
	m = (int)(mp < 10 ? mp + 3 : mp - 9);
	y = yoe + era * 400 + (m <= 2);
	snprintf(buf, n, "%04lld-%02d-%02dT%02lld:%02lld:%02lldZ", y, m, d, sod / 3600,
		 sod / 60 % 60, sod % 60);
}

/* The hash of opt's topology (the default's when it has none). */
static int topology_hex(const kb_provenance_options *opt, char hex[65], kb_error *err)
{
	kb_topology *own = NULL;
	int rc;

	if (!opt->topology && (rc = kb_topology_default(&own, err)))
		return rc;
	rc = kb_topology_sha256(opt->topology ? opt->topology : own, hex, err);
	kb_topology_destroy(own);
	return rc;
}

/* What a provenance says beside the caller's options: the topology's
 * hash, the host's name ("" when it has none to give), the date. */
typedef struct facts {
	char hex[65], host[256], date[32];
} facts;

static int gather(const kb_provenance_options *opt, facts *f, kb_error *err)
{
	int rc = topology_hex(opt, f->hex, err);

	if (rc)
		return rc;
	if (gethostname(f->host, sizeof(f->host) - 1) != 0)
		f->host[0] = '\0';
	f->host[sizeof(f->host) - 1] = '\0';
	utc_text(time(NULL), f->date, sizeof(f->date));
	return KB_OK;
}

json_t *kb__provenance(const kb_provenance_options *opt, json_t *params, kb_error *err)
{
	kb_provenance_options dflt = KB_PROVENANCE_OPTIONS_INIT;
	json_t *o, *host, *argv = json_null();
	facts f;
	int rc, bad = 0;

	if (!opt)
		opt = &dflt;
	rc = gather(opt, &f, err);
	if (rc) {
		json_decref(params);
		return NULL;
	}
	if (!params && opt->params_json) {
		json_error_t je;

		params = json_loads(opt->params_json, JSON_DECODE_ANY, &je);
		if (!params) {
			kb__err(err, KB_EPARSE, "provenance params: %s", je.text);
			return NULL;
		}
	}
	/* Each set and append fails (-1) without memory, for the value or
	 * for the object's room: one missed would drop its key silently. An
	 * argument or a host name that is not UTF-8 has no JSON string
	 * (json_string's NULL) and is left out, as it always was. */
	if (opt->argc > 0 && opt->argv) {
		argv = json_array();
		bad |= !argv;
		for (int i = 0; argv && i < opt->argc; i++) {
			json_t *a = json_string(opt->argv[i] ? opt->argv[i] : "");

			if (a)
				bad |= json_array_append_new(argv, a);
		}
	}
	o = json_object();
	bad |= json_object_set_new(o, "kernbench_version", json_string(kb_version()));
	bad |= json_object_set_new(o, "git_revision",
				   *kb_git_revision() ? json_string(kb_git_revision()) : json_null());
	bad |= json_object_set_new(o, "topology_sha256", json_string(f.hex));
	bad |= json_object_set_new(o, "params", params ? params : json_object());
	bad |= json_object_set_new(o, "command_line", argv);
	bad |= json_object_set_new(o, "threads", json_integer(opt->threads));
	if ((host = json_string(f.host)))
		bad |= json_object_set_new(o, "host", host);
	bad |= json_object_set_new(o, "date_utc", json_string(f.date));
	if (bad) {
		json_decref(o);
		kb__err(err, KB_ENOMEM, "out of memory writing the provenance");
		return NULL;
	}
	return o;
}

/*
 * kb__provenance's object as json_dumps writes it compact, written
 * directly (json_text.h): the same members in the same order, the params
 * text copied as its parse would be dumped (precision 17, jansson's
 * default). Strings that are not plain ASCII, and params texts the
 * writer does not reproduce, leave *out NULL for jansson's path.
 */
int kb__provenance_text(const kb_provenance_options *opt, char **out, kb_error *err)
{
	kb_provenance_options dflt = KB_PROVENANCE_OPTIONS_INIT;
	kb__jtext b = KB__JTEXT_INIT;
	facts f;
	int rc;

	*out = NULL;
	if (!opt)
		opt = &dflt;
	rc = gather(opt, &f, err);
	if (rc)
		return rc;
	kb__jt_put(&b, "{", 1);
	kb__jt_key(&b, "kernbench_version", true);
	kb__jt_string(&b, kb_version());
	kb__jt_key(&b, "git_revision", false);
	if (*kb_git_revision())
		kb__jt_string(&b, kb_git_revision());
	else
		kb__jt_put(&b, "null", 4);
	kb__jt_key(&b, "topology_sha256", false);
	kb__jt_string(&b, f.hex);
	kb__jt_key(&b, "params", false);
	if (opt->params_json)
		kb__jt_copy(&b, opt->params_json, 17);
	else
		kb__jt_put(&b, "{}", 2);
	kb__jt_key(&b, "command_line", false);
	if (opt->argc > 0 && opt->argv) {
		kb__jt_put(&b, "[", 1);
		for (int i = 0; i < opt->argc; i++) {
			if (i)
				kb__jt_put(&b, ",", 1);
			kb__jt_string(&b, opt->argv[i] ? opt->argv[i] : "");
		}
		kb__jt_put(&b, "]", 1);
	} else {
		kb__jt_put(&b, "null", 4);
	}
	kb__jt_key(&b, "threads", false);
	kb__jt_int(&b, opt->threads);
	kb__jt_key(&b, "host", false);
	kb__jt_string(&b, f.host);
	kb__jt_key(&b, "date_utc", false);
	kb__jt_string(&b, f.date);
	kb__jt_put(&b, "}", 1);
	*out = kb__jt_finish(&b);
	return KB_OK;
}

/* The provenance's text by jansson's path (kb__provenance_text's
 * fallback). */
int kb__provenance_dump(const kb_provenance_options *opt, char **out, kb_error *err)
{
	json_t *o;

	*out = NULL;
	o = kb__provenance(opt, NULL, err);
	if (!o)
		return err && err->code ? err->code : KB_ENOMEM;
	*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return *out ? KB_OK : kb__err(err, KB_ENOMEM, "out of memory");
}

KB_API int kb_provenance_json(char **out, const kb_provenance_options *opt, kb_error *err)
{
	int rc;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_provenance_json: out is NULL");
	rc = kb__provenance_text(opt, out, err);
	return rc || *out ? rc : kb__provenance_dump(opt, out, err);
}
