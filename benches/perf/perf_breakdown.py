#!/usr/bin/python3
"""Where a sequential run's time goes, by category (issue 13).

usage:
  perf record --call-graph dwarf,16384 -F 15000 -o run.data \
      .libs/kernbench run gqa_decode_opt2 --param S_kv=262144 --threads 1 --json
  perf script -i run.data -F comm,ip,sym,dso > run.txt
  perf_breakdown.py run.txt [TASK_CLOCK_MS EVENTS]

Each sample goes to the category of the first frame, from the leaf up,
that names one; malloc and libc string frames go to their caller's
(memcpy while lowering is lowering). SHA-256 runs in nettle's assembly,
which perf cannot unwind, so a sample whose leaf is nettle's compress is
'hash' whatever called it. With the task-clock (perf stat -e task-clock,
ms) and the run's events, it prints ns per event of each category too.
doc/performance.md shows the output and what it means."""
import re, sys, collections

CAT = [
    # (category, symbol names or prefixes)
    ("hash (SHA-256)", ["_nettle_sha256", "nettle_sha256", "kb__sha256"]),
    ("op_log merge + write", ["window_hook", "kb__oplog_flush", "kb__oplog_finish", "sink_record",
                              "drain_out", "heap_down", "lane_less", "buf_compact", "merge_buf",
                              "pump_window", "pump_overlap", "_IO_", "fwrite"]),
    ("op_log format", ["kb__oplog_emit", "format_record", "put_u64", "put_i64", "put_str", "put_mem",
                       "put_fields", "put_json_str", "put_pairs32", "n_digits", "lane_reserve",
                       "kb__pe_log", "log_stage"]),
    ("TCM allocator", ["kb__tcm_", "try_alloc", "take", "insert", "insert_node", "erase", "remove_at",
                       "split", "pull", "pull_changed", "refresh", "refresh_at", "first_fit",
                       "fit_after", "first_ending_above", "coalesce", "successor", "set_block"]),
    ("lowering (tl, kernel side)", ["kb_tl_", "kb__tl_", "lower_", "bind_recipe", "alloc_recipe",
                       "expand_step", "build_cmd", "resolve_out", "math_out_shape", "new_op",
                       "op_operand", "op_extra", "nshape_", "view_nshape", "add_unique", "kb__cmd_read",
                       "kb__cmd_write", "push_id", "kb__cmd_alloc", "kb__recipe", "kb__scope_track",
                       "release_slot", "kb__plan_check_ops", "kb__composite_lbytes", "kb__opspec_lbytes",
                       "kb__cmd_lbytes", "decode_kernel", "opt2_tile", "opt3_", "scores", "kv_ref",
                       "math", "kernel_main", "kernel_next", "swapcontext", "__start_context",
                       "kb__kernel", "kb__dispatch_ps", "kb__dispatch_cycles"]),
    ("scheduler + plans", ["sched_", "try_admit", "start_plan", "feed", "send_stage", "conflicts",
                       "blocker", "overlaps", "has", "step_done", "next_phase", "finish_cmd",
                       "enqueue", "q_remove", "kb__plan", "plan_", "fit_tiles", "cost_loop",
                       "op_elems", "ceil_div_d", "dim_eff", "free_data", "kb__tview", "kb__cmd_free"]),
    ("engines + PE_CPU (stage model)", ["engine_", "start_next", "finish", "chan_push", "stage_of",
                       "cpu_", "advance", "deps_ready", "dispatched", "mark_done", "is_done",
                       "ahead_", "kb__pe_after", "kb__pe_ps", "kb__cycles_to_ps", "ipcq_", "kb__pe_lp"]),
    ("event loop (core)", ["kb__lp_", "kb__worker_", "evheap_", "ev_less", "lp_less", "wheap_set",
                       "kb__exec_sequential", "node_get", "kb__time_add"]),
    ("malloc/free", ["malloc", "_int_malloc", "_int_free", "free", "cfree", "calloc", "realloc",
                     "__libc_", "unlink_chunk", "malloc_consolidate", "tcache"]),
]

def category(frames):
    # exec.c's finish (the last flush) is op_log; engines.c's runs under kb__worker_window
    for i, s in enumerate(frames):
        if s == "merge":
            up = frames[i + 1:]
            if any(u in ("window_hook", "kb__oplog_flush", "kb__oplog_finish") or u.startswith("pump_") for u in up):
                return "op_log merge + write"
            return "TCM allocator"
        if s == "finish" and i + 1 < len(frames) and frames[i + 1] == "kb__exec_sequential":
            return "op_log merge + write"
        for cat, names in CAT:
            for n in names:
                if s == n or (n.endswith("_") and s.startswith(n)) or s.startswith(n + ".") or \
                   (len(n) > 6 and s.startswith(n)):
                    if cat == "malloc/free":
                        break   # attribute to the caller
                    return cat
    return None

samples = collections.Counter()
startup = 0
total = 0
frames = []
def flush():
    global total, startup
    if not frames:
        return
    total += 1
    syms = [f for f in frames]
    if "sha256" in syms[0]:
        samples["hash (SHA-256)"] += 1
        return
    if not any(s in ("kb__sim_run", "kb__exec_sequential", "kernel_main", "__start_context") for s in syms):
        startup += 1
        samples["startup + exit (process, topology, bench setup)"] += 1
        return
    c = category(syms)
    if c is None:
        leaf = syms[0]
        if any(x in leaf for x in ("malloc", "free", "calloc")):
            c = "malloc/free"
        else:
            c = "other (" + leaf + ")"
    samples[c] += 1

for line in open(sys.argv[1]):
    if not line.startswith("\t"):
        flush()
        frames = []
        continue
    m = re.match(r"\t\s*[0-9a-f]+ (\S+)", line)
    if m:
        s = m.group(1)
        s = re.sub(r"\+0x[0-9a-f]+$", "", s)
        frames.append(s)
flush()
ms = float(sys.argv[2]) if len(sys.argv) > 2 else 0
events = float(sys.argv[3]) if len(sys.argv) > 3 else 0
other = collections.Counter()
for c, n in sorted(samples.items(), key=lambda x: -x[1]):
    if c.startswith("other (") and n / total < 0.004:
        other["other"] += n
        continue
for c, n in list(samples.items()):
    if c.startswith("other (") and n / total < 0.004:
        del samples[c]
samples.update(other)
print("%-48s %7s %9s" % ("category", "cycles", "ns/event"))
for c, n in sorted(samples.items(), key=lambda x: -x[1]):
    pct = 100.0 * n / total
    print("%-48s %6.1f%% %9.0f" % (c, pct, ms * 1e6 * n / total / events if events else 0))
print("%-48s %6d samples" % ("total", total))
