#!/bin/sh
# Runs one Check suite, named by the marker file automake passes
# (tests/suites/NAME.suite), so each suite is its own test with its own log.
name=$(basename "$1" .suite)
exec "${abs_top_builddir:-.}/tests/check_all" "$name"
