"""Kernels in Python: a Simulation you fill and launch kernels on, and the
`tl` object a kernel receives (kernbench/tl.h, one method per call).

A kernel is a function kernel(tl, args) run once per program instance on a
thread of the simulation, through a ctypes callback; every tl method is one
C call. An exception inside the kernel fails the run (kb_tl_fail) and
Simulation.run raises kernbench.Error with the Python traceback.
"""
import ctypes
import json
import sys
import threading
import traceback as _tb

from . import _lib

DTYPES = {"fp32": 0, "fp16": 1, "bf16": 2}
SIZES = {"fp32": 4, "fp16": 2, "bf16": 2}
SCOPES = {None: 0, "default": 0, "kernel": 1, "k_tile": 2, "output_tile": 3}
MAX_ARGS, MAX_EXTRAS = 6, 4


# ---- kernbench/tl.h structs of a composite description -----------------
class _Arg(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("t", ctypes.c_void_p)]


class _Extra(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


class _Op(ctypes.Structure):
    _fields_ = [("op", ctypes.c_char_p), ("scope", ctypes.c_int), ("args", _Arg * MAX_ARGS),
                ("extras", _Extra * MAX_EXTRAS)]


class _Recipe(ctypes.Structure):
    _fields_ = [("recipe", ctypes.c_char_p), ("args", _Arg * MAX_ARGS)]


class _Desc(ctypes.Structure):
    _fields_ = [("op", ctypes.c_char_p), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p),
                ("flags", ctypes.c_uint), ("out", ctypes.c_void_p), ("out_hbm", ctypes.c_uint64),
                ("prologue", ctypes.POINTER(_Recipe)), ("n_prologue", ctypes.c_size_t),
                ("epilogue", ctypes.POINTER(_Op)), ("n_epilogue", ctypes.c_size_t),
                ("extras", _Extra * MAX_EXTRAS)]


_v, _i, _p, _u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32
_S = ctypes.POINTER(ctypes.c_int64)
_proto = _lib._proto
_ref = _proto("kb_tl_ref_at", _v, _v, ctypes.c_uint64, _i, _i, _S, _p, _i)
_alloc = _proto("kb_tl_alloc_at", _v, _v, _i, _i, _S, _p, _i)
_full = _proto("kb_tl_full_at", _v, _v, _i, _i, _S, ctypes.c_double, _p, _i)
_load = _proto("kb_tl_load_at", _v, _v, _v, _v, _p, _i)
_store = _proto("kb_tl_store_at", _i, _v, _v, _v, _p, _i)
_dot = _proto("kb_tl_dot_at", _v, _v, _v, _v, ctypes.c_uint, _p, _i)
_composite = _proto("kb_tl_composite_at", _v, _v, ctypes.POINTER(_Desc), _p, _i)
_wait = _proto("kb_tl_wait_at", _i, _v, _v, _p, _i)
_overhead = _proto("kb_tl_cpu_overhead_at", _i, _v, ctypes.c_double, _p, _i)
_scope_begin = _proto("kb_tl_scope_begin_at", _i, _v, _p, _i)
_scope_end = _proto("kb_tl_scope_end_at", _i, _v, _p, _i)
_release = _proto("kb_tl_release_at", _i, _v, _v, _p, _i)
_send = _proto("kb_tl_send_at", _i, _v, _v, _u32, _u32, _p, _i)
_recv = _proto("kb_tl_recv_at", _i, _v, _v, _u32, _u32, _p, _i)
_fail = _proto("kb_tl_fail_at", _i, _v, _p, _p, _i)
_shape = _proto("kb_tl_shape", _i, _v, _v, ctypes.POINTER(_i), _S)
_program_id = _proto("kb_tl_program_id", _u32, _v)
_num_programs = _proto("kb_tl_num_programs", _u32, _v)
_pe = _proto("kb_tl_pe", _u32, _v)
_failed = _proto("kb_tl_failed", _i, _v)
_tcm_free = _proto("kb_tl_tcm_free", ctypes.c_uint64, _v)


def _shape_arg(shape):
    shape = tuple(int(x) for x in shape)
    return len(shape), (ctypes.c_int64 * max(1, len(shape)))(*shape)


class TL:
    """The tl context of one kernel instance. Tensor handles are ints (the
    library's opaque handle values); 0 stands for "none". Every method passes
    its Python caller's file and line as the call site of error messages."""

    def __init__(self, ptr, sites):
        self._tl = ptr
        self._sites = sites

    def _site(self):
        f = sys._getframe(2)
        return self._sites(f.f_code.co_filename), f.f_lineno

    program_id = property(lambda self: _program_id(self._tl))
    num_programs = property(lambda self: _num_programs(self._tl))
    pe = property(lambda self: _pe(self._tl))
    failed = property(lambda self: bool(_failed(self._tl)))
    tcm_free = property(lambda self: _tcm_free(self._tl))

    def ref(self, addr, dtype, shape):
        n, s = _shape_arg(shape)
        return _ref(self._tl, addr, DTYPES[dtype], n, s, *self._site()) or 0

    def alloc(self, dtype, shape):
        n, s = _shape_arg(shape)
        return _alloc(self._tl, DTYPES[dtype], n, s, *self._site()) or 0

    def full(self, dtype, shape, value):
        n, s = _shape_arg(shape)
        return _full(self._tl, DTYPES[dtype], n, s, float(value), *self._site()) or 0

    def load(self, src, dst=None):
        return _load(self._tl, src, dst, *self._site()) or 0

    def store(self, dst, src):
        return _store(self._tl, dst, src, *self._site())

    def dot(self, a, b, trans_b=False):
        return _dot(self._tl, a, b, 1 if trans_b else 0, *self._site()) or 0

    def composite(self, op, a=None, b=None, *, trans_b=False, out=None, out_hbm=0,
                  prologue=(), epilogue=(), extras=None):
        """prologue: [(recipe, {operand: handle})]; epilogue: [(op,
        {operand: handle}, scope, {extra: value})] with the last items
        optional (scope: "kernel", "k_tile", "output_tile" or None)."""
        d = _Desc()
        keep = []
        d.op = self._name(op, keep)
        d.a, d.b, d.out, d.out_hbm = a, b, out, out_hbm
        d.flags = 1 if trans_b else 0
        self._extras(d.extras, extras, keep)
        if prologue:
            rs = (_Recipe * len(prologue))()
            for r, (name, args) in zip(rs, prologue):
                r.recipe = self._name(name, keep)
                self._args(r.args, args, keep)
            d.prologue, d.n_prologue = rs, len(prologue)
        if epilogue:
            es = (_Op * len(epilogue))()
            for e, item in zip(es, epilogue):
                if isinstance(item, str):
                    item = (item,)
                e.op = self._name(item[0], keep)
                self._args(e.args, item[1] if len(item) > 1 else None, keep)
                e.scope = SCOPES[item[2] if len(item) > 2 else None]
                self._extras(e.extras, item[3] if len(item) > 3 else None, keep)
            d.epilogue, d.n_epilogue = es, len(epilogue)
        return _composite(self._tl, ctypes.byref(d), *self._site()) or 0

    def wait(self, t):
        return _wait(self._tl, t, *self._site())

    def release(self, t):
        """Releases handle t before its scope ends (kb_tl_release)."""
        return _release(self._tl, t, *self._site())

    def cpu_overhead(self, cycles):
        return _overhead(self._tl, float(cycles), *self._site())

    def scope_begin(self):
        return _scope_begin(self._tl, *self._site())

    def scope_end(self):
        return _scope_end(self._tl, *self._site())

    def scope(self):
        """`with tl.scope():` a scratch scope (begin and end)."""
        return _Scope(self)

    def send(self, src, dst_pe, tag):
        return _send(self._tl, src, dst_pe, tag, *self._site())

    def recv(self, dst, src_pe, tag):
        return _recv(self._tl, dst, src_pe, tag, *self._site())

    def fail(self, message):
        return _fail(self._tl, message.encode(), *self._site())

    def shape(self, t):
        rank = ctypes.c_int(0)
        s = (ctypes.c_int64 * 4)()
        if _shape(self._tl, t, ctypes.byref(rank), s):
            return None
        return tuple(s[:rank.value])

    @staticmethod
    def _name(text, keep):
        b = text.encode()
        keep.append(b)
        return b

    def _args(self, slots, args, keep):
        for i, (k, v) in enumerate((args or {}).items()):
            slots[i].name = self._name(k, keep)
            slots[i].t = v

    def _extras(self, slots, extras, keep):
        for i, (k, v) in enumerate((extras or {}).items()):
            slots[i].name = self._name(k, keep)
            slots[i].value = float(v)


class _Scope:
    def __init__(self, tl):
        self.tl = tl

    def __enter__(self):
        _scope_begin(self.tl._tl, *self.tl._site())
        return self

    def __exit__(self, *exc):
        _scope_end(self.tl._tl, *self.tl._site())
        return False


def _error_text(exc_text):
    """What of a traceback fits the library's message: the exception and
    the innermost frames (the whole traceback stays with the Error)."""
    lines = exc_text.strip().splitlines()
    tail = "\n".join(lines[-4:])
    return "Python exception in the kernel: " + tail


class Simulation:
    """A machine you fill and launch Python kernels on (kb_simulation).

    topology: dict of overrides or a topology document; options as
    kernbench.run (threads, data, op_log, trace) and pes (0: all)."""

    def __init__(self, topology=None, *, threads=1, data=False, pes=0, op_log=None, trace=None):
        # Python kernels each need a thread of their own: the interpreter's
        # call stack is per thread, and kernels run interleaved.
        opts = {"threads": threads, "data": bool(data), "pes": pes, "kernel_threads": True}
        if op_log:
            opts["op_log"] = str(op_log)
        if trace:
            opts["trace"] = str(trace)
        out = ctypes.c_void_p()
        err = _lib.new_error()
        rc = _lib.kb_simulation_create_json(ctypes.byref(out), _lib.enc(json.dumps(topology or {})),
                                            _lib.enc(json.dumps(opts)), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)
        self._sim = out.value
        self._keep = []          # callbacks and arguments the library points to
        self._files = {}         # interned call-site file names (commands keep them)
        self._files_lock = threading.Lock()
        self._tracebacks = []
        self.data = bool(data)

    def __del__(self):
        self.close()

    def close(self):
        if getattr(self, "_sim", None):
            _lib.kb_simulation_destroy(self._sim)
            self._sim = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def pes(self):
        return _lib.kb_simulation_pes(self._sim)

    def _site_file(self, name):
        b = self._files.get(name)
        if b is None:
            with self._files_lock:
                b = self._files.setdefault(name, ctypes.create_string_buffer(name.encode()))
        return ctypes.cast(b, ctypes.c_char_p)

    def alloc(self, dtype, shape, zero=False):
        """Allocates an HBM tensor; returns its address."""
        n, s = _shape_arg(shape)
        addr = ctypes.c_uint64(0)
        err = _lib.new_error()
        rc = _lib.kb_simulation_alloc(self._sim, DTYPES[dtype], n, s, 1 if zero else 0,
                                      ctypes.byref(addr), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)
        return addr.value

    def upload(self, addr, values, dtype="fp32"):
        """Copies values (a NumPy array, bytes, or a sequence of floats
        converted to dtype) into HBM at addr."""
        raw = to_bytes(values, dtype)
        err = _lib.new_error()
        buf = ctypes.create_string_buffer(raw, len(raw))
        rc = _lib.kb_simulation_upload(self._sim, addr, buf, len(raw), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)

    def download(self, addr, dtype, shape):
        """The tensor at addr: a NumPy fp32 array when NumPy is installed,
        else a Tensor (shape, list of floats)."""
        count = 1
        for x in shape:
            count *= int(x)
        buf = ctypes.create_string_buffer(count * SIZES[dtype])
        err = _lib.new_error()
        rc = _lib.kb_simulation_download(self._sim, addr, buf, len(buf), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)
        return from_bytes(buf.raw, dtype, tuple(shape))

    def launch(self, kernel, args=None, first_pe=0, n_pes=1):
        """Launches kernel(tl, args) on PEs first_pe .. first_pe + n_pes - 1."""
        sites = self._site_file

        def trampoline(tl_ptr, _unused):
            tl = TL(tl_ptr, sites)
            try:
                kernel(tl, args)
            except BaseException:  # noqa: B902 -- any exception fails the run
                text = _tb.format_exc()
                self._tracebacks.append(text)
                f = sys.exc_info()[2]
                while f.tb_next:
                    f = f.tb_next
                _fail(tl_ptr, _error_text(text).encode(),
                      sites(f.tb_frame.f_code.co_filename), f.tb_lineno)

        cb = _lib.KERNEL_FN(trampoline)
        self._keep.append(cb)
        err = _lib.new_error()
        rc = _lib.kb_simulation_launch(self._sim, cb, None, first_pe, n_pes, ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err)

    def run(self):
        """Runs every launched kernel; returns the result dict (the figures
        of `run --json`). Raises kernbench.Error, with the Python traceback
        when a kernel raised."""
        out = ctypes.c_void_p()
        err = _lib.new_error()
        rc = _lib.kb_simulation_run_json(self._sim, ctypes.byref(out), ctypes.byref(err))
        if rc:
            _lib.raise_error(rc, err, "\n".join(self._tracebacks) or None)
        return json.loads(_lib.take_string(out.value))


# ---- tensors without and with NumPy ------------------------------------
try:
    import numpy as _np
except ImportError:  # NumPy is optional
    _np = None


class Tensor:
    """A downloaded tensor without NumPy: shape, dtype and fp32 values (a
    flat list in C order)."""

    def __init__(self, shape, dtype, values):
        self.shape, self.dtype, self.values = shape, dtype, values

    def __repr__(self):
        return "Tensor(shape=%r, dtype=%r)" % (self.shape, self.dtype)


def to_bytes(values, dtype):
    if isinstance(values, (bytes, bytearray)):
        return bytes(values)
    if _np is not None and isinstance(values, _np.ndarray):
        if dtype == "fp32":
            return _np.ascontiguousarray(values, dtype="<f4").tobytes()
        if dtype == "fp16":
            return _np.ascontiguousarray(values, dtype="<f2").tobytes()
        values = values.astype("<f4").ravel().tolist()
    flat = list(values)
    src = (ctypes.c_float * len(flat))(*flat)
    if dtype == "fp32":
        return bytes(src)
    dst = (ctypes.c_uint16 * len(flat))()
    conv = _lib.kb_fp32_to_fp16 if dtype == "fp16" else _lib.kb_fp32_to_bf16
    conv(dst, src, len(flat))
    return bytes(dst)


def from_bytes(raw, dtype, shape):
    n = len(raw) // SIZES[dtype]
    if dtype == "fp32":
        src = (ctypes.c_float * n).from_buffer_copy(raw)
        vals = src
    else:
        half = (ctypes.c_uint16 * n).from_buffer_copy(raw)
        vals = (ctypes.c_float * n)()
        conv = _lib.kb_fp16_to_fp32 if dtype == "fp16" else _lib.kb_bf16_to_fp32
        conv(vals, half, n)
    if _np is not None:
        return _np.frombuffer(bytes(vals), dtype="<f4").reshape(shape).copy()
    return Tensor(shape, dtype, list(vals))
