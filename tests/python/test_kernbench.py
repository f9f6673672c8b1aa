"""Tests of the Python package (python3 -m unittest, run by make check
through tests/python/run.sh). The C twin of the Python kernel is the
program named by KB_TWIN_KERNEL (tests/python/twin_kernel.c)."""
import json
import os
import subprocess
import sys
import unittest

import kernbench

M, K, N = 32, 64, 32


def twin(tl, a):
    """The same tl calls, in the same order, as tests/python/twin_kernel.c."""
    for _ in range(a["iters"]):
        with tl.scope():
            bias = tl.load(tl.ref(a["bias"], "fp32", (N,)))
            out = tl.composite("gemm", tl.ref(a["a"], "fp32", (M, K)),
                               tl.ref(a["b"], "fp32", (K, N)),
                               out=tl.ref(a["c"], "fp32", (M, N)),
                               epilogue=[("bias", {"bias": bias}), "relu"])
            tl.wait(out)
            tl.cpu_overhead(5 + tl.program_id)


def run_twin_python(threads, pes, iters):
    with kernbench.Simulation({"clusters": 1, "pes_per_cluster": 4}, threads=threads) as sim:
        args = {"iters": iters}
        for name, shape in (("a", (M, K)), ("b", (K, N)), ("bias", (N,)), ("c", (M, N))):
            args[name] = sim.alloc("fp32", shape, zero=True)
        sim.launch(twin, args, 0, pes)
        return sim.run()


def run_twin_c(threads, pes, iters):
    prog = os.environ.get("KB_TWIN_KERNEL")
    if not prog:
        raise unittest.SkipTest("KB_TWIN_KERNEL (the C twin program) is not set")
    out = subprocess.run([prog, str(threads), str(pes), str(iters)], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return json.loads(out)


class RunSweepErrors(unittest.TestCase):
    def test_run_typed_with_provenance(self):
        r = kernbench.run("gemm", M=64, epilogue="relu",
                          topology={"pe_cost_model.r_cycles_per_byte": 0.25})
        self.assertEqual(r["bench"], "gemm")
        self.assertIsInstance(r["sim_time_ps"], int)
        self.assertEqual(r["params"]["M"], 64)
        self.assertEqual(r["params"]["epilogue"], "relu")
        meta = r["meta"]
        self.assertEqual(meta["kernbench_version"], kernbench.version())
        self.assertEqual(meta["topology_sha256"],
                         kernbench.topology_hash({"pe_cost_model.r_cycles_per_byte": 0.25}))
        self.assertNotEqual(meta["topology_sha256"], kernbench.topology_hash())
        self.assertTrue(meta["date_utc"].endswith("Z"))
        self.assertEqual(kernbench.topology()["pe_cost_model"]["r_cycles_per_byte"], 0.0625)

    def test_sweep_order_types_and_jobs(self):
        def rows(jobs):
            return list(kernbench.sweep(["gemm"], {"M": [64, 128]},
                                        {"pe_cost_model.r_cycles_per_byte": [0.0625, 0.25]},
                                        jobs=jobs))
        one, four = rows(1), rows(4)
        self.assertEqual([(r["M"], r["pe_cost_model.r_cycles_per_byte"]) for r in one],
                         [(64, 0.0625), (64, 0.25), (128, 0.0625), (128, 0.25)])
        strip = lambda rs: [{k: v for k, v in r.items() if k not in ("wall_s", "events_per_s")}
                            for r in rs]
        self.assertEqual(strip(one), strip(four))
        self.assertEqual(list(one[0])[:5], ["bench", "M", "pe_cost_model.r_cycles_per_byte",
                                            "status", "error"])
        self.assertTrue(all(r["status"] == 0 for r in one))
        # The same point run alone gives the same op_log.
        alone = kernbench.run("gemm", M=128, topology={"pe_cost_model.r_cycles_per_byte": 0.25})
        self.assertEqual(one[3]["oplog_sha256"], alone["oplog_sha256"])

    def test_sweep_failing_point_and_early_stop(self):
        rows = list(kernbench.sweep("gemm", {"M": [64, 0]}))
        self.assertEqual(rows[0]["status"], 0)
        self.assertNotEqual(rows[1]["status"], 0)
        self.assertIn("M", rows[1]["error"])
        gen = kernbench.sweep("synthetic", {"events": [100, 200, 300, 400]}, jobs=1)
        self.assertEqual(next(gen)["events"], 100)
        gen.close()  # stops the sweep without hanging

    def test_errors(self):
        with self.assertRaises(kernbench.Error) as cm:
            kernbench.run("no_such_bench")
        self.assertEqual(cm.exception.code, -12)
        self.assertIn("no_such_bench", cm.exception.message)
        with self.assertRaises(kernbench.Error) as cm:
            kernbench.run("gemm", topology={"pe.nope": 1})
        self.assertEqual(cm.exception.code_name, "unknown key")
        self.assertIn("pe.nope", cm.exception.message)
        with self.assertRaises(kernbench.Error) as cm:
            kernbench.run("gemm", M=-5)
        self.assertEqual(cm.exception.code, -6)

    def test_catalog(self):
        cat = kernbench.catalog()
        names = [b["name"] for b in kernbench.benches()]
        self.assertIn("gqa_decode_opt2", names)
        self.assertIn("softmax_merge", [r["name"] for r in cat["recipes"]])
        self.assertIn("gemm", [o["name"] for o in cat["ops"]])

    def test_dumps(self):
        r = kernbench.run("gemm", M=64, K=64, N=64, data=True, dump=True)
        c = r["dumps"]["c"]
        self.assertEqual(tuple(c.shape), (64, 64))


def splitk_plugin():
    path = os.environ.get("KB_SPLITK_PLUGIN")
    if not path or not os.path.exists(path):
        raise unittest.SkipTest("KB_SPLITK_PLUGIN (the example plugin, built by make check) "
                                "is not there")
    return path


class FlatRows(unittest.TestCase):
    """A swept key never hides a fixed column: the column becomes
    result.NAME, as in the sweep CSV (doc/sweep.md)."""

    def test_keys_named_like_fixed_columns(self):
        row = {"bench": "b", "keys": {"bench": 1, "status": 2, "error": 3, "events": 4},
               "status": "ok", "error": None,
               "result": {"events": 10, "result.events": 11,
                          "meta": {"topology_sha256": "ab"}}}
        flat = kernbench._flat_row(row)
        self.assertEqual(list(flat)[:5], ["result.bench", "bench", "status", "error", "events"])
        self.assertEqual(flat["result.bench"], "b")
        self.assertEqual((flat["bench"], flat["status"], flat["error"], flat["events"]), (1, 2, 3, 4))
        self.assertEqual((flat["result.status"], flat["result.error"]), ("ok", None))
        self.assertEqual(flat["result.events"], 10)
        self.assertEqual(flat["result.result.events"], 11)
        self.assertEqual(flat["topology_sha256"], "ab")


class Plugins(unittest.TestCase):
    """A plugin's bench (doc/examples/plugin/splitk_gemm.c) through a
    Registry: listed, run, swept, checked in data mode."""

    def test_unknown_without_the_plugin(self):
        splitk_plugin()
        self.assertNotIn("splitk_gemm", [b["name"] for b in kernbench.benches()])
        with self.assertRaises(kernbench.Error) as cm:
            kernbench.run("splitk_gemm")
        self.assertEqual(cm.exception.code, -12)

    def test_run_and_sweep(self):
        with kernbench.Registry(splitk_plugin()) as reg:
            names = [b["name"] for b in reg.benches()]
            self.assertEqual(names[-1], "splitk_gemm")
            self.assertIn("gemm", names)
            splits = [p for p in reg.benches()[-1]["params"] if p["name"] == "splits"][0]
            self.assertEqual(splits["default"], 4)
            r = reg.run("splitk_gemm", K=128, splits=2, data=True, threads=1)
            self.assertEqual(r["bench"], "splitk_gemm")
            self.assertEqual(r["params"]["splits"], 2)
            self.assertIsInstance(r["max_abs_err"], float)
            self.assertLess(r["max_abs_err"], 1e-3)
            # The module's run() with registry= is the same run.
            same = kernbench.run("splitk_gemm", K=128, splits=2, data=True, registry=reg)
            self.assertEqual(same["oplog_sha256"], r["oplog_sha256"])
            rows = list(reg.sweep("splitk_gemm", {"K": 128, "splits": [1, 2]}, jobs=2,
                                  data=True))
            self.assertEqual([row["splits"] for row in rows], [1, 2])
            self.assertTrue(all(row["status"] == 0 for row in rows))
            self.assertEqual(rows[1]["oplog_sha256"], r["oplog_sha256"])
            self.assertLess(rows[0]["max_abs_err"], 1e-3)
            # A built-in in the same sweep, in the fixed order.
            mixed = list(kernbench.sweep(["gemm", "splitk_gemm"], {"M": 32, "K": 64},
                                         jobs=2, registry=reg))
            self.assertEqual([row["bench"] for row in mixed], ["gemm", "splitk_gemm"])

    def test_registry_forms_and_errors(self):
        path = splitk_plugin()
        with kernbench.Registry([path], builtins=False) as reg:
            self.assertEqual([b["name"] for b in reg.benches()], ["splitk_gemm"])
            reg.load(path)  # the same file again: not loaded twice
            self.assertEqual(len(reg.benches()), 1)
        with kernbench.Registry(os.path.dirname(path), builtins=False) as reg:
            self.assertEqual([b["name"] for b in reg.benches()], ["splitk_gemm"])
        with self.assertRaises(kernbench.Error) as cm:
            kernbench.Registry("/nonexistent/libnope.so")
        self.assertIn("/nonexistent/libnope.so", cm.exception.message)
        # A sweep in progress keeps its registry open.
        reg = kernbench.Registry(path)
        gen = reg.sweep("splitk_gemm", {"K": 64, "splits": [1, 2]}, jobs=1)
        next(gen)
        with self.assertRaises(RuntimeError):
            reg.close()
        gen.close()
        reg.close()
        with self.assertRaises(ValueError):
            reg.run("splitk_gemm")


class PythonKernels(unittest.TestCase):
    def test_same_oplog_as_c(self):
        py = run_twin_python(1, 2, 100)
        c = run_twin_c(1, 2, 100)
        self.assertEqual(py["commands"], c["commands"])
        self.assertGreater(py["commands"], 2 * 256)  # more than a command stream holds per PE
        self.assertEqual(py["oplog_sha256"], c["oplog_sha256"])

    def test_thread_count_independence(self):
        hashes = {t: run_twin_python(t, 4, 20)["oplog_sha256"] for t in (1, 2, 0)}
        self.assertEqual(len(set(hashes.values())), 1, hashes)

    def test_raising_kernel(self):
        def bad(tl, _):
            tl.cpu_overhead(10)
            if tl.program_id == 1:
                raise ValueError("deliberate failure in program 1")
            tl.cpu_overhead(10)

        with kernbench.Simulation({"clusters": 1, "pes_per_cluster": 2}) as sim:
            sim.launch(bad, None, 0, 2)
            with self.assertRaises(kernbench.Error) as cm:
                sim.run()
        e = cm.exception
        self.assertEqual(e.detail, "kernel_fail")
        self.assertIn("deliberate failure in program 1", e.message)
        self.assertIn("test_kernbench.py", e.message)
        self.assertIn("Traceback", e.traceback)
        self.assertIn("raise ValueError", e.traceback)

    def test_validation_error_names_python_line(self):
        def over(tl, _):
            tl.alloc("fp32", (4096, 4096))  # more than the TCM holds

        with kernbench.Simulation() as sim:
            sim.launch(over)
            with self.assertRaises(kernbench.Error) as cm:
                sim.run()
        self.assertEqual(cm.exception.detail, "tcm_exhausted")
        self.assertIn("test_kernbench.py", cm.exception.source)

    def test_release_then_use_names_python_line(self):
        lines = {}

        def stale(tl, _):
            r = tl.ref(0, "fp32", (16, 16))
            tl.load(r)
            self.assertEqual(tl.release(r), 0)
            lines["use"] = sys._getframe().f_lineno + 1
            tl.load(r)  # released: stale

        with kernbench.Simulation() as sim:
            sim.launch(stale)
            with self.assertRaises(kernbench.Error) as cm:
                sim.run()
        self.assertEqual(cm.exception.detail, "bad_handle")
        self.assertIn("released", cm.exception.message)
        self.assertIn("test_kernbench.py:%d" % lines["use"], cm.exception.source)

    def test_upload_download(self):
        with kernbench.Simulation(data=True) as sim:
            for dt in ("fp32", "fp16", "bf16"):
                addr = sim.alloc(dt, (2, 3))
                sim.upload(addr, [0.5, -1.0, 2.0, 3.0, 0.25, 8.0], dt)
                got = sim.download(addr, dt, (2, 3))
                vals = got.ravel().tolist() if hasattr(got, "ravel") else got.values
                self.assertEqual(vals, [0.5, -1.0, 2.0, 3.0, 0.25, 8.0])


if __name__ == "__main__":
    unittest.main()
