#!/bin/sh
# Runs one Check suite, named by the marker file automake passes
# (tests/suites/NAME.suite), so each suite is its own test with its own log.
name=$(basename "$1" .suite)
# Run by hand, the TSAN_OPTIONS tests/local.am gives every test under make.
: "${TSAN_OPTIONS:=suppressions=${abs_top_srcdir:-.}/tests/tsan.supp halt_on_error=1}"
export TSAN_OPTIONS
exec "${abs_top_builddir:-.}/tests/check_all" "$name"
