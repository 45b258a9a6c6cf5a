#!/usr/bin/env python3
"""`perf/run_all.py --table-only` rewrites the table of current figures in docs/performance.md from a run's
results: on fixed CSV files (every step's, with known ratios) it must replace exactly the rows those
results measure, keep the others and everything outside the markers, and give the same page when run
twice. Also checks that the page's table is well formed (7 cells a row, unique figures).

  perf_table_test.py ROOT     ROOT: the source tree (perf/run_all.py, docs/performance.md)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True


def write(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(str(x) for x in r) + "\n")


def fixture(out, root):
    mib = 1 << 20
    write(os.path.join(out, "host_path.csv"),
          "ranks,bytes_per_rank,rep,memcpy_s,blocked_s,ckpt_flush_s,ckpt_durable_s,ckpt_committed_s,raw_write_s",
          [(1, 4 * mib, r, 0.010, 0.005, 0.010, 0.010, 0.011, 0.020) for r in range(3)] +
          [(1, 8 * mib, r, 0.020, 0.030, 0.040, 0.060, 0.061, 0.040) for r in range(3)])
    write(os.path.join(out, "overlap.csv"),
          "mode,ranks,bytes_per_rank,every,steps,rep,loop_s,blocked_total_s,checkpoint_call_s,wait_s,checkpoints,"
          "step_quiet_ms,step_flush_ms,flush_steps",
          [("none", 1, 4 * mib, 5, 10, 0, 2.0, 0, 0, 0, 0, 1, 1, 0),
           ("null", 1, 4 * mib, 5, 10, 0, 2.02, 0, 0, 0, 2, 1, 1, 0),
           ("async", 1, 4 * mib, 5, 10, 0, 2.06, 0, 0, 0, 2, 1, 1, 0)])
    write(os.path.join(out, "transports.csv"),
          "label,ranks,bytes_per_rank,blocked_max_s,blocked_mean_s,durable_max_s,committed_max_s,perceived_GBps,"
          "raw_GBps,files",
          [("HDF5 sync (baseline)", 1, mib, 0.120, 0, 0, 0, 0, 0, 1), ("HDF5 via ckpt", 1, mib, 0.010, 0, 0, 0, 0, 0, 1),
           ("HDF5 sync (baseline)", 2, mib, 0.050, 0, 0, 0, 0, 0, 1), ("HDF5 via ckpt", 2, mib, 0.010, 0, 0, 0, 0, 0, 1)])
    write(os.path.join(out, "peers.csv"), "method,ranks,bytes_per_rank,rep,blocked_s,durable_s",
          [("hdf5-c-collective", 2, mib, 0, 0.2, 0.2), ("ckpt-posix-async", 2, mib, 0, 0.04, 0.2),
           ("ckpt-hdf5-async", 2, mib, 0, 0.02, 0.2)])
    fg = "mode,ranks,bytes_per_rank,steps,compute_ms,rep,run_s,blocked_s,memcpy_s,kept,memcpy_hot_s,bg_cpu_s"
    write(os.path.join(out, "finegrain_1M.csv"), fg,
          [(m, 2, mib, 100, 4, r, t, b, 0.0001, 100, 0.00002, 0)
           for r in range(3) for m, t, b in (("none", 1.0, 0), ("memcpy", 1.02, 0.0001), ("ckpt-coalesce-fsync", 1.05,
                                                                                            0.0001),
                                             ("series-wait-end", 1.6, 0.002), ("adios2-bp5", 2.0, 0.001))])
    write(os.path.join(out, "finegrain_16M.csv"), fg,
          [(m, 2, 16 * mib, 100, 4, r, t, 0.01, 0.002, 100, 0.001, 0)
           for r in range(3) for m, t in (("none", 1.0), ("series-wait-end", 3.0), ("adios2-bp5-async", 6.0))])
    write(os.path.join(out, "growth_1.csv"),
          "mode,ranks,vars_per_rank,bytes_per_rank,reps,protect_s,blocked_s,durable_s,committed_s,index_bytes,latest_s,"
          "restart_s,verified,staging_bytes,rss_base_bytes,rss_added_write_bytes,rss_added_restart_bytes",
          [("bytes", 1, 1, 16 * mib, 3, 0, 0, 0, 0, 0, 0, 0, 1, 16 * mib, 0, 16 * mib, 0),
           ("vars", 1, 100000, 128, 3, 0, 0, 0, 0, 10 * mib, 0, 0, 1, 32 * mib, 0, 84 * mib, 0)])
    write(os.path.join(out, "levels.csv"),
          "mode,ranks,ranks_per_node,bytes_per_rank,slowfs_mbps,blocked_s,local_s,global_s,raw_local_s,raw_global_s",
          [("global", 4, 2, mib, 100, 0.03, 0.8, 0.8, 0.2, 0.4), ("local", 4, 2, mib, 100, 0.03, 0.3, 1.2, 0.2, 0.4),
           ("local-partner", 4, 2, mib, 100, 0.03, 0.5, 1.5, 0.2, 0.4)])
    with open(os.path.join(out, "py_overhead.csv"), "w") as f:
        f.write("side,mode,kind,value_us\n")
        for side, mode, kind, v in (("py", "big", "wall", 900), ("cxx", "big", "wall", 1000),
                                    ("py", "small", "outside", 70), ("cxx", "small", "outside", 10),
                                    ("ctypes", "small", "outside", 40)):
            f.write(f"{side},{mode},{kind},{v}\n")
    steps = ["host_path", "overlap", "transports", "peers", "finegrain_1M", "finegrain_16M", "growth_1", "levels",
             "py_overhead"]
    meta = {"machine": {"host": "testhost", "cpus": 2, "mem_gib": 24},
            "steps": {s: {"command": ["mpiexec", "-n", "1", f"{root}/build/perf/{s}"], "start": 1795000000.0,
                          "load_start": 0.5, "load_end": 0.75, "exit": 0} for s in steps}}
    meta["steps"]["levels"]["exit"] = 1  # a failed step: its row must stay as it was
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(meta, f)


EXPECTED = {  # figure -> text its measured cell must contain
    "capture": "0.50 / 1.50 at 4 / 8 MiB",
    "flush": "2.00 / 1.00",
    "time to durable": "0.50 / 1.50x at 4 / 8 MiB",
    "overlap": "+3.0%",
    "vs synchronous HDF5": "**12.0x** (1 rank), 5.0x (2 ranks)",
    "every step, coalesce": "**1.05** (the `memcpy` mode alone 1.02)",
    "every step, blocked": "coalesce **0.50** of the bound (100 us)",
    "every step, series vs BP5": "**0.80**",
    "every step, 16 MiB, series vs AsyncWrite": "**0.50x** (3.000 s against 6.000 s)",
    "memory": "84.0 MiB added against 42.0 MiB",
    "Python, 64 MiB": "**0.90**",
    "Python, small arrays": "60.0 us (30.0 us ctypes and the C API, 30.0 us the package)",
}


def table(text):
    import perf_table
    b = text.index(perf_table.BEGIN)
    b = text.index("\n", b) + 1
    e = text.index(perf_table.END)
    lines = text[b:e].splitlines()
    return {perf_table.cells(l)[0]: perf_table.cells(l) for l in lines[2:]}, lines, text[:b], text[e:]


def main():
    root = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.join(root, "perf"))
    import perf_table
    doc = os.path.join(root, "docs", "performance.md")
    original = open(doc).read()
    rows, lines, head, tail = table(original)
    fail = []
    if perf_table.cells(lines[0]) != perf_table.HEADER:
        fail.append(f"the table's header is not {perf_table.HEADER}")
    for l in lines[2:]:
        if len(perf_table.cells(l)) != len(perf_table.HEADER):
            fail.append(f"not {len(perf_table.HEADER)} cells: {l[:80]}")
    if len(rows) != len(lines) - 2:
        fail.append("two rows name the same figure")
    for key in perf_table.GOALS:
        if key not in rows:
            fail.append(f"the page has no row '{key}', which run_all.py generates")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results")
        os.makedirs(out)
        fixture(out, root)
        copy = os.path.join(tmp, "performance.md")
        shutil.copy(doc, copy)
        cmd = [sys.executable, os.path.join(root, "perf", "run_all.py"), "--table-only", "--out", out, "--doc", copy]
        subprocess.run(cmd, check=True)
        first = open(copy).read()
        subprocess.run(cmd, check=True)
        if open(copy).read() != first:
            fail.append("a second --table-only changed the page again")
        new, new_lines, new_head, new_tail = table(first)
        if (new_head, new_tail) != (head, tail):
            fail.append("text outside the markers changed")
        if list(new) != list(rows):
            fail.append(f"rows added, removed or reordered: {list(rows)} -> {list(new)}")
        for key, want in EXPECTED.items():
            got = new.get(key, ["", "", ""])
            if want not in got[2]:
                fail.append(f"{key}: measured cell {got[2]!r} lacks {want!r}")
            if key in rows and got[1] != rows[key][1]:
                fail.append(f"{key}: goal changed: {got[1]!r}")
            if "testhost (2 CPUs, 24 GiB)" not in got[4] or "load 0.5-0.8" not in got[4]:
                fail.append(f"{key}: machine cell not from run.json: {got[4]!r}")
            if "`mpiexec -n 1 build/perf/" not in got[5]:
                fail.append(f"{key}: command cell not from run.json, relative to the source tree: {got[5]!r}")
            if not got[6].endswith(" UTC") or not got[6].startswith("20"):
                fail.append(f"{key}: date cell {got[6]!r}")
        for key in rows:
            if key not in EXPECTED and new[key] != rows[key]:
                fail.append(f"{key}: a row the results do not measure changed")
    for f in fail:
        print("FAIL:", f)
    print("ok: run_all.py --table-only rewrites the measured rows, keeps the others" if not fail else
          f"{len(fail)} failure(s)")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
