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

json_t *kb__provenance(const kb_provenance_options *opt, json_t *params, kb_error *err)
{
	kb_provenance_options dflt = KB_PROVENANCE_OPTIONS_INIT;
	kb_topology *own = NULL;
	json_t *o, *argv = json_null();
	char hex[65], host[256] = "", date[32] = "";
	time_t now = time(NULL);
	int rc;

	if (!opt)
		opt = &dflt;
	if (!opt->topology && (rc = kb_topology_default(&own, err))) {
		json_decref(params);
		return NULL;
	}
	rc = kb_topology_sha256(opt->topology ? opt->topology : own, hex, err);
	kb_topology_destroy(own);
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
	if (opt->argc > 0 && opt->argv) {
		argv = json_array();
		for (int i = 0; i < opt->argc; i++)
			json_array_append_new(argv, json_string(opt->argv[i] ? opt->argv[i] : ""));
	}
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	utc_text(now, date, sizeof(date));
	o = json_object();
	json_object_set_new(o, "kernbench_version", json_string(kb_version()));
	json_object_set_new(o, "git_revision",
			    *kb_git_revision() ? json_string(kb_git_revision()) : json_null());
	json_object_set_new(o, "topology_sha256", json_string(hex));
	json_object_set_new(o, "params", params ? params : json_object());
	json_object_set_new(o, "command_line", argv);
	json_object_set_new(o, "threads", json_integer(opt->threads));
	json_object_set_new(o, "host", json_string(host));
	json_object_set_new(o, "date_utc", json_string(date));
	if (!o)
		kb__err(err, KB_ENOMEM, "out of memory");
	return o;
}

KB_API int kb_provenance_json(char **out, const kb_provenance_options *opt, kb_error *err)
{
	json_t *o;

	kb_error_clear(err);
	if (!out)
		return kb__err(err, KB_EINVAL, "kb_provenance_json: out is NULL");
	*out = NULL;
	o = kb__provenance(opt, NULL, err);
	if (!o)
		return err && err->code ? err->code : KB_ENOMEM;
	*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return *out ? KB_OK : kb__err(err, KB_ENOMEM, "out of memory");
}
