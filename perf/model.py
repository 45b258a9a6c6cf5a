#!/usr/bin/env python3
"""What the measured figures predict for large machines: the rbIO speedup model (seed 004, eq. 6) and
the optimal checkpoint interval (Young 1974 / Daly 2006), fed with bandwidth ratios measured on this
machine by the other benchmarks of perf/ (CSV files in --results).

Measured inputs (ratios, so they carry over from this machine's disk to a parallel file system):
  capture efficiency  = memcpy time / checkpoint() blocked time      (host_path.csv)
  flush efficiency    = raw write time / ckpt flush time              (host_path.csv)
  read efficiency     = raw cold read time / restart() time           (host_path_read.csv)
  alpha               = share of the flush the application waits for   (transports.csv, rbIO rows:
                        blocked time / time to commit)
  BWcoIO / BWrbIO     = ratio of the raw bandwidths of coIO nf=1 and rbIO nf=1 (transports.csv)
  overlap overhead    = slowdown of compute while a flush runs          (overlap.csv, async vs null)
Everything else is an assumption, printed with the result (--help lists them; change them there).

Model (per checkpoint of S bytes per node, N nodes, file system bandwidth B, node MTBF m):
  sync cost     delta_s = N*S / (B * flush_eff)                         (everybody waits for the disk)
  async cost    delta_a = S / (D2H * capture_eff) + overlap * T_flush   (the capture; the flush runs
                T_flush = N*S / (B * flush_eff)                          behind compute, and the next
                                                                         checkpoint may not start before)
  system MTBF   M = m / N
  interval      tau = sqrt(2 * delta * M)  (Young), at least T_flush for async
  waste         W(tau) = delta / tau + (tau + R) / (2 M),  R = restart read time N*S/(B*read_eff)
  rbIO speedup  1 / ((alpha + ng/np * (1 - alpha)) * BWcoIO / BWrbIO)   (seed 004, eq. 6)

Two levels (issue 19; SCR's multi-level model, simplified): every checkpoint is committed node-locally
(with a partner copy) and every k-th one is drained to the file system in the background.
  T1 = S / (B_local * local_eff) * partner_factor      time to locally complete (the next checkpoint
                                                       may not start before: tau >= T1)
  T2 = N*S / (B * flush_eff)                           a drain (k*tau >= T2)
  cost per checkpoint  delta_1 = capture + overlap * (T1 + T2 / k)
  waste W(tau, k) = delta_1 / tau + p1 * (tau/2 + R1) / M + (1 - p1) * (k*tau/2 + R2) / M
  p1 = share of failures the local level survives (one node lost: partner), R1 = S / (B_local * read_eff),
  R2 = the file-system restart above; minimised over tau and k.
Measured for it (levels.csv, perf/levels): local_eff = raw local write / ckpt's time to locally
complete; partner_factor = locally complete with partner / without (2.0 assumed when not measured).

  python3 perf/model.py --results results/perf --out results/perf/model

Metadata at scale (issue 33; --scale CSV of perf/scale, one row per rank count and index format): the
bytes rank 0 receives per commit and each rank receives at restart N->N are fitted as a + b*P per
format (least squares over the measured P), then projected to --ranks. Their time, per commit:
  t = collectives * ceil(log2 P) * hop + bytes_rank0 / ingest + bytes_rank0 / decode
(each collective a tree of log2 P hops; rank 0 takes in and decodes what it receives; the decode rate
is measured here by perf/micro's BM_IndexDecode, the hop latency and ingest bandwidth are assumptions),
and its share of a --step-s step when checkpointing every step. Restart: bytes / decode per rank.

  python3 perf/model.py --scale /tmp/scale.csv
"""
import argparse
import csv
import math
import os
import statistics
import sys

GiB = 1024 ** 3


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measured(results):
    """Ratios measured on this machine; None where the CSV is missing (a default is then used)."""
    m = {}
    hp = read_csv(os.path.join(results, "host_path.csv"))
    if hp:
        big = max(int(r["bytes_per_rank"]) for r in hp)
        rows = [r for r in hp if int(r["bytes_per_rank"]) == big]
        m["capture_eff"] = med([float(r["memcpy_s"]) / float(r["blocked_s"]) for r in rows])
        m["flush_eff"] = med([float(r["raw_write_s"]) / float(r["ckpt_flush_s"]) for r in rows])
    rd = read_csv(os.path.join(results, "host_path_read.csv"))
    if rd:
        big = max(int(r["bytes_per_rank"]) for r in rd)
        m["read_eff"] = med([float(r["raw_read_s"]) / float(r["restart_s"]) for r in rd if int(r["bytes_per_rank"]) == big])
    tr = read_csv(os.path.join(results, "transports.csv"))
    if tr:
        np_max = max(int(r["ranks"]) for r in tr)
        at = {r["label"]: r for r in tr if int(r["ranks"]) == np_max}
        co = next((r for k, r in at.items() if k.startswith("coIO nf=1")), None)
        rb = next((r for k, r in at.items() if k.startswith("rbIO") and k.endswith("nf=1")), None)
        if co and rb:
            m["bw_co_over_rb"] = float(co["raw_GBps"]) / float(rb["raw_GBps"])
            m["alpha"] = float(rb["blocked_max_s"]) / float(rb["committed_max_s"])
            m["model_np"] = np_max
            m["model_ng"] = int(rb["label"].split("ng=")[1].split()[0])
    lv = {r["mode"]: r for r in read_csv(os.path.join(results, "levels.csv"))}
    if "local" in lv:
        m["local_eff"] = float(lv["local"]["raw_local_s"]) / float(lv["local"]["local_s"])
        if "local-partner" in lv:
            m["partner_factor"] = float(lv["local-partner"]["local_s"]) / float(lv["local"]["local_s"])
    ov = read_csv(os.path.join(results, "overlap.csv"))
    if ov:
        def loop(mode):
            return med([float(r["loop_s"]) for r in ov if r["mode"] == mode])
        a, n = loop("async"), loop("null")
        if a and n:
            m["overlap"] = max(0.0, a / n - 1.0)
    return m


def young_daly(delta, mtbf, restart, min_tau=0.0):
    tau = max(math.sqrt(2.0 * delta * mtbf), min_tau)
    waste = delta / tau + (tau + restart) / (2.0 * mtbf)
    return tau, waste


def two_levels(capture, overlap, t1, t2, mtbf, r1, r2, p1):
    """The (tau, k, waste) minimising the two-level waste above (grid over tau, every k)."""
    best = None
    tau = max(t1, 1e-3)
    while tau < 50 * mtbf:
        k = max(1, math.ceil(t2 / tau))
        for kk in range(k, k + 200):
            delta = capture + overlap * (t1 + t2 / kk)
            w = delta / tau + p1 * (tau / 2 + r1) / mtbf + (1 - p1) * (kk * tau / 2 + r2) / mtbf
            if best is None or w < best[2]:
                best = (tau, kk, w)
        tau *= 1.05
    return best


def fit_line(points):
    """Least-squares a + b*x over (x, y) points; a single point gives (y, 0)."""
    n = len(points)
    if n == 1:
        return points[0][1], 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def scale_projection(a):
    """The --scale table: measured fits of the metadata bytes, projected to a.ranks (see the docstring)."""
    rows = read_csv(a.scale)
    if not rows:
        print(f"model: no rows in {a.scale} (run perf/scale with --csv)", file=sys.stderr)
        return 1
    groups = {}
    for r in rows:
        rpw = int(r.get("ranks_per_writer") or 0)  # > 0: rbio, a file per writer
        key = (int(r.get("index_format") or 1), r.get("transport") or ("rbio" if rpw else "posix"), rpw,
               int(r["locals"]), int(r["globals"]))
        groups.setdefault(key, []).append(r)
    lines = [f"Measured fits (bytes = a + b * P over P = {sorted({int(r['ranks']) for r in rows})}):", "",
             "| index format | locals, globals | rank 0 per commit: a (KiB), b (KiB/rank) | restart N->N per rank: a, b "
             "| collectives per commit |", "|---|---|---|---|---|"]
    proj = ["", f"Projected (hop {a.hop_us:g} us, rank 0 ingest {a.ingest_gbps:g} GB/s, decode {a.decode_gbps:g} GB/s, "
            f"a checkpoint every {a.step_s:g} s step):", "",
            "| index format | locals, globals | ranks | rank 0 receives per commit (MiB) | metadata time per commit (ms) "
            "| share of a step | restart N->N: each rank decodes (MiB) | its decode (ms) |",
            "|---|---|---|---|---|---|---|---|"]
    for (fmt_no, transport, rpw, nl, ng), rs in sorted(groups.items()):
        fmt = f"{fmt_no}" + ("" if transport == "posix" else f" ({transport})" if rpw == 0 else
                             f" ({transport}, {rpw} ranks a writer)")
        commit = fit_line([(int(r["ranks"]), float(r["commit_root_bytes"])) for r in rs])
        # What a rank reads or receives of the index at restart N->N (Runtime::restart_index_bytes; older
        # CSVs without it: what the broadcast delivered).
        restart = fit_line([(int(r["ranks"]), max(float(r.get("nn_index_root_bytes") or r["nn_other_bytes"]),
                                                  float(r.get("nn_index_other_bytes") or r["nn_other_bytes"])))
                            for r in rs])
        coll = max(int(r["commit_collectives"]) for r in rs)
        lines.append(f"| {fmt} | {nl}, {ng} | {commit[0] / 1024:.1f}, {commit[1] / 1024:.3f} | "
                     f"{restart[0] / 1024:.1f}, {restart[1] / 1024:.3f} | {coll} |")
        for p in a.ranks:
            root = commit[0] + commit[1] * p
            t = coll * math.ceil(math.log2(p)) * a.hop_us * 1e-6 + root / (a.ingest_gbps * 1e9) + \
                root / (a.decode_gbps * 1e9)
            nn = restart[0] + restart[1] * p
            proj.append(f"| {fmt} | {nl}, {ng} | {p} | {root / 2**20:.2f} | {t * 1e3:.2f} | {100 * t / a.step_s:.2f} % | "
                        f"{nn / 2**20:.2f} | {nn / (a.decode_gbps * 1e9) * 1e3:.1f} |")
    print("\n".join(lines + proj))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=None, help="perf/scale's CSV: print the metadata projection only")
    ap.add_argument("--ranks", type=lambda v: [int(x) for x in v.split(",")], default=[27648, 65536],
                    help="rank counts to project to (--scale)")
    ap.add_argument("--hop-us", type=float, default=3.0, help="latency of one tree hop of a collective (--scale)")
    ap.add_argument("--ingest-gbps", type=float, default=10.0, help="what rank 0 takes in per second (--scale)")
    ap.add_argument("--decode-gbps", type=float, default=0.27,
                    help="index decode rate (--scale; perf/micro BM_IndexDecode/10000 measured 0.27 GB/s here)")
    ap.add_argument("--step-s", type=float, default=1.0, help="time step with a checkpoint every step (--scale)")
    ap.add_argument("--results", default="results/perf", help="folder with host_path.csv, transports.csv, overlap.csv")
    ap.add_argument("--out", default=None, help="write <out>.md and <out>.csv")
    ap.add_argument("--state-fraction", type=float, default=0.5, help="share of GPU memory that is checkpoint state")
    ap.add_argument("--node-mtbf-years", type=float, default=10.0, help="mean time between failures of one node")
    ap.add_argument("--p-local", type=float, default=0.85,
                    help="share of failures a partner-protected node-local level survives (one node lost)")
    a = ap.parse_args()
    if a.scale:
        return scale_projection(a)

    m = measured(a.results)
    defaults = {"capture_eff": 0.9, "flush_eff": 0.8, "read_eff": 0.8, "alpha": 0.05, "bw_co_over_rb": 1.0,
                "overlap": 0.02, "model_np": 8, "model_ng": 4, "local_eff": 0.8, "partner_factor": 2.0}
    src = {k: ("measured" if k in m else "assumed") for k in defaults}
    p = {**defaults, **m}
    # On the host a checkpoint can block for less than a memcpy (the copy goes into pinned, pre-touched
    # staging chunks); a D2H copy cannot beat the link, so the efficiency used below is at most 1.
    # The same for reads.
    p["capture_eff"] = min(p["capture_eff"], 1.0)
    p["read_eff"] = min(p["read_eff"], 1.0)  # a restart faster than a raw read is noise, not a gain to scale

    # Machines (assumptions, vendor figures; the D2H rates are not measured here - see docs/gpu.md).
    machines = [
        dict(name="Summit-class", nodes=4608, gpus=6, hbm_gib=16, d2h_GBps=45.0, fs_TBps=2.5, local_GBps=2.1,
             note="6 V100 (16 GiB) per node, NVLink2 CPU-GPU ~45 GB/s per GPU, 2.5 TB/s GPFS, 1.6 TB NVMe "
                  "per node writing ~2.1 GB/s"),
        dict(name="H100 cluster", nodes=512, gpus=8, hbm_gib=80, d2h_GBps=50.0, fs_TBps=1.0, local_GBps=12.0,
             note="8 H100 (80 GiB) per node, PCIe Gen5 ~50 GB/s per GPU, 1 TB/s parallel file system, "
                  "local NVMe RAID writing ~12 GB/s"),
    ]
    rows = []
    for mc in machines:  # capture_eff is capped at 1 here (see above)
        S = a.state_fraction * mc["gpus"] * mc["hbm_gib"] * GiB  # bytes per node
        total = S * mc["nodes"]
        B = mc["fs_TBps"] * 1e12
        t_flush = total / (B * p["flush_eff"])
        t_read = total / (B * p["read_eff"])
        capture = (S / mc["gpus"]) / (mc["d2h_GBps"] * 1e9 * p["capture_eff"])  # GPUs copy in parallel
        M = a.node_mtbf_years * 365 * 24 * 3600 / mc["nodes"]
        d_sync = t_flush
        d_async = capture + p["overlap"] * t_flush
        tau_s, w_s = young_daly(d_sync, M, t_read)
        tau_a, w_a = young_daly(d_async, M, t_read, min_tau=t_flush)
        np_, ng = mc["nodes"] * mc["gpus"], mc["nodes"]
        rb = 1.0 / ((p["alpha"] + ng / np_ * (1 - p["alpha"])) * p["bw_co_over_rb"])
        t1 = S / (mc["local_GBps"] * 1e9 * p["local_eff"]) * p["partner_factor"]
        r1 = S / (mc["local_GBps"] * 1e9 * p["read_eff"])
        tau_2, k_2, w_2 = two_levels(capture, p["overlap"], t1, t_flush, M, r1, t_read, a.p_local)
        rows.append(dict(machine=mc["name"], state_TB=total / 1e12, sync_cost_s=d_sync, async_cost_s=d_async,
                         flush_s=t_flush, restart_s=t_read, mtbf_h=M / 3600, tau_sync_s=tau_s, waste_sync=w_s,
                         tau_async_s=tau_a, waste_async=w_a, rbio_speedup=rb, local_s=t1, tau_two_s=tau_2,
                         drain_every=k_2, waste_two=w_2, note=mc["note"]))

    # The model checked against this machine: eq. 6 with the measured np, ng, alpha and bandwidth ratio.
    here = 1.0 / ((p["alpha"] + p["model_ng"] / p["model_np"] * (1 - p["alpha"])) * p["bw_co_over_rb"])

    lines = ["| input | value | source |", "|---|---|---|"]
    for k in defaults:
        v = m.get(k, p[k])
        lines.append(f"| {k} | {v:.3f} | {src[k]} |" if isinstance(v, float) else f"| {k} | {v} | {src[k]} |")
    lines += ["", f"rbIO speedup over synchronous coIO predicted by eq. 6 at np={p['model_np']}, ng={p['model_ng']}: "
              f"{here:.2f}x", "",
              "| machine | state (TB) | flush (s) | restart (s) | system MTBF (h) | sync: cost (s) | sync: interval (s) | "
              "sync: waste | async: cost (s) | async: interval (s) | async: waste | rbIO eq. 6 speedup (ng = nodes) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['machine']} | {r['state_TB']:.0f} | {r['flush_s']:.0f} | {r['restart_s']:.0f} | "
                     f"{r['mtbf_h']:.1f} | {r['sync_cost_s']:.0f} | {r['tau_sync_s']:.0f} | {100 * r['waste_sync']:.1f} % | "
                     f"{r['async_cost_s']:.2f} | {r['tau_async_s']:.0f} | {100 * r['waste_async']:.1f} % | "
                     f"{r['rbio_speedup']:.1f}x |")
    lines += ["", f"Two levels (node-local with partner copy, every k-th drained; the local level survives "
              f"{a.p_local:.0%} of failures):", "",
              "| machine | locally complete (s) | interval (s) | drain every k | waste | one level (async) waste |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['machine']} | {r['local_s']:.1f} | {r['tau_two_s']:.0f} | {r['drain_every']} | "
                     f"{100 * r['waste_two']:.2f} % | {100 * r['waste_async']:.2f} % |")
    lines += [""] + [f"- {r['machine']}: {r['note']}; state = {a.state_fraction:.0%} of HBM; node MTBF "
                     f"{a.node_mtbf_years:g} years" for r in rows]
    text = "\n".join(lines)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out + ".md", "w") as f:
            f.write(text + "\n")
        with open(a.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
