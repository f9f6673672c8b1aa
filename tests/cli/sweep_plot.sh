#!/bin/bash
# --plot writes valid SVG (XML) with one polyline per panel and series.
set -u
. "$(dirname "$0")/lib.sh"

"$KB" sweep synthetic --param lps=1,2,4,8 --param events=100,200 --param seed=3 \
	--quiet --out "$TMP/p.csv" --plot "$TMP/p.svg" || fail "sweep --plot exited $?"
[ -s "$TMP/p.svg" ] || fail "no plot written"
head -c 200 "$TMP/p.svg" | grep -q '<svg' || fail "not an SVG"
# synthetic has no tiles: 3 panels (sim_time_ns, commands, events; wall_s,
# host noise, only when asked for), 2 series (events=100, events=200).
n=$(grep -c '<polyline' "$TMP/p.svg")
[ "$n" -eq 6 ] || fail "expected 6 polylines, found $n"
grep -q '>wall_s' "$TMP/p.svg" && fail "a wall_s panel without --plot-figures"
# --plot-figures picks the panels.
"$KB" sweep synthetic --param lps=1,2 --param events=100 --quiet \
	--plot "$TMP/f.svg" --plot-figures events,wall_s >/dev/null || fail "--plot-figures exited $?"
[ "$(grep -c '<polyline' "$TMP/f.svg")" -eq 2 ] || fail "--plot-figures events,wall_s: not 2 panels"
grep -q '>wall_s' "$TMP/f.svg" || fail "no wall_s panel when asked for"
grep -q '>sim_time_ns' "$TMP/f.svg" && fail "a sim_time_ns panel not asked for"
grep -q '>lps<' "$TMP/f.svg" || fail "lps = 1, 2 (2x) is not a linear x axis"
"$KB" sweep synthetic --param lps=1,2 --quiet --plot "$TMP/g.svg" --plot-figures evnts \
	>/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "an unknown figure is not a usage error"
grep -qF "did you mean 'events'" "$TMP/err" || fail "no suggestion for an unknown figure"
grep -q 'events=200' "$TMP/p.svg" || fail "the legend lacks a series"
# lps = 1..8 spans 8x: a log x axis.
grep -q '>lps (log scale)<' "$TMP/p.svg" || fail "the x axis is not labelled as log scale"
grep -q '>sim_time_ns' "$TMP/p.svg" || fail "no sim_time_ns panel"
# --plot-log overrides the automatic rule both ways, and checks its value.
"$KB" sweep synthetic --param lps=1,2 --param events=100 --quiet --plot "$TMP/lx.svg" \
	--plot-log xy >/dev/null || fail "--plot-log xy exited $?"
grep -q '>lps (log scale)<' "$TMP/lx.svg" || fail "--plot-log xy: the x axis is not log"
grep -q '>events (log scale)<' "$TMP/lx.svg" || fail "--plot-log xy: a y axis is not log"
"$KB" sweep synthetic --param lps=1,2,4,8 --param events=100 --quiet --plot "$TMP/ln.svg" \
	--plot-log none >/dev/null || fail "--plot-log none exited $?"
grep -q '(log scale)' "$TMP/ln.svg" && fail "--plot-log none: a log axis"
grep -q '>lps<' "$TMP/ln.svg" || fail "--plot-log none: no linear lps axis"
"$KB" sweep synthetic --param lps=1,2 --quiet --plot "$TMP/lb.svg" --plot-log z \
	>/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "--plot-log z is not a usage error"
"$KB" sweep synthetic --param lps=1,2 --quiet --plot-log x >/dev/null 2>&1
[ $? -eq 2 ] || fail "--plot-log without --plot is not a usage error"
if have_python; then
	python3 -c 'import xml.dom.minidom,sys; d = xml.dom.minidom.parse(sys.argv[1]); assert len(d.getElementsByTagName("polyline")) == 6' \
		"$TMP/p.svg" || fail "the SVG is not valid XML"
fi
# Non-numeric x values, a failing point, and text that needs escaping.
"$KB" sweep synthetic --param 'seed=1,<2&3>' --param events=100 --quiet \
	--plot "$TMP/q.svg" >/dev/null
[ $? -eq 1 ] || fail "the failing point did not fail"
if have_python; then
	python3 -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' "$TMP/q.svg" ||
		fail "the SVG with escaped text is not valid XML"
fi
echo PASS
