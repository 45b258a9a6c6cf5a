#!/usr/bin/env python3
"""The seeds' comparison (rbIO paper, seed 004; ADIOS methods, seed 003) on this machine.

Runs perf/transports for 1PFPP (posix), coIO (mpiio nf = 1 and np:nf = 2:1), rbIO (nf = ng and
nf = 1), HDF5 sync (the papers' baseline), HDF5 through ckpt, and null (NO-I/O), at the given rank
counts, and writes a CSV and a markdown table.

  python3 perf/run_transports.py --build build --ranks 4 8 --bytes 32M --out results/transports
"""
import argparse
import csv
import os
import subprocess
import sys

HEADER = ["label", "ranks", "bytes_per_rank", "blocked_max_s", "blocked_mean_s", "durable_max_s",
          "committed_max_s", "perceived_GBps", "raw_GBps", "files"]


def configs(np_):
    ng = max(1, np_ // 2)
    return [
        ("1PFPP (posix)", {"CKPT_TRANSPORT": "posix"}),
        ("coIO nf=1", {"CKPT_TRANSPORT": "mpiio", "CKPT_MPIIO_FILES": "1"}),
        ("coIO np:nf=2:1", {"CKPT_TRANSPORT": "mpiio", "CKPT_MPIIO_FILES": str(max(1, np_ // 2))}),
        (f"rbIO ng={ng} nf=ng", {"CKPT_TRANSPORT": "rbio", "CKPT_RBIO_WRITERS": str(ng)}),
        (f"rbIO ng={ng} nf=1", {"CKPT_TRANSPORT": "rbio", "CKPT_RBIO_WRITERS": str(ng), "CKPT_RBIO_FILES": "1"}),
        ("HDF5 sync (baseline)", {"CKPT_TRANSPORT": "hdf5-sync"}),
        ("HDF5 via ckpt", {"CKPT_TRANSPORT": "hdf5"}),
        ("null (NO-I/O)", {"CKPT_TRANSPORT": "null"}),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--bytes", default="32M")
    ap.add_argument("--reps", default="3")
    ap.add_argument("--compute-ms", default="300")
    ap.add_argument("--dir", default="/tmp/ckpt-perf-transports")
    ap.add_argument("--out", default="results/transports")
    a = ap.parse_args()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    exe = os.path.join(a.build, "perf", "transports")
    rows = []
    for np_ in a.ranks:
        for label, env in configs(np_):
            e = {k: v for k, v in os.environ.items() if not k.startswith("CKPT_")}
            e.update(env)
            # Oversubscribed ranks must yield when they poll, or busy-waiting collectives starve each other.
            e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1")
            d = os.path.join(a.dir, f"{np_}-{env['CKPT_TRANSPORT']}")
            subprocess.run(["rm", "-rf", d])
            cmd = ["mpiexec", "-n", str(np_), "--oversubscribe", exe, "--bytes", a.bytes, "--reps", a.reps,
                   "--compute-ms", a.compute_ms, "--label", label, "--dir", d]
            p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
            line = [l for l in p.stdout.splitlines() if l.startswith(label)]
            if p.returncode != 0 or not line:
                print(f"{label} at {np_} ranks failed: {p.stderr.strip()[-500:]}", file=sys.stderr)
                continue
            row = next(csv.reader([line[-1]]))
            rows.append(row)
            print(",".join(row), flush=True)
            subprocess.run(["rm", "-rf", d])
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows)
    with open(a.out + ".md", "w") as f:
        f.write("| method | ranks | MiB/rank | blocked max (ms) | blocked mean (ms) | committed (s) | perceived GB/s | raw GB/s | files |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r[0]} | {r[1]} | {int(r[2]) >> 20} | {float(r[3]) * 1e3:.1f} | {float(r[4]) * 1e3:.1f} | "
                    f"{float(r[6]):.3f} | {float(r[7]):.2f} | {float(r[8]):.3f} | {r[9]} |\n")
    print(f"wrote {a.out}.csv and {a.out}.md")


if __name__ == "__main__":
    main()
