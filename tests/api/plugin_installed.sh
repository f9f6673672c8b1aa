#!/bin/sh
# The example plugin of an installed kernbench, built against the installed
# headers and library (pkg-config kernbench) and run, in data mode, by the
# installed command:
#   plugin_installed.sh DOCDIR KERNBENCH WORKDIR
# DOCDIR: the installed $(docdir); KERNBENCH: the installed command;
# WORKDIR: a folder for the plugin and its output. pkg-config must find the
# installed kernbench.pc (the caller sets PKG_CONFIG_PATH and, for a DESTDIR
# install, PKG_CONFIG_SYSROOT_DIR). Used by tests/api/install.sh (make
# check, a DESTDIR install) and by make installcheck (the configured
# prefix: distcheck's too). Exit 0, 1 with the reason, 77 without
# pkg-config or a C compiler.
set -u
doc=$1 kb=$2 work=$3
CC=${CC:-cc}

command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config not found"; exit 77; }
command -v "${CC%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 77; }
src=$doc/examples/plugin/splitk_gemm.c
[ -f "$src" ] || { echo "FAIL: $src not installed"; exit 1; }
[ -x "$kb" ] || { echo "FAIL: no kernbench command at $kb"; exit 1; }
flags=$(pkg-config --cflags --libs kernbench) || { echo "FAIL: pkg-config --cflags --libs kernbench"; exit 1; }
# -std=c11 -pedantic: the plugin uses nothing but the public API. A
# sanitizer build installs an instrumented library: link the runtime the
# same way (KB_SAN_FLAGS is empty otherwise).
# shellcheck disable=SC2086 # flags are words
if ! $CC -std=c11 -pedantic -Wall -Wextra -Werror ${KB_SAN_FLAGS:-} -shared -fPIC \
	-o "$work/libsplitk.so" "$src" $flags -lm; then
	echo "FAIL: the example plugin does not build against the installed library ($flags)"
	exit 1
fi
if ! "$kb" run splitk_gemm --param K=128 --data --json --plugin "$work/libsplitk.so" \
	>"$work/splitk.json"; then
	echo "FAIL: the installed kernbench does not run the installed example plugin"
	exit 1
fi
if ! grep -q '"bench":"splitk_gemm"' "$work/splitk.json" ||
	! grep -q '"max_abs_err":[0-9]' "$work/splitk.json"; then
	echo "FAIL: the plugin's run has no data-mode check: $(cat "$work/splitk.json")"
	exit 1
fi
if ! KERNBENCH_PLUGIN_PATH=$work "$kb" sweep splitk_gemm --param splits=1,2 --param K=64 -j 2 \
	--quiet --out "$work/splitk.csv" || [ "$(wc -l <"$work/splitk.csv")" -ne 3 ]; then
	echo "FAIL: the installed kernbench does not sweep the plugin through KERNBENCH_PLUGIN_PATH"
	exit 1
fi
echo "PASS: the example plugin built with pkg-config ($flags), run and swept by $kb"
