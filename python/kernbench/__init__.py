"""kernbench from Python: run benches, sweep them into rows for a DataFrame,
and write kernels in Python over the tl API.

    import kernbench
    r = kernbench.run("gqa_decode_opt2", S_kv=4096,
                      topology={"pe_cost_model.r_cycles_per_byte": 0.25})
    print(r["sim_time_ps"], r["meta"]["topology_sha256"])

    reg = kernbench.Registry("./libsplitk.so")      # a plugin's benches too
    r = reg.run("splitk_gemm", splits=2, data=True)

Standard library only (ctypes over libkernbench's JSON entry points);
NumPy, when installed, is used for dumped and downloaded tensors. The
library is found through KERNBENCH_LIBRARY (a path to libkernbench.so),
then the build tree this package sits in, then where `make install` put it.
"""
import ctypes
import json
import os
import queue
import shutil
import sys
import tempfile
import threading

from . import _lib
from ._lib import Error
from .tl import TL, Simulation, Tensor, from_bytes

__all__ = ["run", "sweep", "benches", "catalog", "topology", "topology_hash", "version",
           "git_revision", "Error", "Registry", "Simulation", "TL", "Tensor"]


def version():
    """The library's version, e.g. "0.1.0"."""
    return _lib.kb_version().decode()


def git_revision():
    """The git revision the library was built from, or None when unknown."""
    return _lib.kb_git_revision().decode() or None


def _call_json(fn, *args, out_first=False):
    out = ctypes.c_void_p()
    err = _lib.new_error()
    if out_first:
        rc = fn(ctypes.byref(out), *args, ctypes.byref(err))
    else:
        rc = fn(*args, ctypes.byref(out), ctypes.byref(err))
    if rc:
        _lib.raise_error(rc, err)
    return json.loads(_lib.take_string(out.value))


class Registry:
    """Benches to run and sweep: the built-in ones (unless builtins=False)
    and those plugins add (shared objects exporting kb_plugin_init, as
    `kernbench --plugin` loads them).

        with kernbench.Registry("./libsplitk.so") as reg:
            r = reg.run("splitk_gemm", splits=2, data=True)
            rows = list(reg.sweep("splitk_gemm", {"splits": [1, 2, 4]}, jobs=2))

    plugins: a path or a list of them, each loaded by load(). The
    module's run(), sweep(), catalog() and benches() take registry= too.
    A registry keeps its plugins loaded until close() (or the end of the
    with block); closing one that a sweep still uses raises RuntimeError."""

    def __init__(self, plugins=None, builtins=True):
        out = ctypes.c_void_p()
        err = _lib.new_error()
        opt = _lib.registry_options(builtins)
        rc = _lib.kb_registry_create(ctypes.byref(out), ctypes.byref(opt), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)
        self._ptr = out.value
        self._users = 0
        try:
            if isinstance(plugins, (str, bytes, os.PathLike)):
                plugins = [plugins]
            for path in plugins or ():
                self.load(path)
        except Exception:
            self.close()
            raise

    def load(self, path):
        """Loads a plugin file, every *.so of a folder (in name order), or
        a colon-separated list of those, as KERNBENCH_PLUGIN_PATH is read:
        Registry(os.environ.get("KERNBENCH_PLUGIN_PATH")). A plugin that
        cannot be loaded, lacks the entry point, or adds a bench that is
        invalid or already there raises Error naming the file."""
        path = os.fsdecode(path)
        fn = _lib.kb_registry_load_plugin if os.path.isfile(path) else _lib.kb_registry_load_path
        err = _lib.new_error()
        rc = fn(self._handle(), _lib.enc(path), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)

    def _handle(self):
        if not self._ptr:
            raise ValueError("kernbench: the registry is closed")
        return self._ptr

    def catalog(self):
        """catalog() with this registry's benches."""
        return catalog(registry=self)

    def benches(self):
        """The benches of this registry, the built-ins first."""
        return benches(registry=self)

    def run(self, bench, **kwargs):
        """run() of a bench of this registry."""
        return run(bench, registry=self, **kwargs)

    def sweep(self, benches, params=None, topology=None, **kwargs):
        """sweep() over benches of this registry."""
        return sweep(benches, params, topology, registry=self, **kwargs)

    def close(self):
        """Unloads the plugins; the registry cannot be used afterwards."""
        if self._users:
            raise RuntimeError("kernbench: the registry is in use by %d sweep(s)" % self._users)
        if self._ptr:
            _lib.kb_registry_destroy(self._ptr)
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # At interpreter exit the ctypes layer may be gone already: the
        # process ends anyway, and the plugins with it.
        try:
            if getattr(self, "_ptr", None) and not self._users:
                _lib.kb_registry_destroy(self._ptr)
                self._ptr = None
        except Exception:
            pass


def _registry_ptr(registry):
    return None if registry is None else registry._handle()


def catalog(registry=None):
    """Benches (with typed parameters), recipes and op kinds, as a dict;
    the benches of registry (a Registry) or the built-ins."""
    return _call_json(_lib.kb_registry_catalog_json, _registry_ptr(registry), out_first=True)


def benches(registry=None):
    """The benches of registry, or the built-in ones: [{"name", "help",
    "params": [...]}, ...]."""
    return catalog(registry)["benches"]


def _topology_ptr(overrides):
    out = ctypes.c_void_p()
    err = _lib.new_error()
    rc = _lib.kb_topology_from_json(ctypes.byref(out), _lib.enc(json.dumps(overrides or {})),
                                    ctypes.byref(err))
    if rc:
        _lib.raise_error(rc, err)
    return out.value


def topology(overrides=None):
    """The effective topology as a dict (what `kernbench topology` prints):
    the default with overrides ({"pe.dma.setup_cycles": 8} or nested), or a
    whole document (a dict with "schema")."""
    t = _topology_ptr(overrides)
    try:
        return json.loads(_lib.take_string(_lib.kb_topology_dump(t)))
    finally:
        _lib.kb_topology_destroy(t)


def topology_hash(overrides=None):
    """The SHA-256 of the effective topology (`kernbench topology --hash`)."""
    t = _topology_ptr(overrides)
    try:
        hexbuf = (ctypes.c_char * 65)()
        err = _lib.new_error()
        rc = _lib.kb_topology_sha256(t, hexbuf, ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)
        return hexbuf.value.decode()
    finally:
        _lib.kb_topology_destroy(t)


def _argv():
    return [sys.executable] + list(sys.argv)


def _read_npy_dir(folder):
    """The .npy tensors of a dump folder: NumPy arrays when NumPy is
    installed, else Tensor objects."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".npy"):
            continue
        path = os.path.join(folder, name)
        try:
            import numpy
            out[name[:-4]] = numpy.load(path)
            continue
        except ImportError:
            pass
        out[name[:-4]] = _read_npy(path)
    return out


def _read_npy(path):
    """A minimal .npy 1.0 reader (little-endian f4/f2, C order)."""
    import ast
    with open(path, "rb") as f:
        raw = f.read()
    hlen = int.from_bytes(raw[8:10], "little")
    header = ast.literal_eval(raw[10:10 + hlen].decode("latin1"))
    dtype = {"<f4": "fp32", "<f2": "fp16"}[header["descr"]]
    return from_bytes(raw[10 + hlen:], dtype, tuple(header["shape"]))


def run(bench, *, threads=1, data=False, topology=None, op_log=None, trace=None, dump=None,
        registry=None, **params):
    """Runs a bench (of registry, a Registry, or a built-in one); returns its result as a dict with typed values
    (the object of `kernbench run --json`, with "meta": the provenance).

    params: the bench's parameters (S_kv=4096, ...). topology: a dict of
    overrides or a document. dump (data mode): a folder to write the .npy
    tensors to, or True for a temporary one; the tensors come back in
    result["dumps"] (NumPy arrays when NumPy is installed)."""
    opts = {"threads": threads, "data": bool(data), "argv": _argv()}
    if op_log:
        opts["op_log"] = str(op_log)
    if trace:
        opts["trace"] = str(trace)
    tmp = None
    if dump:
        tmp = tempfile.mkdtemp(prefix="kernbench-dump-") if dump is True else None
        opts["dump"] = tmp or str(dump)
    try:
        res = _call_json(_lib.kb_registry_run_json, _registry_ptr(registry), _lib.enc(bench),
                         _lib.enc(json.dumps(params)), _lib.enc(json.dumps(topology or {})),
                         _lib.enc(json.dumps(opts)))
        if dump:
            res["dumps"] = _read_npy_dir(opts["dump"])
        return res
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


# Figures of a result that stay out of a sweep row (nested, or in the row already).
_NOT_FIGURES = ("bench", "params", "busy_ps", "utilization", "meta")


def _flat_row(row):
    """A sweep row as a flat dict in a fixed key order: bench, the swept
    keys, status, error, the figures, topology_sha256."""
    keys = row["keys"]
    out = {}

    def put(name, value):
        # A fixed column whose name a swept key (or an earlier column)
        # takes is result.NAME, again while taken: the sweep CSV's rule.
        while name in keys or name in out:
            name = "result." + name
        out[name] = value

    put("bench", row["bench"])
    out.update(keys)
    put("status", row["status"])
    put("error", row["error"])
    res = row["result"] or {}
    for k, v in res.items():
        if k not in _NOT_FIGURES:
            put(k, v)
    meta = res.get("meta") or {}
    put("topology_sha256", meta.get("topology_sha256"))
    return out


def _lists(d):
    if d is None:
        return {}
    return {k: (list(v) if isinstance(v, (list, tuple, range)) else [v]) for k, v in d.items()}


def sweep(benches, params=None, topology=None, *, jobs=0, threads=1, data=False, base=None,
          registry=None):
    """Runs the Cartesian product of params and topology lists over the
    benches; yields one row per point as a flat dict with typed values, in
    the fixed order (the first key varying slowest) whatever jobs is.

    benches: a name or a list. params / topology: {name or dotted key:
    list of values (or one value)}. jobs: points at once (0: all cores,
    like -j). threads: each point's --threads. base: the base topology
    (overrides or a document). A failing point is a row with its status
    and error. registry: a Registry whose benches may be named (default:
    the built-ins); it stays in use until the generator is exhausted or
    closed. pandas.DataFrame(kernbench.sweep(...)) makes a table."""
    reg = _registry_ptr(registry)
    spec = {
        "benches": [benches] if isinstance(benches, str) else list(benches),
        "params": _lists(params),
        "set": _lists(topology),
        "jobs": jobs,
        "threads": threads,
        "data": bool(data),
    }
    if base:
        spec["topology"] = base
    rows = queue.Queue(maxsize=64)
    stop = threading.Event()
    done = object()
    failure = []

    def on_row(text, _payload):
        row = _flat_row(json.loads(text))
        while not stop.is_set():
            try:
                rows.put(row, timeout=0.1)
                return 0
            except queue.Full:
                continue
        return 1

    cb = _lib.JSON_CB(on_row)

    def runner():
        err = _lib.new_error()
        rc = _lib.kb_registry_sweep_json(reg, _lib.enc(json.dumps(spec)), cb, None,
                                         ctypes.byref(err))
        if rc and not stop.is_set():
            try:
                _lib.raise_error(rc, err)
            except Error as e:
                failure.append(e)
        rows.put(done)

    t = threading.Thread(target=runner, name="kernbench-sweep", daemon=True)
    if registry is not None:
        registry._users += 1
    t.start()
    try:
        while True:
            row = rows.get()
            if row is done:
                break
            yield row
    finally:
        stop.set()
        while t.is_alive():
            try:
                rows.get(timeout=0.1)
            except queue.Empty:
                pass
        t.join()
        if registry is not None:
            registry._users -= 1
    if failure:
        raise failure[0]
