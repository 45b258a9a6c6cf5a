#!/usr/bin/env python3
"""Runs the whole benchmark suite of perf/ in one go and leaves CSV files, markdown tables and PNG
plots in one folder (issue 8). At the default size it takes < 10 minutes on the 2-core development
machine. Each step is a separate program; its exact command line is printed and written to
<out>/commands.txt, so any figure can be repeated alone.

  python3 perf/run_all.py --build build --out results/perf          # everything
  python3 perf/run_all.py --only host_path,model                   # some steps
  python3 perf/run_all.py --list                                   # the steps and their commands
  python3 perf/run_all.py --table                                  # everything, then docs/performance.md's table
  python3 perf/run_all.py --table-only --out results/perf          # the table from an earlier run, nothing run
  python3 perf/run_all.py --smoke --out /tmp/smoke --table --doc /tmp/perf.md   # tiny sizes: the plumbing only

Steps: micro (Google Benchmark: copy bound, capture, digest, index codec), host_path (capture vs
memcpy, flush vs dd-like write, restart read vs raw read with the page cache dropped), transports
(the seeds' comparison at 1, 2, 4, 8 ranks), peers (C parallel HDF5, ADIOS2 BP5, ckpt), growth
(variables 1..100000, bytes per rank, ranks; RSS), overlap (compute loop with checkpoints: none, null,
async, sync, hdf5-sync), finegrain (seed 000: a checkpoint after every ~4 ms step at 2 ranks, 1 and 16
MiB per rank: none, ckpt wait/coalesce with fsync on and off, the same with layout series keeping every
step (and durable only at the end), ADIOS2 BP5 appending steps), everystep (issue 38: the same pattern
with a cache-resident stencil of 256 KiB, 2 MiB and 64 MiB per rank, and modes leaving one stage out), levels
(issue 19: node-local level in /dev/shm and drain vs a global directory throttled by perf/slowfs.c),
py_overhead (issue 37: the Python package's checkpoint() and protect() against C++'s, 64 MiB and 100 small
arrays per rank), model (rbIO eq. 6, Young/Daly for large machines, one level and two), plots.

Each step's command, start time, load average (start and end) and exit status go to <out>/run.json
(merged with the steps of earlier runs into the same folder). --table rewrites the rows of the table of
current figures in docs/performance.md (between its BEGIN/END markers) that the results measure, and
keeps every other row (perf/perf_table.py). Figures from a loaded machine are no current figures: run
the suite on a quiet machine before --table.
"""
import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "performance.md")


def steps(b, out, scratch, size, smoke=False):
    """(name, command, environment additions). `size` scales the data: 1 = the default. `smoke`: tiny
    sizes and one round everywhere, to check that every step runs and the table is made - not figures."""
    mpi = ["mpiexec", "--oversubscribe"]
    big = "1G" if size >= 1 else "256M"
    s = (lambda default, tiny: tiny if smoke else default)
    return [
        ("micro", [f"{b}/perf/micro", f"--benchmark_out={out}/micro.csv", "--benchmark_out_format=csv",
                   s("--benchmark_min_time=0.2", "--benchmark_min_time=0.01"),
                   s("--benchmark_repetitions=3", "--benchmark_repetitions=1"),
                   "--benchmark_report_aggregates_only=true"] + s([], ["--benchmark_filter=Memcpy|XXH3"]), {}),
        ("host_path", mpi + ["-n", "1", f"{b}/perf/host_path", "--sizes", s(f"64M,256M,{big}", "4M,8M"), "--reps",
                             s("5", "2"), "--dir", f"{scratch}/host_path", "--csv", f"{out}/host_path.csv",
                             "--read-csv", f"{out}/host_path_read.csv"], {}),
        ("transports", [sys.executable, f"{HERE}/run_transports.py", "--build", b, "--ranks"] +
                       s(["1", "2", "4", "8"], ["1", "2"]) +
                       ["--bytes", s("32M", "1M"), "--reps", s("3", "1"), "--compute-ms", s("300", "10"), "--dir",
                        f"{scratch}/transports", "--out", f"{out}/transports"], {}),
        ("peers", mpi + ["-n", s("4", "2"), f"{b}/perf/peers", "--bytes", s("64M", "1M"), "--reps", s("3", "1"),
                         "--dir", f"{scratch}/peers", "--csv", f"{out}/peers.csv"], {}),
    ] + [
        (f"growth_{n}", mpi + ["-n", str(n), f"{b}/perf/growth", "--vars", s("1,10,100,1000,10000,100000", "1,10"),
                               "--locals", s("1000,10000,40000", "10"), "--bytes", s("16M,64M,256M", "1M"), "--dir",
                               f"{scratch}/growth", "--csv", f"{out}/growth_{n}.csv"], {})
        for n in s((1, 2, 4), (1,))
    ] + [
        ("py_overhead", [sys.executable, f"{HERE}/py_overhead.py", "--build", b, "--ranks", "2", "--rounds",
                         s("3", "1"), "--repeats", s("30", "3"), "--dir", f"{scratch}/py_overhead", "--csv",
                         f"{out}/py_overhead.csv"], {}),
    ] + [
        ("overlap", mpi + ["-n", "1", f"{b}/perf/overlap", "--bytes", s("64M", "4M"), "--every", "5", "--steps",
                           s("40", "10"), "--reps", s("3", "1"), "--dir", f"{scratch}/overlap", "--csv",
                           f"{out}/overlap.csv"], {}),
    ] + [
        (f"finegrain_{m}", mpi + ["-n", "2", f"{b}/perf/finegrain", "--bytes", s(m, "64K"), "--steps", s("100", "10"),
                                  "--compute-ms", s("4", "1"), "--reps", s("3", "1"), "--dir", f"{scratch}/finegrain",
                                  "--csv", f"{out}/finegrain_{m}.csv"], {})
        for m in ("1M", "16M")
    ] + [
        ("everystep", mpi + ["-n", "2", f"{b}/perf/everystep", "--work", s("256K,2M,64M", "256K"), "--steps",
                             s("100", "10"), "--reps", s("11", "1"), "--dir", f"{scratch}/everystep", "--csv",
                             f"{out}/everystep.csv"], {}),
    ] + [
        ("levels", mpi + ["-n", "4", "-x", f"LD_PRELOAD={b}/perf/libslowfs.so", "-x",
                          f"SLOWFS_UNDER={scratch}/levels-global", "-x", "SLOWFS_MBPS=100", f"{b}/perf/levels",
                          "--bytes", s("32M", "1M"), "--ranks-per-node", "2", "--reps", s("5", "1"), "--local",
                          "/dev/shm/ckpt-perf-levels-local", "--global", f"{scratch}/levels-global", "--csv",
                          f"{out}/levels.csv"], {}),
    ] + [
        ("model", [sys.executable, f"{HERE}/model.py", "--results", out, "--out", f"{out}/model"], {}),
        ("plots", [sys.executable, f"{HERE}/plots.py", "--results", out], {}),
    ]


def machine():
    """The machine a run measured, for the table's machine cells."""
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(next(l for l in f if l.startswith("MemTotal:")).split()[1]) / (1 << 20)
    except (OSError, StopIteration, ValueError):
        pass
    return {"host": platform.node(), "cpus": os.cpu_count(), "mem_gib": round(mem), "kernel": platform.release()}


def write_table(out, doc):
    import perf_table  # perf/perf_table.py, beside this file
    rows = perf_table.rows_from_results(out, ROOT)
    if not rows:
        print(f"run_all: no results in {out} that the table of {doc} shows; nothing written")
        return 1
    text, done = perf_table.update(open(doc).read(), rows)
    with open(doc, "w") as f:
        f.write(text)
    print(f"run_all: {doc}: rows {', '.join(done)} from {out}; the other rows kept")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="results/perf")
    ap.add_argument("--scratch", default="/tmp/ckpt-perf-all", help="where checkpoints are written (deleted after)")
    ap.add_argument("--only", default="", help="comma-separated step names")
    ap.add_argument("--size", type=float, default=1, help="1 = default sizes; < 1 uses 256M instead of 1G")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round: checks the plumbing, measures nothing")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", action="store_true", help="after the run, rewrite the rows of --doc's table it measured")
    ap.add_argument("--table-only", action="store_true", help="rewrite --doc's table from the results in --out; run nothing")
    ap.add_argument("--doc", default=DOC, help="the page whose table --table rewrites (default docs/performance.md)")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    out = os.path.abspath(a.out)
    if a.smoke and (a.table or a.table_only) and os.path.abspath(a.doc) == DOC:
        sys.exit("run_all: a smoke run's figures do not belong in docs/performance.md; give --doc")
    if a.table_only:
        return write_table(out, a.doc)
    todo = steps(b, out, a.scratch, a.size, a.smoke)
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {n for n, _, _ in todo}
        if unknown:
            sys.exit(f"run_all: unknown step(s) {', '.join(sorted(unknown))}; see --list")
        todo = [s for s in todo if s[0] in want]
    if a.list:
        for n, cmd, _ in todo:
            print(f"{n}: {shlex.join(cmd)}")
        return 0
    os.makedirs(out, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPT_")}  # defaults only
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
    meta_path = os.path.join(out, "run.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {"steps": {}}
    meta["machine"] = machine()
    meta["smoke"] = a.smoke
    failed, t_all = [], time.time()
    with open(os.path.join(out, "commands.txt"), "a") as log:
        log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} load average {os.getloadavg()[0]:.2f}\n")
        for name, cmd, extra in todo:
            subprocess.run(["rm", "-rf", a.scratch])
            os.makedirs(a.scratch, exist_ok=True)
            print(f"== {name}: {shlex.join(cmd)}", flush=True)
            t0, load0 = time.time(), os.getloadavg()[0]
            with open(os.path.join(out, f"{name}.log"), "w") as f:
                p = subprocess.run(cmd, env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
                f.write(p.stdout)
            dt = time.time() - t0
            print(p.stdout.rstrip()[-4000:])
            print(f"== {name}: {'ok' if p.returncode == 0 else f'FAILED (exit {p.returncode})'} in {dt:.0f} s "
                  f"(load average {os.getloadavg()[0]:.2f})", flush=True)
            log.write(f"{name} ({dt:.0f} s, exit {p.returncode}): {shlex.join(cmd)}\n")
            meta["steps"][name] = {"command": cmd, "start": t0, "seconds": round(dt, 1), "load_start": load0,
                                   "load_end": os.getloadavg()[0], "exit": p.returncode}
            with open(meta_path, "w") as f:
                json.dump(meta, f, indent=1)
            if p.returncode != 0:
                failed.append(name)
    subprocess.run(["rm", "-rf", a.scratch])
    print(f"== all steps in {time.time() - t_all:.0f} s; results in {out}" +
          (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if a.table:
        write_table(out, a.doc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
