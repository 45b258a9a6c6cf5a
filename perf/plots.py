#!/usr/bin/env python3
"""PNG plots from the CSV files that perf/run_all.py leaves in --results (one plot per benchmark;
a benchmark whose CSV is missing is skipped with a note).

  python3 perf/plots.py --results results/perf [--img docs/img/perf]
"""
import argparse
import csv
import os
import re
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        print(f"plots: {name} missing, skipped")
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def save(fig, img, name):
    os.makedirs(img, exist_ok=True)
    path = os.path.join(img, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plots: wrote {path}")


def host_path(results, img):
    r = rows(results, "host_path.csv")
    if not r:
        return
    rd = rows(results, "host_path_read.csv")  # restart() vs raw read, page cache dropped
    by = defaultdict(list)
    for x in r:
        by[int(x["bytes_per_rank"]) >> 20].append(x)
    sizes = sorted(by)
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    cap = [med([float(x["blocked_s"]) / float(x["memcpy_s"]) for x in by[s]]) for s in sizes]
    ax[0].bar([str(s) for s in sizes], cap, color="tab:blue")
    ax[0].axhline(1.1, color="red", ls="--", label="target 1.1x")
    ax[0].set(xlabel="MiB per rank", ylabel="checkpoint() blocked / memcpy", title="Capture vs copy bound")
    ax[0].legend()
    labels, vals = [], []
    for s in sizes:
        labels.append(f"{s}\nwrite")
        vals.append(med([float(x["raw_write_s"]) / float(x["ckpt_flush_s"]) for x in by[s]]))
        reads = [x for x in rd if int(x["bytes_per_rank"]) >> 20 == s]
        if reads:
            labels.append(f"{s}\nread")
            vals.append(med([float(x["raw_read_s"]) / float(x["restart_s"]) for x in reads]))
    ax[1].bar(labels, vals, color=["tab:orange" if "write" in l else "tab:green" for l in labels])
    ax[1].axhline(0.9, color="red", ls="--", label="target 0.9 (write)")
    ax[1].set(xlabel="MiB per rank", ylabel="ckpt bandwidth / raw bandwidth",
              title="Flush and cold restart read vs raw I/O")
    ax[1].legend()
    save(fig, img, "host_path.png")


def transports(results, img):
    r = rows(results, "transports.csv")
    if not r:
        return
    def short(label):  # "rbIO ng=4 nf=ng" -> "rbIO nf=ng": ng differs per rank count
        return re.sub(r" ng=\d+", "", label)

    labels = list(dict.fromkeys(short(x["label"]) for x in r))
    ranks = sorted({int(x["ranks"]) for x in r})
    fig, ax = plt.subplots(figsize=(10, 4))
    w = 0.8 / len(ranks)
    for i, n in enumerate(ranks):
        ys = []
        for l in labels:
            m = [float(x["blocked_max_s"]) * 1e3 for x in r if int(x["ranks"]) == n and short(x["label"]) == l]
            ys.append(m[0] if m else 0)
        ax.bar([j + i * w for j in range(len(labels))], ys, w, label=f"{n} ranks")
    ax.set_xticks([j + w * (len(ranks) - 1) / 2 for j in range(len(labels))], labels, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set(ylabel="blocked in checkpoint(), max over ranks (ms)", title="The seeds' comparison (32 MiB per rank)")
    ax.legend()
    save(fig, img, "transports.png")


def peers(results, img):
    r = rows(results, "peers.csv")
    if not r:
        return
    methods = list(dict.fromkeys(x["method"] for x in r))
    bl = [med([float(x["blocked_s"]) * 1e3 for x in r if x["method"] == m]) for m in methods]
    du = [med([float(x["durable_s"]) * 1e3 for x in r if x["method"] == m]) for m in methods]
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(methods))
    ax.bar([x - 0.2 for x in xs], bl, 0.4, label="blocked")
    ax.bar([x + 0.2 for x in xs], du, 0.4, label="time to durable")
    ax.set_xticks(list(xs), methods, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set(ylabel="ms (median)", title=f"Peers on the same data ({r[0]['ranks']} ranks, "
                                        f"{int(r[0]['bytes_per_rank']) >> 20} MiB per rank)")
    ax.legend()
    save(fig, img, "peers.png")


def growth(results, img):
    r = []
    for name in sorted(os.listdir(results)) if os.path.isdir(results) else []:
        if re.fullmatch(r"growth_\d+\.csv", name):
            r += rows(results, name)
    if not r:
        print("plots: growth_*.csv missing, skipped")
        return
    v = [x for x in r if x["mode"] == "vars"]
    ranks = sorted({int(x["ranks"]) for x in v})
    cols = ["protect_s", "blocked_s", "committed_s", "latest_s", "restart_s"]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for n in ranks:
        sub = sorted((x for x in v if int(x["ranks"]) == n), key=lambda x: int(x["vars_per_rank"]))
        nv = [int(x["vars_per_rank"]) for x in sub]
        for c in cols:
            ax[0].plot(nv, [max(float(x[c]), 1e-6) for x in sub], marker="o", label=f"{c[:-2]}, {n} ranks",
                       ls=["-", "--", ":"][ranks.index(n) % 3])
        ax[1].plot(nv, [int(x["index_bytes"]) for x in sub], marker="o", label=f"index, {n} ranks")
        ax[2].plot(nv, [int(x["rss_added_write_bytes"]) / 2**20 for x in sub], marker="o", label=f"RSS added, {n} ranks")
        ax[2].plot(nv, [(int(x["staging_bytes"]) + int(x["index_bytes"])) / 2**20 for x in sub], ls="--",
                   label=f"staging + index, {n} ranks")
    ax[0].set(xscale="log", yscale="log", xlabel="variables per rank", ylabel="s (max over ranks)",
              title="Time vs number of variables")
    ax[0].legend(fontsize=6, ncol=2)
    ax[1].set(xscale="log", yscale="log", xlabel="variables per rank", ylabel="bytes", title="Index size")
    ax[1].legend(fontsize=7)
    ax[2].set(xscale="log", yscale="log", xlabel="variables per rank", ylabel="MiB",
              title="Peak RSS added by a checkpoint")
    ax[2].legend(fontsize=7)
    save(fig, img, "growth_vars.png")


def overlap(results, img):
    r = rows(results, "overlap.csv")
    if not r:
        return
    modes = list(dict.fromkeys(x["mode"] for x in r))
    base = med([float(x["loop_s"]) for x in r if x["mode"] == "none"])
    ov = [100 * (med([float(x["loop_s"]) for x in r if x["mode"] == m]) / base - 1) for m in modes]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar(modes, ov, color=["tab:gray" if m in ("none", "null") else "tab:blue" for m in modes])
    ax.axhline(2, color="red", ls="--", label="target 2 %")
    ax.set(ylabel="loop time overhead vs no checkpoint (%)", title="Compute loop with a checkpoint every k steps")
    ax.legend()
    save(fig, img, "overlap.png")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default="results/perf")
    ap.add_argument("--img", default=None, help="where the PNGs go (default: the results folder)")
    a = ap.parse_args()
    img = a.img or a.results
    for f in (host_path, transports, peers, growth, overlap):
        try:
            f(a.results, img)
        except (KeyError, ValueError, IndexError) as e:  # a CSV from another version of a benchmark
            print(f"plots: {f.__name__} failed: {e!r}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
