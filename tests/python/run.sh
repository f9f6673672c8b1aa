#!/bin/sh
# The Python package's tests (tests/python/test_kernbench.py) with
# python3 -m unittest, against the library of this build tree. Skips (77)
# with the reason when no python3 was found or the build is instrumented
# (a sanitizer runtime cannot be loaded into an uninstrumented python3).
: "${abs_top_builddir:?}" "${abs_top_srcdir:?}"
py=${PYTHON:-python3}
if [ "$py" = ":" ] || ! command -v "$py" >/dev/null 2>&1; then
	echo "SKIP: no python3 found (configure looked for one): the Python package is not tested"
	exit 77
fi
if [ -n "${KB_SAN_FLAGS:-}" ]; then
	echo "SKIP: sanitizer build ($KB_SAN_FLAGS): python3 cannot load the instrumented library"
	exit 77
fi
lib="$abs_top_builddir/.libs/libkernbench.so"
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib (static-only build?)"; exit 77; }
KERNBENCH_LIBRARY=$lib
KB_TWIN_KERNEL=$abs_top_builddir/tests/python/twin_kernel
KB_SPLITK_PLUGIN=$abs_top_builddir/doc/examples/plugin/.libs/libsplitk.so
PYTHONPATH=$abs_top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export KERNBENCH_LIBRARY KB_TWIN_KERNEL KB_SPLITK_PLUGIN PYTHONPATH PYTHONDONTWRITEBYTECODE
cd "$abs_top_srcdir/tests/python" || exit 1
exec "$py" -m unittest -v test_kernbench
