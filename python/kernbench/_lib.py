"""Loading libkernbench and calling it: the ctypes layer of the package.

Only the JSON entry points (kernbench/json.h), the opaque simulation
handle, the opaque registry handle, the tl calls and the error object
cross this boundary, so that the package copies no result or option struct
layout. The structs copied are kb_error (kernbench/common.h),
kb_registry_options (kernbench/registry.h) and the tl composite
description (kernbench/tl.h) in tl.py.
"""
import ctypes
import ctypes.util
import os

_here = os.path.dirname(os.path.abspath(__file__))


class Error(Exception):
    """An error of the library: `code` (a kb_status, negative), `code_name`
    (its text), `detail` (the validation kind for kernel errors, e.g.
    "tcm_exhausted", "kernel_fail"; None otherwise), `source`/`line` (file,
    key or kernel call site), `message`, and for a failing Python kernel
    `traceback` (the Python traceback, in full)."""

    def __init__(self, code, message, detail=None, source="", line=0, traceback=None):
        self.code = code
        self.code_name = strerror(code) if _lib is not None else str(code)
        self.detail = detail
        self.source = source
        self.line = line
        self.message = message
        self.traceback = traceback
        text = message
        if traceback:
            text = message + "\n\nPython traceback of the kernel:\n" + traceback
        super().__init__(text)


class _kb_error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("detail", ctypes.c_int), ("line", ctypes.c_int),
                ("column", ctypes.c_int), ("source", ctypes.c_char * 256),
                ("message", ctypes.c_char * 768), ("version", ctypes.c_int),
                ("reserved", ctypes.c_int * 63)]


class _kb_registry_options(ctypes.Structure):
    _fields_ = [("builtins", ctypes.c_int)]


def _candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("KERNBENCH_LIBRARY")
    if env:
        yield env
        return
    # The build tree: python/kernbench/ sits two levels below the top
    # folder, where libtool leaves the shared library in .libs/.
    top = os.path.dirname(os.path.dirname(_here))
    for name in ("libkernbench.so", "libkernbench.dylib"):
        yield os.path.join(top, ".libs", name)
    # Installed: the libdir `make install` recorded, then the system's search.
    try:
        from . import _config
        for name in ("libkernbench.so", "libkernbench.dylib"):
            yield os.path.join(_config.LIBDIR, name)
    except ImportError:
        pass
    found = ctypes.util.find_library("kernbench")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("kernbench: libkernbench not found; set KERNBENCH_LIBRARY to the "
                      "path of libkernbench.so. Tried: " + "; ".join(tried or ["nothing"]))


_lib = None
_lib = _load()
c_char_pp = ctypes.POINTER(ctypes.c_char_p)
_ERR = ctypes.POINTER(_kb_error)
_OUT = ctypes.POINTER(ctypes.c_void_p)
JSON_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
KERNEL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def _proto(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_p = ctypes.c_char_p
_v = ctypes.c_void_p
kb_free = _proto("kb_free", None, _v)
kb_strerror = _proto("kb_strerror", _p, ctypes.c_int)
kb_validation_name = _proto("kb_validation_name", _p, ctypes.c_int)
kb_version = _proto("kb_version", _p)
kb_git_revision = _proto("kb_git_revision", _p)
kb_bench_run_json = _proto("kb_bench_run_json", ctypes.c_int, _p, _p, _p, _p, _OUT, _ERR)
kb_sweep_run_json = _proto("kb_sweep_run_json", ctypes.c_int, _p, JSON_CB, _v, _ERR)
kb_catalog_json = _proto("kb_catalog_json", ctypes.c_int, _OUT, _ERR)
kb_registry_create = _proto("kb_registry_create", ctypes.c_int, _OUT,
                            ctypes.POINTER(_kb_registry_options), _ERR)
kb_registry_destroy = _proto("kb_registry_destroy", None, _v)
kb_registry_load_plugin = _proto("kb_registry_load_plugin", ctypes.c_int, _v, _p, _ERR)
kb_registry_load_path = _proto("kb_registry_load_path", ctypes.c_int, _v, _p, _ERR)
kb_registry_run_json = _proto("kb_registry_run_json", ctypes.c_int, _v, _p, _p, _p, _p, _OUT,
                              _ERR)
kb_registry_sweep_json = _proto("kb_registry_sweep_json", ctypes.c_int, _v, _p, JSON_CB, _v, _ERR)
kb_registry_catalog_json = _proto("kb_registry_catalog_json", ctypes.c_int, _OUT, _v, _ERR)
kb_topology_from_json = _proto("kb_topology_from_json", ctypes.c_int, _OUT, _p, _ERR)
kb_topology_dump = _proto("kb_topology_dump", _v, _v)
kb_topology_sha256 = _proto("kb_topology_sha256", ctypes.c_int, _v, ctypes.c_char * 65, _ERR)
kb_topology_destroy = _proto("kb_topology_destroy", None, _v)
kb_simulation_create_json = _proto("kb_simulation_create_json", ctypes.c_int, _OUT, _p, _p, _ERR)
kb_simulation_run_json = _proto("kb_simulation_run_json", ctypes.c_int, _v, _OUT, _ERR)
kb_simulation_destroy = _proto("kb_simulation_destroy", None, _v)
kb_simulation_pes = _proto("kb_simulation_pes", ctypes.c_uint32, _v)
kb_simulation_alloc = _proto("kb_simulation_alloc", ctypes.c_int, _v, ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                             ctypes.POINTER(ctypes.c_uint64), _ERR)
kb_simulation_upload = _proto("kb_simulation_upload", ctypes.c_int, _v, ctypes.c_uint64, _v,
                              ctypes.c_size_t, _ERR)
kb_simulation_download = _proto("kb_simulation_download", ctypes.c_int, _v, ctypes.c_uint64, _v,
                                ctypes.c_size_t, _ERR)
kb_simulation_launch = _proto("kb_simulation_launch", ctypes.c_int, _v, KERNEL_FN, _v,
                              ctypes.c_uint32, ctypes.c_uint32, _ERR)
kb_provenance_json = _proto("kb_provenance_json", ctypes.c_int, _OUT, _v, _ERR)
for _n, _t in (("kb_fp16_to_fp32", (_v, _v, ctypes.c_size_t)),
               ("kb_bf16_to_fp32", (_v, _v, ctypes.c_size_t)),
               ("kb_fp32_to_fp16", (_v, _v, ctypes.c_size_t)),
               ("kb_fp32_to_bf16", (_v, _v, ctypes.c_size_t))):
    globals()[_n] = _proto(_n, None, *_t)


def strerror(code):
    return kb_strerror(code).decode()


def new_error():
    return _kb_error()


def registry_options(builtins):
    return _kb_registry_options(1 if builtins else 0)


def raise_error(rc, err, traceback=None):
    """Raises Error from a status and a filled kb_error."""
    detail = kb_validation_name(err.detail).decode() if err.detail else None
    raise Error(rc, err.message.decode("utf-8", "replace"), detail,
                err.source.decode("utf-8", "replace"), err.line, traceback)


def take_string(ptr):
    """The library-allocated string at ptr, freed."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        kb_free(ptr)


def enc(text):
    return None if text is None else text.encode()
