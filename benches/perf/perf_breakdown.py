#!/usr/bin/python3
"""Where a sequential run's time goes, by category, in ns per event (issue 13).

usage:
  perf_breakdown.py [--reps N] [--freq HZ] KERNBENCH BENCH [--param K=V ...]

  KERNBENCH is the binary itself (.libs/kernbench of an in-tree build, not
  libtool's wrapper script). It runs `KERNBENCH run BENCH ... --threads 1
  --json` once for the run's events and records, N times (default 30) under
  `perf stat -e task-clock` for the median task-clock, and N times under
  `perf record -F HZ` (default 20000) for the samples, then prints each
  category's share of the samples and its ns per event (share x median
  task-clock / events).

Why by source file: the build is LTO'd, so most of the event path is
inlined into a few large functions, and several static functions share a
name (`finish` is in src/oplog, src/pe and src/sim). perf's srcfile key
(the line table of the sampled instruction) still names the file the code
was written in, which is the module, and the module is the category. A
sample in a header goes to the header's module when it has one (plan.h is
the scheduler's); else (cmd.h, the compiler's intrinsic headers) to the
category of the function it was inlined into, taken from that function's
own .c lines. So the SSE stores inside the SHA-NI pieces count as hash,
those inside the op_log's emit as op_log format.

Samples outside the kernbench binary: the kernel's and the dynamic
loader's are the process (exec, page faults, relocation, exit); libc's
string and malloc functions are listed on their own (they are small)."""
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Source file (basename) -> category. Basenames are unique in src/ and
# benches/kernels/ except gemm.c (both are data-mode numerics or a kernel,
# neither on the timing path of decode).
CATEGORY = {
    "event loop (src/sim: LP heaps, messages, executor)":
        ["core.c", "core_impl.h", "sim.h", "exec.c", "barrier.c", "barrier.h"],
    "scheduler + plans (admission, hazards, plan memo, stage costs)":
        ["sched.c", "plan.c", "plan.h", "plan_data.c", "hazard.h", "cost.c", "machine.c",
         "machine.h"],
    "engines + PE_CPU (stage FIFOs, dispatch)":
        ["engines.c", "cpu.c", "ipcq.c", "pe.h"],
    "lowering (tl context, kernel coroutine, replay)":
        ["replay.c", "replay.h", "composite.c", "tl_int.h", "tl_impl.h", "tl.c", "handle.c",
         "scope.c", "commands.c", "recipes.c", "recipes.h", "zero.h", "kernel.c", "kernel.h",
         "gqa_decode.c", "fiber.c"],
    "TCM allocator": ["tcm.c", "tcm.h"],
    "op_log format (records into lanes)": ["oplog.c", "oplog.h", "trace.c"],
    "op_log merge + write": ["oplog_pump.c"],
    "hash (SHA-256 of the op_log bytes)": ["sha256.c", "sha256.h", "shaintrin.h"],
}
BY_FILE = {f: cat for cat, files in CATEGORY.items() for f in files}
PROCESS = "process (kernel: exec, page faults, exit; ld.so; setup, result)"
LIBC = "libc (memcpy, malloc, printf)"


def run_json(kb, argv):
    out = subprocess.run([kb, "run"] + argv, check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)


def task_clock_ms(kb, argv):
    """One run's task-clock in ms (perf stat's CSV: value,unit,event,...)."""
    p = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", kb, "run"] + argv,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for line in p.stderr.decode().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("task-clock"):
            return float(f[0])
    sys.exit("perf_breakdown: no task-clock in perf stat's output")


def samples(kb, argv, reps, freq, tmp):
    """Rows (percent, dso, symbol, srcfile) of N runs' samples in the kernbench process."""
    data = os.path.join(tmp, "perf.data")
    loop = 'for i in $(seq %d); do "$0" run "$@" >/dev/null || exit 1; done' % reps
    subprocess.run(["perf", "record", "-q", "-F", str(freq), "-o", data, "--",
                    "sh", "-c", loop, kb] + argv,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    comm = os.path.basename(kb)[:15]
    rep = subprocess.run(["perf", "report", "-i", data, "--comm", comm, "--no-children",
                          "-s", "dso,sym,srcfile", "-t", "|"],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    rows = []
    for line in rep.stdout.decode(errors="replace").splitlines():
        f = [x.strip() for x in line.split("|")]
        if line.startswith("#") or len(f) < 4 or not f[0].endswith("%"):
            continue
        sym = f[2][4:] if f[2][:1] == "[" else f[2]
        rows.append((float(f[0][:-1]), f[1], sym.split(".lto_priv")[0], f[3]))
    if not rows:
        sys.exit("perf_breakdown: perf report found no samples of %s" % comm)
    return rows


def categorise(rows, kb):
    own = os.path.basename(kb)
    # A function's own category: that of the .c file most of its samples name.
    home = collections.defaultdict(collections.Counter)
    for pct, dso, sym, src in rows:
        if dso == own and src.endswith(".c") and src in BY_FILE:
            home[sym][BY_FILE[src]] += pct
    share = collections.Counter()
    for pct, dso, sym, src in rows:
        if dso != own:
            cat = LIBC if dso.startswith("libc") or dso.startswith("libm") else PROCESS
        elif src in BY_FILE:
            cat = BY_FILE[src]
        elif src.endswith(".h") and home[sym]:
            cat = home[sym].most_common(1)[0][0]
        else:
            cat = PROCESS   # the command line, topology, bench setup, result JSON
        share[cat] += pct
    return share


def main():
    args = sys.argv[1:]
    reps, freq = 30, 20000
    while args and args[0] in ("--reps", "--freq"):
        if len(args) < 2:
            sys.exit(__doc__)
        if args[0] == "--reps":
            reps = int(args[1])
        else:
            freq = int(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    kb, argv = args[0], args[1:] + ["--threads", "1", "--json"]
    j = run_json(kb, argv)
    ms = statistics.median(task_clock_ms(kb, argv) for _ in range(reps))
    with tempfile.TemporaryDirectory() as tmp:
        share = categorise(samples(kb, argv, reps, freq, tmp), kb)
    total = sum(share.values())
    events = j["events"]
    print("%s: %d events, %d records, %d commands; median task-clock %.2f ms over %d runs"
          % (" ".join(args[1:]), events, j["records"], j["commands"], ms, reps))
    print("| category | share of samples | ns/event |")
    print("| --- | --- | --- |")
    for cat, pct in share.most_common():
        print("| %s | %.1f%% | %.1f |" % (cat, 100 * pct / total, ms * 1e6 * pct / total / events))
    print("| total | 100%% | %.1f |" % (ms * 1e6 / events))


if __name__ == "__main__":
    main()
