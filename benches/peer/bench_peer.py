#!/usr/bin/python3
"""kernbench against the SimPy peer (issue 13), side by side and interleaved.

For gqa_decode_opt2 and gqa_decode_opt3 at S_kv=262144 it runs
`kernbench run BENCH --param S_kv=... --threads 1 --json` (op_log hashed, as
a user runs it; timed as the whole process) and simpy_decode.py (timed by
its own wall_s, the simulation alone), alternating them REPS times, and
prints per bench the median times, the ratio, events/s and CPU/wall of both,
and the ratio of each kernbench run to the peer run after it (median, range).
Then kernbench alone: opt2 and opt3 at 262144 and 1048576 tokens
(linearity: wall ratio, goal <= 4.2), and the peak RSS of opt2 and opt3 at both sizes
(goal: within 1.1x), measured by GNU time (/usr/bin/time, Debian package
time; without it a SKIP line). Last, CPU/wall of `kernbench sweep -j 1`
over eight points (opt2 and opt3 at four sizes up to S_kv): a sweep's
point runs on one core too (goal <= 1.05).

Without python3-simpy the peer rows print a SKIP line and the kernbench
figures still print. The machine's noise is why everything is a median of
interleaved runs, and why nothing here is a pass/fail test.

usage: bench_peer.py KERNBENCH [REPS]    (KB_PEER_SKV overrides 262144)
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "simpy_decode.py")
TIME = "/usr/bin/time"


def run(argv, stderr=None):
    """Runs argv; returns (stdout, wall_s, cpu_s, maxrss_kb) of that child."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("bench-peer: %s failed (status %d)" % (" ".join(argv), p.returncode))
    return out, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def kernbench(kb, bench, skv):
    out, wall, cpu, rss = run([kb, "run", bench, "--param", "S_kv=%d" % skv,
                               "--threads", "1", "--json"])
    j = json.loads(out)
    return {"wall": wall, "cpu": cpu, "rss": rss, "events": j["events"],
            "records": j["records"], "sim": j["sim_time_ps"]}


def peer(bench, skv):
    out, wall, cpu, rss = run(["/usr/bin/python3", PEER, "--bench", bench, "--S_kv", str(skv)])
    j = json.loads(out.decode().strip().splitlines()[-1])
    # The peer's own wall_s times the simulation alone; CPU/wall is the process's.
    return {"wall": j["wall_s"], "proc_wall": wall, "cpu": cpu, "events": j["events"],
            "sim": j["sim_time_ps"]}


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def have_simpy():
    return subprocess.call(["/usr/bin/python3", "-c", "import SimPy.Simulation"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    kb = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    skv = int(os.environ.get("KB_PEER_SKV", "262144"))
    simpy = have_simpy()
    print("bench-peer: S_kv=%d, %d interleaved runs each, medians; kernbench: %s" % (skv, reps, kb))
    if not simpy:
        print("bench-peer: SKIP peer: python3-simpy is not installed "
              "(apt-get install python3-simpy); kernbench figures only")
    for b in ("opt2", "opt3"):
        k_rows, p_rows = [], []
        for _ in range(reps):
            k_rows.append(kernbench(kb, "gqa_decode_" + b, skv))
            if simpy:
                p_rows.append(peer(b, skv))
        kw, kc = med(k_rows, "wall"), med(k_rows, "cpu")
        ev = k_rows[0]["events"]
        print("  %s kernbench: %.4f s  %d events (%d records)  %.2f M events/s  "
              "%.2f M records/s  CPU/wall %.2f"
              % (b, kw, ev, k_rows[0]["records"], ev / kw / 1e6, k_rows[0]["records"] / kw / 1e6,
                 statistics.median(r["cpu"] / r["wall"] for r in k_rows)))
        if simpy:
            pw = med(p_rows, "wall")
            print("  %s simpy:     %.4f s  %d records  %.3f M records/s  CPU/wall %.2f"
                  % (b, pw, p_rows[0]["events"], p_rows[0]["events"] / pw / 1e6,
                     statistics.median(r["cpu"] / r["proc_wall"] for r in p_rows)))
            print("  %s ratio simpy/kernbench: %.1fx (goal >= 100x); sim_time_ps %d vs %d"
                  % (b, pw / kw, p_rows[0]["sim"], k_rows[0]["sim"]))
            # Each kernbench run against the peer run right after it: a slow
            # spell that hits both cancels out, one that hits one side shows
            # as the spread.
            pairs = sorted(p["wall"] / k["wall"] for k, p in zip(k_rows, p_rows))
            print("  %s ratio per adjacent pair: median %.1fx, range %.1f-%.1fx, %d of %d >= 100x"
                  % (b, statistics.median(pairs), pairs[0], pairs[-1],
                     sum(r >= 100 for r in pairs), len(pairs)))
    for b in ("opt2", "opt3"):
        # Interleaved, so that a slow spell of the machine hits both sizes alike.
        small, big = [], []
        for _ in range(max(3, reps // 2)):
            small.append(kernbench(kb, "gqa_decode_" + b, 262144))
            big.append(kernbench(kb, "gqa_decode_" + b, 1048576))
        print("  linearity %s: %.4f s at 262144, %.4f s at 1048576: %.2fx (goal <= 4.2x)"
              % (b, med(small, "wall"), med(big, "wall"), med(big, "wall") / med(small, "wall")))
    sweep_one_core(kb, skv, reps)
    # Peak RSS of kernbench itself. A child of this process starts as a
    # copy of the Python interpreter (~11 MB resident), and Linux keeps the
    # larger of that and the exec'd program's peak in ru_maxrss: the figure
    # wait4 gives is the interpreter's, whatever kernbench uses. GNU time
    # forks kernbench from a small process, so its %M is kernbench's own.
    if not os.access(TIME, os.X_OK):
        print("  peak RSS: SKIP: %s is not installed (apt-get install time)" % TIME)
        return
    for b in ("opt2", "opt3"):
        rss = [median_rss(kb, "gqa_decode_" + b, n) for n in (262144, 1048576)]
        print("  peak RSS %s: %d kB at 262144, %d kB at 1048576: %.3fx (goal <= 1.1x)"
              % (b, rss[0], rss[1], rss[1] / rss[0]))


def sweep_one_core(kb, skv, reps):
    """CPU/wall of a whole `sweep -j 1` process (median of max(3, reps // 3)
    runs): each point runs in turn on the sweep's own thread, as one
    `run --threads 1` does."""
    sizes = ",".join(str(skv >> k) for k in (3, 2, 1, 0))
    rows = []
    for _ in range(max(3, reps // 3)):
        out, wall, cpu, _ = run([kb, "sweep", "gqa_decode_opt2,gqa_decode_opt3", "--param",
                                 "S_kv=" + sizes, "-j", "1", "--quiet"],
                                 stderr=subprocess.DEVNULL)  # its headline
        points = len(out.decode().strip().splitlines()) - 1
        rows.append((cpu / wall, wall, points))
    rows.sort()
    ratio, wall, points = rows[len(rows) // 2]
    print("  sweep -j 1, %d points (opt2, opt3 at S_kv=%s): %.4f s, CPU/wall %.2f "
          "(range %.2f-%.2f, goal <= 1.05)" % (points, sizes, wall, ratio, rows[0][0], rows[-1][0]))


def median_rss(kb, bench, skv):
    """kernbench's own peak RSS in kB (GNU time's %M), median of 3 runs."""
    rows = []
    for _ in range(3):
        p = subprocess.run([TIME, "-f", "KB_MAXRSS %M", kb, "run", bench, "--param",
                            "S_kv=%d" % skv, "--threads", "1", "--json"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
        rows.append(int(p.stderr.decode().strip().splitlines()[-1].split()[1]))
    return statistics.median(rows)


if __name__ == "__main__":
    main()
